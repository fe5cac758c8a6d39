//! A real [`CircuitBreaker`] in the fleet: [`SharedCircuitBreaker`], made by [`Store::share`].
//!
//! # Why a wrapper, and what it adds to the local breaker
//! The local breaker keeps deciding every call from its own state word, in nanoseconds; the
//! wrapper adds only what the fleet needs, on the paths where it is needed:
//!
//! - **Closed path**: the local admission, then on the outcome one relaxed add to a counter
//!   and [`Link::touch`] (one relaxed load after the first call of a flush interval). No remote
//!   call, no lock, no allocation. The coordinator takes the counts
//!   ([`SharedBreaker::take_deltas`]) and flushes them with the others in one operation.
//! - **Local trips** (a failure or slow call after which the local breaker is open in a
//!   generation it did not get from the fleet) are sent as trips ([`Link::local_trip`]): a
//!   vote under quorum, the fleet's trip under `shared`.
//! - **Transitions decided anywhere** are applied through the core's one transition path
//!   (`CircuitBreaker::apply_remote`): listeners, `tracing` events and metrics fire on every
//!   replica, with the replica that caused them as [`Transition::origin`](breaker_core::breaker::Transition::origin). A transition this
//!   replica made itself and already is in is not applied twice.
//! - **Half-open probes need a lease.** When the local breaker would admit a probe, the
//!   wrapper lets it through only with a lease of the fleet's current generation; without one,
//!   the local probe is cancelled (neutral, its local slot released), the call is rejected as
//!   [`RejectReason::HalfOpenFull`], and the first such call of a half-open period requests
//!   leases (one request per replica, not per caller; after a denial the next request waits
//!   the shorter of `probe_lease` and the cooldown, since a returned lease is not pushed). So at most `half_open_probes` probes run
//!   across the fleet. A probe's end returns its lease with the outcome; a permit dropped
//!   unrecorded (cancelled, timed out) returns it as neutral, and one dropped while panicking
//!   as a failure; a lease that is never returned (the replica died) frees itself at its
//!   expiry. A lease is used locally only until `request time + probe_lease`, which is never
//!   later than the server's expiry, so a stale lease is never used.
//! - **Store errors**, per [`OnStoreError`]: degraded `local` and `open`
//!   probe by the local rules (no lease); `closed(grace)` past its grace rejects every call.
//!
//! Nothing is held across the user's call: a permit holds a lease (a value), not a lock.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // README: begin
//! use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
//! use breaker_redis::{Store, StoreConfig};
//!
//! let store = Store::connect(StoreConfig::new("redis://127.0.0.1:6379/", "shop")?).await?;
//! let breaker = CircuitBreaker::builder(BreakerPolicy::default())
//!     .name("payments")
//!     .build()?;
//! let payments = store.share(&breaker)?; // one breaker for every replica
//! match payments.try_acquire() {
//!     Ok(permit) => permit.success(), // closed: counted here, flushed in aggregate
//!     Err(rejected) => println!("{rejected}"), // open somewhere in the fleet, or no probe lease
//! }
//! payments.force_open().await?; // every replica rejects until `reset`
//! // README: end
//! # Ok(()) }
//! ```
//!
//! # Bounds and limits
//! - `probe_lease` must cover a probe's whole call (its attempt timeout plus a margin): a
//!   probe that outlives its lease may overlap with the next lease holder's.
//! - The reason of a local trip sent to the fleet is inferred from the local policy's rules
//!   (`consecutive_failures` if that rule is set, else the failure rate; a slow call's trip is
//!   `slow_call_rate`); the local breaker's own event has the exact reason.
//! - A breaker made by a keyed factory is shared under `name` plus its key, escaped
//!   ([`BreakerId::keyed`]).

use crate::config::{OnStoreError, StoreConfig};
use crate::link::{
    Deltas, Link, PolicyMismatch, ProbeGrant, RemoteUpdate, SharedBreaker, StoreStatus,
};
use crate::names::BreakerId;
use crate::names::ReplicaId;
use crate::policy::SharedPolicy;
use crate::protocol::{ForceTarget, Lease, ProbeOutcome, Reason, SharedState};
use crate::store::{RegisterError, Store};
use crate::StoreError;
use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, NeutralProbe, Permit, RejectReason, Rejected, RemoteTransition,
    SlidingWindow, State, TransitionReason,
};
use breaker_core::classify::Outcome;
use breaker_core::clock::Clock;
#[cfg(feature = "config")]
use breaker_core::config::{Policies, PolicyRegistry, StoreSettings};
use breaker_core::scope::{Scope, StoreErrorMode};
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HEALTHY: u8 = 0;
const DEGRADED_LOCAL: u8 = 1;
const DEGRADED_IGNORE: u8 = 2;
const DEGRADED_REJECT: u8 = 3;

