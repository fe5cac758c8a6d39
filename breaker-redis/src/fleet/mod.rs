//! A real [`CircuitBreaker`] in the fleet: [`Store::share`] makes the breaker itself
//! fleet-wide, and returns a [`SharedCircuitBreaker`] for fleet-wide manual control.
//!
//! # Why a hook in the breaker, and what it adds to the local breaker
//! `Store::share` installs a fleet hook in the breaker (the core's hidden
//! `CircuitBreaker::install_fleet_hook`), so every caller of the breaker runs it shared: its
//! own [`try_acquire`](CircuitBreaker::try_acquire), a `Pipeline` built with it, the tower
//! layers, a keyed registry over a shared policy's factory, and `#[circuit_breaker(scope =
//! "shared")]` (through [`install`]). An earlier design wrapped the breaker instead, which
//! only the wrapper's callers saw. The local breaker keeps deciding every call from its own
//! state word, in nanoseconds; the hook is consulted only where the fleet needs it:
//!
//! - **Closed path**: the local admission, unchanged; on the outcome one relaxed add to a
//!   counter kept in the breaker and one relaxed load of its `active` flag (the hook is
//!   called, to mark the breaker active with [`Link::touch`], only for the first outcome of a
//!   flush interval). No remote call, no lock, no allocation, no virtual call. The coordinator
//!   takes the counts ([`SharedBreaker::take_deltas`]) and flushes them with the others in
//!   one operation.
//! - **Local trips** (closed -> open, decided by this replica's rules) are sent as trips
//!   ([`Link::local_trip`]) with their exact reason: a vote under quorum, the fleet's trip
//!   under `shared`.
//! - **Transitions decided anywhere** are applied through the core's one transition path
//!   (`CircuitBreaker::apply_remote`): listeners, `tracing` events and metrics fire on every
//!   replica, with the replica that caused them as [`Transition::origin`](breaker_core::breaker::Transition::origin). A transition this
//!   replica made itself and already is in is not applied twice.
//! - **Half-open probes need a lease.** When the local breaker grants a probe slot, the hook
//!   lets the probe through only with a lease of the fleet's current generation (kept with
//!   the permit); without one, the local slot is released (neutral), the call is rejected as
//!   [`RejectReason::HalfOpenFull`], and the first such call of a half-open period requests
//!   leases (one request per replica, not per caller; after a denial the next request waits
//!   the shorter of `probe_lease` and the cooldown, since a returned lease is not pushed). So at most `half_open_probes` probes run
//!   across the fleet. A probe's end returns its lease with the outcome (a slow success as a
//!   failure, as the local breaker counts it); a permit dropped unrecorded (cancelled, timed
//!   out) returns it as neutral, and one dropped while panicking as a failure; a lease that
//!   is never returned (the replica died) frees itself at its expiry. A lease is used
//!   locally only until `request time + probe_lease`, which is never later than the server's
//!   expiry, so a stale lease is never used.
//! - **Store errors**, per [`OnStoreError`]: degraded `local` and `open` probe by the local
//!   rules (no lease); `closed(grace)` past its grace rejects every call: the breaker is
//!   forced open locally (a transition with origin `store-unreachable`; its rejections read
//!   [`RejectReason::ForcedOpen`], and [`RejectReason::Open`] through
//!   [`SharedCircuitBreaker::try_acquire`]) until the store is back, when the fleet's state is
//!   applied again.
//!
//! Nothing is held across the user's call: a permit holds a lease token (a value), not a lock.
//!
//! # Lifetime
//! The breaker owns its hook, which owns the registration ([`Link`]) and one handle of the
//! breaker (to apply the fleet's transitions). Once nothing else holds the breaker (its
//! clones, permits, pipelines and every [`SharedCircuitBreaker`] are gone), the coordinator's
//! sweep (a bounded batch per flush, every breaker within 64 flushes) lets that handle go and
//! the breaker is unregistered. A keyed registry's eviction does not count the hook's handle;
//! a key made again before the sweep found its old breaker replaces the old registration.
//!
//! ```no_run
//! # use breaker_core as breaker;
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // README: begin
//! use breaker::{BreakerPolicy, CircuitBreaker, Pipeline};
//! use breaker_redis::{Store, StoreConfig};
//!
//! let store = Store::connect(StoreConfig::new("redis://127.0.0.1:6379/", "shop")?).await?;
//! let breaker = CircuitBreaker::builder(BreakerPolicy::default())
//!     .name("payments")
//!     .build()?;
//! let payments = store.share(&breaker)?; // from now on one breaker for every replica
//! store.sync().await?; // read the fleet's state before the first call (a late joiner)
//! match breaker.try_acquire() {
//!     Ok(permit) => permit.success(), // closed: counted here, flushed in aggregate
//!     Err(rejected) => println!("{rejected}"), // open somewhere in the fleet, or no probe lease
//! }
//! // Every caller of the breaker is shared: a pipeline, the tower layers, ..
//! let pipeline = Pipeline::builder().breaker(breaker.clone()).build()?;
//! let paid = pipeline.call(|| async { Ok::<_, std::io::Error>("paid") }).await;
//! payments.force_open().await?; // every replica rejects until `reset`
//! // README: end
//! # let _ = paid;
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
//!
//! # Files
//! - `mod.rs`: the fleet-side state of a shared breaker (the hook in the breaker, what the
//!   coordinator reads and applies) and [`Store::share`].
//! - `calls.rs`: the calls of a [`SharedCircuitBreaker`] and its [`SharedPermit`].
//! - `install.rs`: the process's installed store and the scopes of policies
//!   ([`install`], [`share_scoped`], `share_policies`).

