//! A real [`CircuitBreaker`] in the fleet: [`Store::share`] makes the breaker itself
//! fleet-wide, and returns a [`SharedCircuitBreaker`] for fleet-wide manual control.
//!
//! # One state machine
//! The fleet's breaker is the core breaker's state machine, not a second one: the store keeps
//! the core's state word, and every fleet decision is one of the core's deciders
//! (`breaker_core::breaker::decide`) taken on the word the store answered and written back with
//! the store's fenced compare-and-set (the crate's `fleet/plan.rs`). A local breaker and the fleet decide a trip,
//! a promotion, a probe's end, a cooldown (growth, jitter) and a manual change with the very
//! same code; the store's script keeps no breaker rule (see `protocol`).
//!
//! # Why a hook in the breaker, and what it adds to the local breaker
//! `Store::share` installs a fleet hook in the breaker (the core's hidden
//! `CircuitBreaker::install_fleet_hook`), so every caller of the breaker runs it shared: its
//! own [`try_acquire`](CircuitBreaker::try_acquire), a `Pipeline` built with it, the tower
//! layers, a keyed registry over a shared policy's factory, and `#[circuit_breaker(scope =
//! "shared")]` (through [`install`]). The local breaker keeps deciding every call from its own
//! state word; the hook is consulted only where the fleet needs it:
//!
//! - **Closed path**: the local admission, unchanged; on the outcome one relaxed add to a
//!   counter kept in the breaker and one relaxed load of its `active` flag. No remote call, no
//!   lock, no allocation, no virtual call. The coordinator takes the counts and flushes them
//!   with the others in one operation; the fleet's rate rules (the core's `rate_trip`) run on
//!   the window's totals the store answers.
//! - **Local trips** (closed -> open, decided by this replica's rules) become the fleet's trip
//!   (the core's `trip` on the fleet's word), or a vote under `quorum(k)`.
//! - **Transitions decided anywhere** are applied through the core's one transition path
//!   (`CircuitBreaker::apply_remote`) where the local state differs: listeners, `tracing`
//!   events and metrics fire on every replica, with the replica that caused them as
//!   [`Transition::origin`](breaker_core::breaker::Transition::origin).
//! - **Half-open probes need a lease.** When the local breaker grants a probe slot, the hook
//!   lets the probe through only with a lease of the fleet's current period; without one, the
//!   local slot is released (neutral), the call is rejected as [`RejectReason::HalfOpenFull`],
//!   and the first such call of a half-open period requests leases (one request per replica,
//!   not per caller). So at most `half_open_probes` probes run across the fleet within a
//!   lease. A lease lives for the probe wait (`max_probe_wait`, the cooldown when unset): its
//!   expiry is the fleet's takeover, as the probe wait is the local one, and the held probe's
//!   late end still counts (a late success towards closing, a late failure re-opens). A permit
//!   dropped unrecorded returns its lease as neutral, one dropped while panicking as a failure.
//! - **Store errors**, per [`OnStoreError`]: degraded `local` and `open` probe by the local
//!   rules (no lease); `closed(grace)` past its grace rejects every call: the breaker is
//!   forced open locally (a transition with origin `store-unreachable`) until the store is
//!   back. When it is back, every breaker is reconciled: the fleet's word adopted, or, when the
//!   store lost it, seeded from the local breaker as it is now.
//!
//! Nothing is held across the user's call: a permit holds a lease token (a value), not a lock.
//!
//! # Lifetime
//! The breaker owns its hook, which owns the registration and one handle of the breaker (to
//! apply the fleet's transitions). Once nothing else holds the breaker (its clones, permits,
//! pipelines and every [`SharedCircuitBreaker`] are gone), the coordinator's sweep (a bounded
//! batch per flush, every breaker within 64 flushes) lets that handle go and the breaker is
//! unregistered. A keyed registry's eviction does not count the hook's handle; a key made
//! again before the sweep found its old breaker replaces the old registration.
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
//! println!("fleet: {:?}", payments.fleet_view().state);
//! payments.force_open().await?; // every replica rejects until `reset`
//! // README: end
//! # let _ = paid;
//! # Ok(()) }
//! ```
//!
//! # Bounds and limits
//! - The probe wait bounds a probe's call: a probe that outlives its lease lets another
//!   replica's probe in (its own late result still counts).
//! - A breaker made by a keyed factory is shared under `name` plus its key, escaped
//!   ([`BreakerId::keyed`]).
//!
//! # Files
//! - `mod.rs`: the fleet-side state of a shared breaker (the hook in the breaker, what the
//!   coordinator reads and applies), [`FleetView`] and [`Store::share`].
//! - `calls.rs`: the calls of a [`SharedCircuitBreaker`] and its [`SharedPermit`].
//! - `install.rs`: the process's installed store, the typed fleet backend and the scopes of
//!   policies ([`install`], [`share_scoped`], `share_policies`).