fn status_code(s: StoreStatus) -> u8 {
    match s {
        StoreStatus::Healthy => HEALTHY,
        StoreStatus::DegradedLocal => DEGRADED_LOCAL,
        StoreStatus::DegradedIgnoreShared => DEGRADED_IGNORE,
        StoreStatus::DegradedRejectAll => DEGRADED_REJECT,
    }
}

impl SharedPolicy {
    /// The fleet-wide rules of a local [`BreakerPolicy`], under scope `shared` (`quorum` 1):
    /// the same failure rate, slow-call rate, minimum number of calls, cooldown (growth,
    /// bound, jitter), probe cap and successes to close.
    ///
    /// - A time window keeps its length and its buckets, at most [`MAX_BUCKETS`](crate::policy::MAX_BUCKETS)
    ///   (fewer buckets, same length, beyond that). A count window has no fleet-wide order
    ///   (see the crate docs); it maps to a time window of 10 s in 10 buckets.
    /// - The probe lease is `max_probe_wait` when set, else 10 s: it must cover a probe's
    ///   whole call.
    pub fn from_breaker_policy(p: &BreakerPolicy) -> SharedPolicy {
        let (window, buckets) = match p.window {
            SlidingWindow::Time { length, buckets } => {
                let most = u32::try_from(length.as_millis()).unwrap_or(u32::MAX).max(1);
                (
                    length,
                    buckets.clamp(1, crate::policy::MAX_BUCKETS).min(most),
                )
            }
            SlidingWindow::Count(_) => (Duration::from_secs(10), 10),
        };
        SharedPolicy {
            failure_rate_percent: p.failure_rate_percent,
            slow_call_rate_percent: p.slow_call.map(|s| s.rate_percent),
            min_calls: p.min_calls.max(1),
            window,
            buckets,
            cooldown: p.cooldown,
            cooldown_multiplier: p.cooldown_multiplier,
            cooldown_max: p.cooldown_max.max(p.cooldown),
            cooldown_jitter: p.cooldown_jitter,
            half_open_probes: p.half_open_probes,
            successes_to_close: p.successes_to_close,
            quorum: 1,
            probe_lease: p.max_probe_wait.unwrap_or(Duration::from_secs(10)),
        }
    }
}

#[derive(Debug)]
struct Fleet {
    view: RemoteUpdate,
    /// Granted leases with the local instant until which each may be used.
    leases: Vec<(Lease, u64)>,
    requested: bool,
    requested_at: u64,
    /// No new request before this local instant in this generation (after a denial).
    retry_at: Option<(u64, u64)>,
    requests: u64,
    mismatches: Vec<PolicyMismatch>,
}

/// What the coordinator holds of a shared breaker (not the link: dropping every handle must
/// unregister it).
struct Core {
    breaker: CircuitBreaker,
    clock: Clock,
    want: u32,
    lease: u64,
    /// How long after a denial in half-open a new lease request waits: the shorter of the
    /// lease and the cooldown (a returned lease is not pushed to the other replicas).
    retry_wait: u64,
    /// Slow-call threshold in nanoseconds, 0 when the local policy has no slow-call rule.
    slow_nanos: u64,
    early_flush: u64,
    trip_reason: Reason,
    neutral_as_success: bool,
    successes: AtomicU64,
    failures: AtomicU64,
    slow: AtomicU64,
    status: AtomicU8,
    shared_generation: AtomicU64,
    /// The local generation entered by the last transition applied from the fleet.
    remote_local: AtomicU32,
    /// The local generation of the last local trip sent (`u32::MAX`: none).
    reported: AtomicU32,
    fleet: Mutex<Fleet>,
}

impl Core {
    fn lock(&self) -> std::sync::MutexGuard<'_, Fleet> {
        self.fleet.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, update: &RemoteUpdate) {
        let origin: Arc<str> = match &update.caused_by {
            Some(r) => Arc::from(r.as_str()),
            None => Arc::from("fleet"),
        };
        let local = self.breaker.apply_remote(RemoteTransition {
            to: update.state,
            reason: transition_reason(update.reason),
            open_until: update.deadline,
            streak: Some(update.streak),
            origin,
        });
        self.remote_local.store(local, Ordering::Release);
    }
}

