//! The narrow interface between the coordinator and a local breaker.
//!
//! The coordinator never reads a breaker's internals: it asks for the counts recorded since it
//! last asked ([`SharedBreaker::take_deltas`]), for the local breaker's state now
//! ([`SharedBreaker::local_now`], for reconciliation), tells it the fleet's word
//! ([`SharedBreaker::adopt`]), answers its probe-lease requests
//! ([`SharedBreaker::grant_probes`]) and tells it how the store is doing
//! ([`SharedBreaker::store_status`]). The breaker reaches the coordinator through its [`Link`]:
//! it marks itself active, reports local trips, requests and returns leases.
//!
//! Every [`SharedBreaker`] method is called from the coordinator task, never while a lock of
//! the coordinator is held, so an implementation may call its [`Link`] from inside one.

use crate::names::{BreakerId, ReplicaId};
use crate::plan::LocalNow;
use crate::protocol::{Lease, Stored};
use breaker_core::breaker::decide::{ProbeEnd, Word};
use breaker_core::breaker::{BreakerPolicy, State, TransitionReason};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Outcome counts recorded since the last [`SharedBreaker::take_deltas`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deltas {
    /// Successful calls.
    pub(crate) successes: u64,
    /// Failed calls.
    pub(crate) failures: u64,
    /// Slow calls (also counted as successes or failures).
    pub(crate) slow: u64,
}

impl Deltas {
    /// Whether nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.successes == 0 && self.failures == 0
    }
}

/// The fleet's word, to apply locally where the local state differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Update {
    /// The fleet's word.
    pub(crate) word: Word,
    /// Open: the deadline as a reading of the store's [`Clock`](breaker_core::Clock)
    /// (nanoseconds), converted from the server's time with the server's own "now", so no two
    /// replicas' clocks are ever compared.
    pub(crate) deadline: Option<u64>,
    /// The replica whose write made the transition (`None` if unknown).
    pub(crate) by: Option<ReplicaId>,
    /// Why.
    pub(crate) reason: TransitionReason,
}

/// The answer to [`Link::request_probes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProbeGrant {
    /// Leases granted; each must be returned with [`Link::end_probe`] (a lease that is not
    /// returned frees its slot at its expiry).
    Leases(Vec<Lease>),
    /// None granted: every slot taken, or the fleet not half-open (`retry_ms`: ask again after
    /// this long, when the store's clock had not reached the deadline yet).
    Denied {
        /// When to ask again at the earliest, ms (0: at the next period).
        retry_ms: u64,
    },
    /// The store is unreachable: decide by the store-error mode ([`StoreStatus`]).
    StoreUnavailable,
}

/// How shared breakers should treat the shared state, from the store's health and the
/// configured [`OnStoreError`](crate::OnStoreError).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreStatus {
    /// The store answers: follow the shared state.
    Healthy,
    /// Unreachable, mode `local` (or `closed(grace)` within its grace): keep the last known
    /// shared state and honour its deadline, go on with local rules, probe locally.
    DegradedLocal,
    /// Unreachable, mode `open`: ignore the shared state, decide as a local breaker.
    DegradedIgnoreShared,
    /// Unreachable past the grace of mode `closed(grace)`: reject every call.
    DegradedRejectAll,
}

/// A replica's policy differs from the one of the replica that made the fleet's last
/// transition (the fleet runs each replica's own policy; a difference is worth a warning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyMismatch {
    /// The breaker.
    pub id: BreakerId,
    /// This replica's fingerprint.
    pub ours: String,
    /// The fingerprint of the replica that made the last transition.
    pub theirs: String,
}

/// What the coordinator needs from a local breaker. See the [module docs](self).
pub(crate) trait SharedBreaker: Send + Sync + 'static {
    /// Returns the outcome counts recorded since the last call, and resets them.
    fn take_deltas(&self) -> Deltas;

    /// The local breaker now (for reconciliation).
    fn local_now(&self) -> LocalNow;

    /// The local breaker's policy in force.
    fn policy(&self) -> Arc<BreakerPolicy>;

    /// The fleet's word as the store answered it: the new view; with `apply` (the fleet moved
    /// on, or a reconciliation adopts it) applied to the local breaker where its state
    /// differs. Counts recorded before a new period belong to the old one and are dropped.
    fn adopt(&self, update: &Update, apply: bool);

    /// Answers a [`Link::request_probes`].
    fn grant_probes(&self, grant: ProbeGrant);

    /// The store's health changed.
    fn store_status(&self, status: StoreStatus);

    /// This replica's policy differs from the one that made the last transition (reported
    /// once per registration until it matches again).
    fn policy_mismatch(&self, mismatch: &PolicyMismatch);

    /// Called by the coordinator's sweep (a bounded batch of registered breakers per flush):
    /// lets go of the local breaker if nothing but this holds it, and says whether it did
    /// (the registration then ends with the breaker).
    fn release_if_unused(&self) -> bool;

    /// A handle of this registration's breaker shared with `store`, for
    /// [`Store::shared_breakers`](crate::Store::shared_breakers); `None` once the breaker has
    /// been let go.
    fn handle(self: Arc<Self>, store: &crate::Store) -> Option<crate::SharedCircuitBreaker> {
        let _ = store;
        None
    }
}

pub(crate) enum Urgent {
    Trip {
        idx: u32,
        reason: TransitionReason,
    },
    Acquire {
        idx: u32,
        want: u32,
    },
    End {
        idx: u32,
        lease: Lease,
        end: ProbeEnd,
    },
    FlushSoon,
    Unregister {
        idx: u32,
    },
}