use crate::config::OnStoreError;
use crate::link::{
    Deltas, Link, PolicyMismatch, ProbeGrant, RemoteUpdate, SharedBreaker, StoreStatus,
};
use crate::names::BreakerId;
use crate::policy::SharedPolicy;
use crate::protocol::{ForceTarget, Lease, ProbeOutcome, Reason, SharedState};
use crate::store::{RegisterError, Store};
use crate::StoreError;
use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, FleetHook, FleetProbe, FleetProbeEnd, HookError, Permit,
    RejectReason, Rejected, RemoteTransition, SlidingWindow, State, TransitionReason,
};
use breaker_core::classify::Outcome;
use breaker_core::clock::Clock;
#[cfg(feature = "config")]
use breaker_core::config::{Policies, PolicyRegistry, StoreSettings};
use breaker_core::scope::{Scope, StoreErrorMode};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod calls;
mod hook;
mod install;

pub use calls::SharedPermit;
#[cfg(feature = "config")]
pub use install::share_policies;
pub use install::{install, installed, share_scoped, AlreadyInstalled, ShareError};

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
    /// Leases held by probes in flight, by the token their permits carry.
    in_use: Vec<(u32, Lease)>,
    next_token: u32,
    requested: bool,
    requested_at: u64,
    /// No new request before this local instant in this generation (after a denial).
    retry_at: Option<(u64, u64)>,
    requests: u64,
    mismatches: Vec<PolicyMismatch>,
    /// The local breaker was forced open because the store is unreachable past the grace of
    /// `closed(grace)`; the fleet's view is re-applied when it is back.
    forced_by_store: bool,
}

/// The fleet side of a shared breaker: the hook installed in the local breaker
/// ([`FleetHook`]) and what the coordinator calls ([`SharedBreaker`]).
///
/// Ownership: the local breaker owns its hook (this), which owns the [`Link`] (the
/// registration); the hook holds one handle of the breaker to apply the fleet's transitions.
/// That cycle is broken by the coordinator's sweep ([`SharedBreaker::release_if_unused`]):
/// once the hook's handle is the breaker's only one (every user handle, every
/// [`SharedCircuitBreaker`] and every permit gone), the hook lets it go, the breaker drops
/// with its hook and the link, and the breaker is unregistered.
struct Core {
    breaker: Mutex<Option<CircuitBreaker>>,
    link: std::sync::OnceLock<Link>,
    clock: Clock,
    want: u32,
    lease: u64,
    /// How long after a denial in half-open a new lease request waits: the shorter of the
    /// lease and the cooldown (a returned lease is not pushed to the other replicas).
    retry_wait: u64,
    status: AtomicU8,
    shared_generation: AtomicU64,
    fleet: Mutex<Fleet>,
}