fn transition_reason(r: Reason) -> TransitionReason {
    match r {
        Reason::ConsecutiveFailures => TransitionReason::ConsecutiveFailures,
        Reason::FailureRate => TransitionReason::FailureRate,
        Reason::SlowCallRate => TransitionReason::SlowCallRate,
        Reason::CooldownElapsed => TransitionReason::CooldownElapsed,
        Reason::ProbeFailed => TransitionReason::ProbeFailed,
        Reason::ProbesSucceeded => TransitionReason::ProbesSucceeded,
        // A repair re-writes a state the fleet had already decided; an initial state is the
        // state of a breaker nobody has written yet; both are applied as manual (adopted).
        Reason::Manual | Reason::Repaired | Reason::Initial => TransitionReason::Manual,
    }
}

impl SharedBreaker for Core {
    fn take_deltas(&self) -> Deltas {
        Deltas {
            generation: self.shared_generation.load(Ordering::Acquire),
            successes: self.successes.swap(0, Ordering::AcqRel),
            failures: self.failures.swap(0, Ordering::AcqRel),
            slow: self.slow.swap(0, Ordering::AcqRel),
        }
    }

    fn apply_remote(&self, update: &RemoteUpdate) {
        {
            let mut g = self.lock();
            if g.view.generation != 0 && update.generation <= g.view.generation {
                return;
            }
            g.view = update.clone();
            g.leases
                .retain(|(l, _)| l.generation() == update.generation);
            if update.state != State::HalfOpen && update.state != State::Open {
                g.requested = false;
            }
            self.shared_generation
                .store(update.generation, Ordering::Release);
            // Counts of the older generation are the store's to drop; a new one starts empty.
            self.successes.store(0, Ordering::Release);
            self.failures.store(0, Ordering::Release);
            self.slow.store(0, Ordering::Release);
        }
        let (local, _) = self.breaker.state_and_generation();
        let same = local == update.state;
        // Not applied twice: a transition this replica made and is in; the fleet's closed
        // start when closed here; a half-open fleet when half-open here.
        let skip = same
            && (update.by_this_replica
                || update.state == State::Closed && update.reason == Reason::Initial
                || update.state == State::HalfOpen);
        if !skip {
            self.apply(update);
        }
    }

    fn grant_probes(&self, grant: ProbeGrant) {
        let mut g = self.lock();
        g.requested = false;
        match grant {
            ProbeGrant::Leases(leases) => {
                let generation = g.view.generation;
                let until = g.requested_at.saturating_add(self.lease);
                g.leases.extend(
                    leases
                        .into_iter()
                        .filter(|l| l.generation() == generation)
                        .map(|l| (l, until)),
                );
            }
            ProbeGrant::Denied => {
                let now = self.clock.now_nanos();
                let wait = if g.view.state == State::HalfOpen {
                    self.retry_wait
                } else {
                    1_000_000
                };
                g.retry_at = Some((g.view.generation, now.saturating_add(wait)));
                // The fleet is closed while this replica is not (its trip was of an older
                // generation, or lost): adopt the fleet's state.
                let view = g.view.clone();
                drop(g);
                let (local, _) = self.breaker.state_and_generation();
                if view.state == State::Closed && local != State::Closed {
                    self.apply(&view);
                }
            }
            ProbeGrant::StoreUnavailable => {}
        }
    }

    fn store_status(&self, status: StoreStatus) {
        self.status.store(status_code(status), Ordering::Release);
    }

    fn policy_mismatch(&self, mismatch: &PolicyMismatch) {
        tracing::warn!(
            target: "breaker",
            breaker = mismatch.id.as_str(),
            ours = mismatch.ours.as_str(),
            pinned = mismatch.pinned.as_str(),
            "shared breaker policy differs from the fleet's pinned policy; the pinned one governs"
        );
        self.lock().mismatches.push(mismatch.clone());
    }
}

struct Handle {
    core: Arc<Core>,
    link: Link,
    store: Store,
}