use crate::config::OnStoreError;
use crate::link::{Deltas, Link, PolicyMismatch, ProbeGrant, SharedBreaker, StoreStatus, Update};
use crate::names::BreakerId;
use crate::plan::LocalNow;
use crate::protocol::Lease;
use crate::store::{ForceTarget, RegisterError, Store};
use crate::StoreError;
use breaker_core::breaker::decide::ProbeEnd;
use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, FleetHook, FleetProbe, FleetProbeEnd, Permit, RejectReason,
    Rejected, RemoteTransition, State, TransitionReason,
};
use breaker_core::classify::Outcome;
use breaker_core::clock::Clock;
#[cfg(feature = "config")]
use breaker_core::config::{Policies, PolicyRegistry, StoreSettings};
use breaker_core::scope::{Scope, StoreErrorMode};
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

mod calls;
mod hook;
mod install;
mod lookup;
/// The fleet's decisions (a leaf module at the crate's root; this path kept for the model
/// checker).
#[allow(unused_imports)]
pub(crate) use crate::plan;

pub use crate::link::FleetView;
pub use calls::SharedPermit;
#[cfg(feature = "config")]
pub use install::share_policies;
pub use install::{install, installed, share_scoped, AlreadyInstalled};

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

#[derive(Debug)]
struct Fleet {
    view: FleetView,
    /// Granted leases with the local instant until which each may be used.
    leases: Vec<(Lease, u64)>,
    /// Leases held by probes in flight, by the token their permits carry.
    in_use: Vec<(u32, Lease)>,
    next_token: u32,
    requested: bool,
    requested_at: u64,
    /// No new request before this local instant in this generation (after a denial).
    retry_at: Option<(u32, u64)>,
    requests: u64,
    mismatches: Vec<PolicyMismatch>,
    /// The local breaker was forced open because the store is unreachable past the grace of
    /// `closed(grace)`; the fleet's view is re-applied when it is back.
    forced_by_store: bool,
    /// The local breaker's generation when the fleet last told it anything: a newer one means
    /// it moved on its own since (reconciliation reads it).
    told: u32,
    /// The reason of the local breaker's last trip (a trip the store missed is sent with it).
    trip_reason: TransitionReason,
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
    /// How long a granted lease may be used, nanoseconds (the lease time: never later than
    /// the store's expiry, counted from the request).
    lease: u64,
    /// How long after a denial in half-open a new lease request waits: the shorter of the
    /// lease and the cooldown (a returned lease is not pushed to the other replicas).
    retry_wait: u64,
    status: AtomicU8,
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