impl Core {
    fn lock(&self) -> std::sync::MutexGuard<'_, Fleet> {
        self.fleet.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The local breaker (a handle), unless it has been let go.
    fn breaker(&self) -> Option<CircuitBreaker> {
        self.breaker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn apply(&self, update: &RemoteUpdate) {
        let Some(breaker) = self.breaker() else {
            return;
        };
        let origin: Arc<str> = match &update.caused_by {
            Some(r) => Arc::from(r.as_str()),
            None => Arc::from("fleet"),
        };
        // The deadline is a reading of the store's clock: moved to the breaker's (they may
        // differ: an annotated function's breaker reads tokio's clock).
        let open_until = update.deadline.map(|d| {
            let left = d.saturating_sub(self.clock.now_nanos());
            breaker.now_nanos().saturating_add(left)
        });
        breaker.apply_remote(RemoteTransition {
            to: update.state,
            reason: transition_reason(update.reason),
            open_until,
            streak: Some(update.streak),
            origin,
        });
    }

    /// The lease held by the probe whose permit carries `token`.
    fn lease_of(&self, token: u32) -> Option<Lease> {
        self.lock()
            .in_use
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, l)| l.clone())
    }

    fn lease_requests(&self) -> u64 {
        self.lock().requests
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
        let generation = self.shared_generation.load(Ordering::Acquire);
        let taken = self
            .breaker()
            .map(|b| b.take_fleet_counts())
            .unwrap_or_default();
        Deltas {
            generation,
            successes: taken.successes,
            failures: taken.failures,
            slow: taken.slow,
        }
    }

    fn apply_remote(&self, update: &RemoteUpdate) {
        let Some(breaker) = self.breaker() else {
            return;
        };
        {
            let mut g = self.lock();
            if g.view.generation != 0 && update.generation <= g.view.generation {
                return;
            }
            g.view = update.clone();
            g.forced_by_store = false;
            g.leases
                .retain(|(l, _)| l.generation() == update.generation);
            if update.state != State::HalfOpen && update.state != State::Open {
                g.requested = false;
            }
            self.shared_generation
                .store(update.generation, Ordering::Release);
            // Counts of the older generation are the store's to drop; a new one starts empty.
            breaker.clear_fleet_counts();
        }
        let (local, _) = breaker.state_and_generation();
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
                let local = self.breaker().map(|b| b.state());
                if view.state == State::Closed && local.is_some_and(|l| l != State::Closed) {
                    self.apply(&view);
                }
            }
            ProbeGrant::StoreUnavailable => {}
        }
    }

    fn store_status(&self, status: StoreStatus) {
        let code = status_code(status);
        let before = self.status.swap(code, Ordering::AcqRel);
        if code == before {
            return;
        }
        let Some(breaker) = self.breaker() else {
            return;
        };
        if code == DEGRADED_REJECT {
            // Every caller of the breaker rejects (the closed path asks no hook): forced open
            // locally, named after the store, until the store is back.
            self.lock().forced_by_store = true;
            breaker.apply_remote(RemoteTransition {
                to: State::ForcedOpen,
                reason: TransitionReason::Manual,
                open_until: None,
                streak: None,
                origin: Arc::from("store-unreachable"),
            });
        } else if before == DEGRADED_REJECT {
            let view = {
                let mut g = self.lock();
                std::mem::take(&mut g.forced_by_store).then(|| g.view.clone())
            };
            if let Some(view) = view {
                self.apply(&view);
            }
        }
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

    fn release_if_unused(&self) -> bool {
        let released = {
            let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
            match &*b {
                Some(breaker) if breaker.all_handles() == 1 => b.take(),
                _ => None,
            }
        };
        // Dropped outside the lock: the breaker drops its hook (this) and the link with it.
        released.is_some()
    }
}