/// A [`CircuitBreaker`] whose state is shared by the fleet through a [`Store`]. Cloning is
/// cheap; the breaker is unregistered when the last clone is dropped. See the
/// [module docs](self).
#[derive(Clone)]
pub struct SharedCircuitBreaker {
    h: Arc<Handle>,
}

impl fmt::Debug for SharedCircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCircuitBreaker")
            .field("id", self.h.link.id())
            .field("state", &self.state())
            .field("fleet", &self.h.core.lock().view.state)
            .finish()
    }
}

impl Store {
    /// Joins `breaker` to the fleet under its name (and key, for a keyed breaker), with the
    /// fleet-wide rules of its own policy ([`SharedPolicy::from_breaker_policy`]).
    ///
    /// The breaker should read the store's clock (both default to [`Clock::system`]): shared
    /// deadlines are converted to the store's clock.
    ///
    /// # Errors
    /// [`RegisterError::Name`] if the breaker has no name or an invalid one,
    /// [`RegisterError::Duplicate`] if it is registered already, [`RegisterError::Policy`] if
    /// its policy maps to an invalid shared one.
    pub fn share(&self, breaker: &CircuitBreaker) -> Result<SharedCircuitBreaker, RegisterError> {
        let policy = SharedPolicy::from_breaker_policy(&breaker.policy());
        self.share_with(breaker, &policy)
    }

    /// Like [`share`](Self::share), with explicit fleet-wide rules (for example `quorum`).
    ///
    /// # Errors
    /// As [`share`](Self::share).
    pub fn share_with(
        &self,
        breaker: &CircuitBreaker,
        policy: &SharedPolicy,
    ) -> Result<SharedCircuitBreaker, RegisterError> {
        let id = if breaker.key().is_empty() {
            BreakerId::new(breaker.name())
        } else {
            BreakerId::keyed(breaker.name(), breaker.key())
        }
        .map_err(RegisterError::Name)?;
        let local = breaker.policy();
        let trip_reason = if local.consecutive_failures.is_some() {
            Reason::ConsecutiveFailures
        } else {
            Reason::FailureRate
        };
        let core = Arc::new(Core {
            breaker: breaker.clone(),
            clock: self.clock().clone(),
            want: policy.half_open_probes,
            lease: u64::try_from(policy.probe_lease.as_nanos()).unwrap_or(u64::MAX),
            retry_wait: u64::try_from(policy.probe_lease.min(policy.cooldown).as_nanos())
                .unwrap_or(u64::MAX),
            slow_nanos: local.slow_call.map_or(0, |s| {
                u64::try_from(s.duration.as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1)
            }),
            early_flush: u64::from(policy.min_calls.max(1)),
            trip_reason,
            neutral_as_success: local.neutral_probe == NeutralProbe::CountAsSuccess,
            successes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            slow: AtomicU64::new(0),
            status: AtomicU8::new(status_code(self.status())),
            shared_generation: AtomicU64::new(0),
            remote_local: AtomicU32::new(u32::MAX),
            reported: AtomicU32::new(u32::MAX),
            fleet: Mutex::new(Fleet {
                view: RemoteUpdate {
                    generation: 0,
                    state: State::Closed,
                    deadline: None,
                    streak: 0,
                    caused_by: None,
                    by_this_replica: false,
                    reason: Reason::Initial,
                },
                leases: Vec::new(),
                requested: false,
                requested_at: 0,
                retry_at: None,
                requests: 0,
                mismatches: Vec::new(),
            }),
        });
        let link = self.register(id, policy, Arc::clone(&core) as Arc<dyn SharedBreaker>)?;
        Ok(SharedCircuitBreaker {
            h: Arc::new(Handle {
                core,
                link,
                store: self.clone(),
            }),
        })
    }
}