/// What links and the coordinator share.
pub(crate) struct Shared {
    pub(crate) active: Mutex<Vec<u32>>,
    pub(crate) urgent: Mutex<Vec<Urgent>>,
    pub(crate) wake: Notify,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            active: Mutex::new(Vec::new()),
            urgent: Mutex::new(Vec::new()),
            wake: Notify::new(),
        }
    }

    pub(crate) fn push(&self, u: Urgent) {
        self.urgent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(u);
        self.wake.notify_one();
    }
}

pub(crate) struct LinkState {
    pub(crate) idx: u32,
    pub(crate) active: AtomicBool,
    pub(crate) shared: Arc<Shared>,
}

/// A registered breaker's handle to its coordinator; dropping it unregisters the breaker.
///
/// Cheap calls only: nothing here waits for the store.
pub(crate) struct Link {
    pub(crate) state: Arc<LinkState>,
    pub(crate) id: BreakerId,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("id", &self.id).finish()
    }
}

impl Link {
    /// The breaker's id.
    pub(crate) fn id(&self) -> &BreakerId {
        &self.id
    }

    /// Marks the breaker active: its counts are flushed at the next flush. After the first
    /// call per flush interval it is one relaxed load.
    #[inline]
    pub(crate) fn touch(&self) {
        let s = &self.state;
        if !s.active.load(Ordering::Relaxed) && !s.active.swap(true, Ordering::AcqRel) {
            s.shared
                .active
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(s.idx);
        }
    }

    /// Asks for an early flush (pending failures crossed the breaker's bound). At most one
    /// early flush per flush interval is sent; it replaces the next regular one.
    pub(crate) fn flush_soon(&self) {
        self.touch();
        self.state.shared.push(Urgent::FlushSoon);
    }

    /// The breaker tripped locally for `reason` (a vote under quorum).
    pub(crate) fn local_trip(&self, reason: TransitionReason) {
        self.state.shared.push(Urgent::Trip {
            idx: self.state.idx,
            reason,
        });
    }

    /// Asks for up to `want` probe leases; answered with [`SharedBreaker::grant_probes`].
    /// Requests of one breaker queued together are merged into one store operation.
    pub(crate) fn request_probes(&self, want: u32) {
        self.state.shared.push(Urgent::Acquire {
            idx: self.state.idx,
            want,
        });
    }

    /// Returns a lease with the probe's end (asynchronously; a lost return costs at most the
    /// lease time).
    pub(crate) fn end_probe(&self, lease: Lease, end: ProbeEnd) {
        self.state.shared.push(Urgent::End {
            idx: self.state.idx,
            lease,
            end,
        });
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.state.shared.push(Urgent::Unregister {
            idx: self.state.idx,
        });
    }
}

/// The fleet's state of a shared breaker, as last told to this replica: read-only, for
/// status pages and tests ([`SharedCircuitBreaker::fleet_view`](crate::SharedCircuitBreaker::fleet_view), [`Store::force`](crate::Store::force)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetView {
    /// The fleet's state.
    pub state: State,
    /// The fleet's generation (bumped by every transition; 24 bits, wrapping). It counts the
    /// fleet's transitions, not this replica's local breaker's.
    pub generation: u32,
    /// Consecutive openings since the fleet's breaker last closed.
    pub streak: u32,
    /// Half-open: successful probes so far in this period.
    pub probe_successes: u32,
    /// Half-open: unexpired probe leases across the fleet, as of the last answer.
    pub probes_in_flight: u32,
    /// Open: the deadline as a reading of the store's [`Clock`](crate::Store::clock) (nanoseconds),
    /// converted from the server's time with the server's own "now" (no two replicas' clocks
    /// are ever compared). `None` otherwise.
    pub deadline: Option<u64>,
    /// The replica whose write made the last transition (`None` if unknown).
    pub caused_by: Option<ReplicaId>,
    /// Why.
    pub reason: TransitionReason,
    /// Whether the store has been seen holding this breaker (`false`: nothing written yet).
    pub known: bool,
}

impl FleetView {
    /// A breaker the store has not been seen holding: closed, generation 0.
    pub(crate) fn initial() -> FleetView {
        FleetView {
            state: State::Closed,
            generation: 0,
            streak: 0,
            probe_successes: 0,
            probes_in_flight: 0,
            deadline: None,
            caused_by: None,
            reason: TransitionReason::Manual,
            known: false,
        }
    }

    pub(crate) fn from_update(u: &Update) -> FleetView {
        FleetView {
            state: u.word.state,
            generation: u.word.generation,
            streak: u.word.streak,
            probe_successes: u.word.successes,
            probes_in_flight: u.word.in_flight,
            deadline: u.deadline,
            caused_by: u.by.clone(),
            reason: u.reason,
            known: true,
        }
    }

    /// The view of the store's word `s`, answered at server time `server_now` and received at
    /// local time `recv`.
    pub(crate) fn of(s: &Stored, server_now: u64, recv: u64) -> FleetView {
        FleetView::from_update(&Update {
            word: s.word,
            deadline: (s.word.state == State::Open).then(|| {
                let left = s.deadline_ms.saturating_sub(server_now);
                recv.saturating_add(left.saturating_mul(1_000_000))
            }),
            by: s.by.clone(),
            reason: s.reason,
        })
    }
}