struct Handle {
    core: Arc<Core>,
    breaker: CircuitBreaker,
    store: Store,
}

/// A [`CircuitBreaker`] whose state is shared by the fleet through a [`Store`]: the handle
/// for fleet-wide manual control and the fleet's view. The breaker itself is shared too
/// ([`Store::share`] installs the fleet hook in it): its plain
/// [`try_acquire`](CircuitBreaker::try_acquire), a `Pipeline` or `#[circuit_breaker]` built
/// with it run it fleet-wide. Cloning is cheap; the breaker is unregistered once every handle
/// of it (these, the breaker's own clones and its permits) is dropped, at the coordinator's
/// next sweep. See the [module docs](self).
#[derive(Clone)]
pub struct SharedCircuitBreaker {
    h: Arc<Handle>,
}

impl fmt::Debug for SharedCircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCircuitBreaker")
            .field("id", self.id())
            .field("state", &self.state())
            .field("fleet", &self.h.core.lock().view.state)
            .finish()
    }
}

impl Store {
    /// Joins `breaker` to the fleet under its name (and key, for a keyed breaker), with the
    /// fleet-wide rules of its own policy ([`SharedPolicy::from_breaker_policy`]).
    ///
    /// The breaker itself becomes fleet-wide (its fleet hook is installed): every clone and
    /// every caller of it (its `try_acquire`, a `Pipeline`, the tower layers) runs it shared,
    /// whether or not the returned handle is kept. It stays registered until nothing holds
    /// it (see the [module docs](self#lifetime)).
    ///
    /// Shared deadlines arrive as readings of the store's clock and are moved to the
    /// breaker's own clock when applied, so the two may differ (an annotated function's
    /// breaker reads tokio's clock, a store [`Clock::system`] by default).
    ///
    /// # Errors
    /// [`RegisterError::Name`] if the breaker has no name or an invalid one,
    /// [`RegisterError::Duplicate`] if it is registered already, [`RegisterError::Policy`] if
    /// its policy maps to an invalid shared one, [`RegisterError::NotShareable`] if it is
    /// shared already (with another store) or was made without room for the hook (by a
    /// factory with lifetime totals off, no sliding window and no key).
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
        // No room is told before registering; a breaker shared already is told after (the
        // same id registered with this store reads as a duplicate registration).
        if let Err(reason @ HookError::NoRoom) = breaker.fleet_hook_room() {
            return Err(RegisterError::NotShareable {
                breaker: breaker.name().to_owned(),
                reason,
            });
        }
        let core = Arc::new(Core {
            breaker: Mutex::new(Some(breaker.clone())),
            link: std::sync::OnceLock::new(),
            clock: self.clock().clone(),
            want: policy.half_open_probes,
            lease: u64::try_from(policy.probe_lease.as_nanos()).unwrap_or(u64::MAX),
            retry_wait: u64::try_from(policy.probe_lease.min(policy.cooldown).as_nanos())
                .unwrap_or(u64::MAX),
            status: AtomicU8::new(status_code(self.status())),
            shared_generation: AtomicU64::new(0),
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
                in_use: Vec::new(),
                next_token: 0,
                requested: false,
                requested_at: 0,
                retry_at: None,
                requests: 0,
                mismatches: Vec::new(),
                forced_by_store: false,
            }),
        });
        let link = self.register(id, policy, Arc::clone(&core) as Arc<dyn SharedBreaker>)?;
        let _ = core.link.set(link);
        let early = u64::from(policy.min_calls.max(1));
        // On a refusal (another thread shared it first) `core` drops here with its link,
        // which unregisters it.
        breaker
            .install_fleet_hook(Arc::clone(&core) as Arc<dyn FleetHook>, early)
            .map_err(|reason| RegisterError::NotShareable {
                breaker: breaker.name().to_owned(),
                reason,
            })?;
        Ok(SharedCircuitBreaker {
            h: Arc::new(Handle {
                core,
                breaker: breaker.clone(),
                store: self.clone(),
            }),
        })
    }
}