impl SharedCircuitBreaker {
    /// Asks to make a call: the local breaker's decision, plus a fleet probe lease where the
    /// local breaker would admit a half-open probe. Never blocks and never waits.
    ///
    /// # Errors
    /// The local breaker's [`Rejected`]; [`RejectReason::HalfOpenFull`] for a probe without a
    /// fleet lease (every fleet slot taken, or the lease not granted yet); [`RejectReason::Open`]
    /// while the store is unreachable past the grace of `closed(grace)`.
    #[inline]
    pub fn try_acquire(&self) -> Result<SharedPermit<'_>, Rejected> {
        let h = &*self.h;
        let c = &*h.core;
        let status = c.status.load(Ordering::Relaxed);
        if status == DEGRADED_REJECT {
            return Err(c.breaker.rejection(RejectReason::Open, None));
        }
        let start = if c.slow_nanos != 0 {
            c.clock.now_nanos()
        } else {
            0
        };
        let permit = c.breaker.try_acquire()?;
        if !permit.is_probe() {
            return Ok(SharedPermit {
                h,
                permit: Some(permit),
                lease: None,
                closed: true,
                start,
            });
        }
        self.probe(permit, status, start)
    }

    #[cold]
    fn probe<'a>(
        &'a self,
        permit: Permit<'a>,
        status: u8,
        start: u64,
    ) -> Result<SharedPermit<'a>, Rejected> {
        let h = &*self.h;
        let c = &*h.core;
        let local = |permit, lease| SharedPermit {
            h,
            permit: Some(permit),
            lease,
            closed: false,
            start,
        };
        if status != HEALTHY {
            // Degraded `local` or `open`: the local rules decide the probe.
            return Ok(local(permit, None));
        }
        let now = c.clock.now_nanos();
        let mut g = c.lock();
        let generation = g.view.generation;
        g.leases
            .retain(|(l, until)| l.generation() == generation && now < *until);
        if let Some((lease, _)) = g.leases.pop() {
            drop(g);
            return Ok(local(permit, Some(Box::new(lease))));
        }
        let waiting = g
            .retry_at
            .is_some_and(|(gen, at)| gen == generation && now < at);
        let ask = !g.requested && !waiting;
        if ask {
            g.requested = true;
            g.requested_at = now;
            g.requests += 1;
        }
        drop(g);
        // No lease: the local probe is cancelled (neutral; its local slot is released).
        drop(permit);
        if ask {
            h.link.request_probes(c.want);
        }
        Err(c.breaker.rejection(RejectReason::HalfOpenFull, None))
    }

    /// Runs `call` under the breaker: `Ok` is a success, `Err` a failure. A future dropped
    /// before it completes is a cancellation (a probe's lease is returned as neutral).
    ///
    /// # Errors
    /// `Err(Err(rejected))` when the call was not admitted, `Err(Ok(e))` with the call's error.
    pub async fn call<T, E, F, Fut>(&self, call: F) -> Result<T, Result<E, Rejected>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let permit = self.try_acquire().map_err(Err)?;
        match call().await {
            Ok(v) => {
                permit.success();
                Ok(v)
            }
            Err(e) => {
                permit.failure();
                Err(Ok(e))
            }
        }
    }

    /// The local breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.h.core.breaker
    }

    /// The shared id.
    pub fn id(&self) -> &BreakerId {
        self.h.link.id()
    }

    /// The local breaker's state.
    pub fn state(&self) -> State {
        self.h.core.breaker.state()
    }

    /// The fleet's state as last told to this replica.
    pub fn fleet_state(&self) -> RemoteUpdate {
        self.h.core.lock().view.clone()
    }

    /// Probe-lease requests this replica sent.
    pub fn lease_requests(&self) -> u64 {
        self.h.core.lock().requests
    }

    /// Policy mismatches reported for this breaker.
    pub fn mismatches(&self) -> Vec<PolicyMismatch> {
        self.h.core.lock().mismatches.clone()
    }

    /// Fleet-wide force open: every replica rejects until [`reset`](Self::reset) or
    /// [`force_closed`](Self::force_closed).
    ///
    /// # Errors
    /// The store's error (nothing changes then, here or elsewhere).
    pub async fn force_open(&self) -> Result<SharedState, StoreError> {
        self.h.store.force(self.id(), ForceTarget::ForcedOpen).await
    }

    /// Fleet-wide force closed: every replica admits every call and records nothing.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn force_closed(&self) -> Result<SharedState, StoreError> {
        self.h
            .store
            .force(self.id(), ForceTarget::ForcedClosed)
            .await
    }

    /// Fleet-wide open with a fresh cooldown, as if tripped.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn open(&self) -> Result<SharedState, StoreError> {
        self.h.store.force(self.id(), ForceTarget::Open).await
    }

    /// Fleet-wide reset: closed, window and streak cleared, on every replica.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn reset(&self) -> Result<SharedState, StoreError> {
        self.h.store.reset(self.id()).await
    }
}