    /// Applies the fleet's `view` to the local breaker; the local generation entered.
    fn apply(&self, breaker: &CircuitBreaker, view: &FleetView) -> u32 {
        let origin: Arc<str> = match &view.caused_by {
            Some(r) => Arc::from(r.as_str()),
            None => Arc::from("fleet"),
        };
        // The deadline is a reading of the store's clock: moved to the breaker's (they may
        // differ: an annotated function's breaker reads tokio's clock).
        let open_until = view.deadline.map(|d| {
            let left = d.saturating_sub(self.clock.now_nanos());
            breaker.now_nanos().saturating_add(left)
        });
        breaker.apply_remote(RemoteTransition {
            to: view.state,
            reason: view.reason,
            open_until,
            streak: Some(view.streak),
            origin,
        })
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

impl SharedBreaker for Core {
    fn take_deltas(&self) -> Deltas {
        let taken = self
            .breaker()
            .map(|b| b.take_fleet_counts())
            .unwrap_or_default();
        Deltas {
            successes: taken.successes,
            failures: taken.failures,
            slow: taken.slow,
        }
    }

    fn local_now(&self) -> LocalNow {
        let Some(b) = self.breaker() else {
            return LocalNow {
                state: State::Closed,
                streak: 0,
                cooldown_left_ms: 0,
                moved: false,
                trip_reason: TransitionReason::FailureRate,
            };
        };
        let w = b.word();
        let left = if w.state == State::Open {
            b.snapshot()
                .retry_after
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        } else {
            0
        };
        let g = self.lock();
        LocalNow {
            state: w.state,
            streak: w.streak,
            cooldown_left_ms: left,
            moved: w.generation != g.told,
            trip_reason: g.trip_reason,
        }
    }

    fn policy(&self) -> Arc<BreakerPolicy> {
        self.breaker()
            .map(|b| b.policy())
            .unwrap_or_else(|| Arc::new(BreakerPolicy::default()))
    }

    fn adopt(&self, update: &Update, apply: bool) {
        let Some(breaker) = self.breaker() else {
            return;
        };
        let view = FleetView::from_update(update);
        {
            let mut g = self.lock();
            let new_period = !g.view.known || g.view.generation != view.generation;
            let first = !g.view.known;
            g.view = view.clone();
            if new_period {
                g.leases.retain(|(l, _)| l.generation == view.generation);
                if view.state != State::HalfOpen && view.state != State::Open {
                    g.requested = false;
                }
                // Counts of a closed period that has ended are the store's to drop: the fleet
                // left closed, or moved on while the local breaker was not closed. Counts the
                // local breaker recorded closed go to the closed period the store holds: on the
                // first answer (the store's first word is the period they were recorded in;
                // cleared, the calls made while that answer was on its way were lost: the
                // fleet rate missed them right after start) and when the fleet is closed again
                // while the local breaker already is (its own probe closed it, a reseed after
                // a store loss).
                let keep =
                    view.state == State::Closed && (first || breaker.state() == State::Closed);
                if !keep {
                    breaker.clear_fleet_counts();
                }
            }
            if !apply {
                // A look that finds the local breaker where the store is: it has not moved on
                // its own since (reconciliation stops looking at what it did alone).
                let (local, generation) = breaker.state_and_generation();
                if local == view.state && !g.forced_by_store {
                    g.told = generation;
                }
                return;
            }
            if g.forced_by_store {
                return; // re-applied when the store is back
            }
        }
        let (local, generation) = breaker.state_and_generation();
        // Not applied twice: a transition this replica made (or made too) and is in.
        let told = if local == view.state {
            generation
        } else {
            self.apply(&breaker, &view)
        };
        self.lock().told = told;
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
                        .filter(|l| l.generation == generation)
                        .map(|l| (l, until)),
                );
            }
            ProbeGrant::Denied { retry_ms } => {
                let now = self.clock.now_nanos();
                let wait = if retry_ms > 0 {
                    retry_ms.saturating_mul(1_000_000)
                } else if g.view.state == State::HalfOpen {
                    self.retry_wait
                } else {
                    1_000_000
                };
                g.retry_at = Some((g.view.generation, now.saturating_add(wait)));
                // The fleet is closed while this replica is not (its trip was of an older
                // period, or lost): adopt the fleet's state.
                let view = g.view.clone();
                drop(g);
                if let Some(b) = self.breaker() {
                    if view.state == State::Closed && b.state() != State::Closed {
                        let told = self.apply(&b, &view);
                        self.lock().told = told;
                    }
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
            let told = breaker.apply_remote(RemoteTransition {
                to: State::ForcedOpen,
                reason: TransitionReason::Manual,
                open_until: None,
                streak: None,
                origin: Arc::from("store-unreachable"),
            });
            self.lock().told = told;
        } else if code == DEGRADED_IGNORE {
            // Mode `open`: the shared state is ignored, the breaker decides as a local one.
            // Where the fleet put it (it has not moved on its own since), it starts closed;
            // the store's return reconciles it with the fleet.
            let (local, generation) = breaker.state_and_generation();
            let fleet_put_it = generation == self.lock().told;
            if fleet_put_it && local != State::Closed {
                let told = breaker.apply_remote(RemoteTransition {
                    to: State::Closed,
                    reason: TransitionReason::Manual,
                    open_until: None,
                    streak: Some(0),
                    origin: Arc::from("store-unreachable"),
                });
                self.lock().told = told;
            }
        } else if before == DEGRADED_REJECT {
            let view = {
                let mut g = self.lock();
                std::mem::take(&mut g.forced_by_store).then(|| g.view.clone())
            };
            if let Some(view) = view {
                let told = self.apply(&breaker, &view);
                self.lock().told = told;
            }
        }
    }

    fn policy_mismatch(&self, mismatch: &PolicyMismatch) {
        tracing::warn!(
            target: "breaker",
            breaker = mismatch.id.as_str(),
            ours = mismatch.ours.as_str(),
            theirs = mismatch.theirs.as_str(),
            "shared breaker policy differs from the policy of the replica that made the \
             fleet's last transition; each replica decides with its own"
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

    fn handle(self: Arc<Self>, store: &Store) -> Option<SharedCircuitBreaker> {
        lookup::handle(self, store)
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
    /// Joins `breaker` to the fleet under its name (and key, for a keyed breaker), in scope
    /// `shared` ([`share_scoped`](Self::share_scoped) for `quorum(k)`), with its own policy:
    /// the fleet decides with the same rules (the core's deciders) on the store's word.
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
    /// the one validator refuses its policy in the scope (a rate rule over a count window, more
    /// than [`MAX_SHARED_BUCKETS`](breaker_core::scope::MAX_SHARED_BUCKETS) buckets: every
    /// mistake at once, with its `Field`), [`RegisterError::NotShareable`] if it is shared
    /// already (with another store).
    pub fn share(&self, breaker: &CircuitBreaker) -> Result<SharedCircuitBreaker, RegisterError> {
        self.share_in(breaker, Scope::Shared)
    }

    fn share_in(
        &self,
        breaker: &CircuitBreaker,
        scope: Scope,
    ) -> Result<SharedCircuitBreaker, RegisterError> {
        let id = if breaker.key().is_empty() {
            BreakerId::new(breaker.name())
        } else {
            BreakerId::keyed(breaker.name(), breaker.key())
        }
        .map_err(RegisterError::Name)?;
        let policy = breaker.policy();
        let params =
            crate::policy::params(&policy, scope).map_err(|errors| RegisterError::Policy {
                breaker: breaker.name().to_owned(),
                errors,
            })?;
        let lease = params.lease_ms.saturating_mul(1_000_000);
        let cooldown = u64::try_from(policy.cooldown.as_nanos()).unwrap_or(u64::MAX);
        let core = Arc::new(Core {
            breaker: Mutex::new(Some(breaker.clone())),
            link: std::sync::OnceLock::new(),
            clock: self.clock().clone(),
            want: params.cap,
            lease,
            retry_wait: lease.min(cooldown),
            status: AtomicU8::new(status_code(self.status())),
            fleet: Mutex::new(Fleet {
                view: FleetView::initial(),
                leases: Vec::new(),
                in_use: Vec::new(),
                next_token: 0,
                requested: false,
                requested_at: 0,
                retry_at: None,
                requests: 0,
                mismatches: Vec::new(),
                forced_by_store: false,
                told: breaker.word().generation,
                trip_reason: TransitionReason::FailureRate,
            }),
        });
        let early = u64::from(policy.min_calls.max(1));
        let link = self.register(id, params, Arc::clone(&core) as Arc<dyn SharedBreaker>)?;
        let _ = core.link.set(link);
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