/// Permission to make one call, from [`SharedCircuitBreaker::try_acquire`]: a local
/// [`Permit`], plus the fleet probe lease of a half-open probe.
///
/// Dropping it unrecorded is a cancellation (neutral; a lease is returned at once), or a
/// failure while the thread panics (a lease is returned as a failed probe).
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct SharedPermit<'a> {
    h: &'a Handle,
    permit: Option<Permit<'a>>,
    /// Boxed: a closed call's permit stays small (it is returned by value on the hot path).
    lease: Option<Box<Lease>>,
    closed: bool,
    start: u64,
}

impl fmt::Debug for SharedPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPermit")
            .field("probe", &self.is_probe())
            .field("lease", &self.lease)
            .finish()
    }
}

impl SharedPermit<'_> {
    /// Records a success.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success)
    }

    /// Records a failure.
    pub fn failure(self) {
        self.record(Outcome::Failure)
    }

    /// Records an ignored outcome (a probe's lease is returned as neutral, or as a success
    /// under [`NeutralProbe::CountAsSuccess`]).
    pub fn ignored(self) {
        self.record(Outcome::Ignored)
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        !self.closed
    }

    /// The fleet lease of a probe (`None` for a closed call, or a local probe while the store
    /// is degraded).
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_deref()
    }

    /// Records `outcome`.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        let c = &*self.h.core;
        let slow = self.closed
            && c.slow_nanos != 0
            && c.clock.now_nanos().saturating_sub(self.start) >= c.slow_nanos;
        if let Some(p) = self.permit.take() {
            p.record(outcome);
        }
        if self.closed {
            match outcome {
                Outcome::Success => {
                    c.successes.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Failure => {
                    let n = c.failures.fetch_add(1, Ordering::Relaxed) + 1;
                    if n == c.early_flush {
                        self.h.link.flush_soon();
                    }
                }
                Outcome::Ignored => return,
            }
            if slow {
                c.slow.fetch_add(1, Ordering::Relaxed);
            }
            self.h.link.touch();
            if outcome == Outcome::Failure || slow {
                self.check_trip(slow);
            }
        } else if let Some(lease) = self.lease.take().map(|l| *l) {
            let end = match outcome {
                Outcome::Success => ProbeOutcome::Success,
                Outcome::Failure => ProbeOutcome::Failure,
                Outcome::Ignored if c.neutral_as_success => ProbeOutcome::Success,
                Outcome::Ignored => ProbeOutcome::Neutral,
            };
            self.h.link.end_probe(lease, end);
        }
    }

    #[inline]
    fn check_trip(&self, slow: bool) {
        let c = &*self.h.core;
        let (state, local) = c.breaker.state_and_generation();
        if state == State::Open {
            self.tripped(local, slow);
        }
    }

    #[cold]
    fn tripped(&self, local: u32, slow: bool) {
        let c = &*self.h.core;
        if local == c.remote_local.load(Ordering::Acquire)
            || c.reported.swap(local, Ordering::AcqRel) == local
        {
            return;
        }
        let reason = if slow {
            Reason::SlowCallRate
        } else {
            c.trip_reason
        };
        self.h
            .link
            .local_trip(c.shared_generation.load(Ordering::Acquire), reason);
    }
}

impl Drop for SharedPermit<'_> {
    fn drop(&mut self) {
        // The local permit records a cancellation (or a failure while panicking) itself.
        drop(self.permit.take());
        if let Some(lease) = self.lease.take().map(|l| *l) {
            let end = if std::thread::panicking() {
                ProbeOutcome::Failure
            } else {
                ProbeOutcome::Neutral
            };
            self.h.link.end_probe(lease, end);
        }
    }
}

// --- Scopes ------------------------------------------------------------------------------------

impl From<StoreErrorMode> for OnStoreError {
    fn from(m: StoreErrorMode) -> OnStoreError {
        match m {
            StoreErrorMode::Local => OnStoreError::Local,
            StoreErrorMode::Open => OnStoreError::Open,
            StoreErrorMode::Closed { grace } => OnStoreError::Closed { grace },
        }
    }
}

#[cfg(feature = "config")]
impl StoreConfig {
    /// The configuration of a config file's `[store]` table
    /// ([`Policies::store`](breaker_core::config::Policies::store)), environment overrides
    /// (`BREAKER__STORE__URL`, ..) applied.
    ///
    /// # Errors
    /// As [`StoreConfig::new`], and [`StoreError::Config`] for an invalid replica id.
    pub fn from_settings(s: &StoreSettings) -> Result<StoreConfig, StoreError> {
        let mut c = StoreConfig::new(&s.url, &s.namespace)?.on_error(s.on_error.into());
        if let Some(r) = &s.replica {
            let r = ReplicaId::new(r).map_err(|e| StoreError::Config {
                message: format!("store replica: {e}"),
            })?;
            c = c.replica(r);
        }
        if let Some(d) = s.flush_interval {
            c = c.flush_interval(d);
        }
        Ok(c)
    }
}

/// Why a breaker could not be given its scope.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    /// The scope is shared but no store is installed (or given): never a silent fall-back to
    /// a local breaker.
    #[error(
        "breaker `{breaker}` has scope `{scope}` but no store is installed: connect one \
         (`breaker_redis::Store::connect`) and install it (`breaker_redis::install`), or give \
         the policy scope `local`"
    )]
    NoStore {
        /// The breaker's name.
        breaker: String,
        /// Its scope.
        scope: Scope,
    },
    /// The store refused the breaker.
    #[error(transparent)]
    Register(#[from] RegisterError),
}

static INSTALLED: std::sync::OnceLock<Store> = std::sync::OnceLock::new();

/// Installs `store` as the process's store for breakers of scope `shared` or `quorum(k)`
/// ([`share_scoped`]). Once per process.
///
/// # Errors
/// The store given back if one is installed already.
pub fn install(store: Store) -> Result<(), Store> {
    INSTALLED.set(store)
}

/// The installed store, if any.
pub fn installed() -> Option<&'static Store> {
    INSTALLED.get()
}

impl Store {
    /// Gives `breaker` its scope: `local` leaves it alone (`None`), `shared` shares it
    /// ([`share`](Self::share)), `quorum(k)` shares it with the fleet opening when `k`
    /// distinct replicas tripped locally within the window.
    ///
    /// # Errors
    /// As [`share`](Self::share).
    pub fn share_scoped(
        &self,
        breaker: &CircuitBreaker,
        scope: Scope,
    ) -> Result<Option<SharedCircuitBreaker>, RegisterError> {
        let Some(quorum) = scope.quorum() else {
            return Ok(None);
        };
        let policy = SharedPolicy {
            quorum,
            ..SharedPolicy::from_breaker_policy(&breaker.policy())
        };
        self.share_with(breaker, &policy).map(Some)
    }
}

/// Gives `breaker` its scope with the [installed](install) store: `local` is `Ok(None)`.
///
/// # Errors
/// [`ShareError::NoStore`] for a shared scope with no store installed; the store's
/// [`RegisterError`].
pub fn share_scoped(
    breaker: &CircuitBreaker,
    scope: Scope,
) -> Result<Option<SharedCircuitBreaker>, ShareError> {
    scoped(installed(), breaker, scope)
}

fn scoped(
    store: Option<&Store>,
    breaker: &CircuitBreaker,
    scope: Scope,
) -> Result<Option<SharedCircuitBreaker>, ShareError> {
    if !scope.is_shared() {
        return Ok(None);
    }
    let store = store.ok_or_else(|| ShareError::NoStore {
        breaker: breaker.name().to_owned(),
        scope,
    })?;
    Ok(store.share_scoped(breaker, scope)?)
}

/// Shares the breaker of every policy of `policies` whose scope is `shared` or `quorum(k)`
/// (`scope = ".."` in a config file), from `registry` (loaded from the same policies), with
/// `store` (`None`: the [installed](install) one). The map is by policy name; policies of
/// scope `local` are not in it.
///
/// # Errors
/// [`ShareError::NoStore`] if a policy's scope is shared and there is no store; the store's
/// [`RegisterError`].
#[cfg(feature = "config")]
pub fn share_policies(
    store: Option<&Store>,
    policies: &Policies,
    registry: &PolicyRegistry,
) -> Result<std::collections::BTreeMap<String, SharedCircuitBreaker>, ShareError> {
    let store = match store {
        Some(s) => Some(s),
        None => installed(),
    };
    let mut out = std::collections::BTreeMap::new();
    for (name, _) in policies.iter() {
        let scope = policies.scope(name);
        let Some(breaker) = registry.breaker(name) else {
            continue;
        };
        if let Some(shared) = scoped(store, &breaker, scope)? {
            out.insert(name.to_owned(), shared);
        }
    }
    Ok(out)
}
