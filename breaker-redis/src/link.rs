//! The narrow interface between the coordinator and a local breaker.
//!
//! The coordinator never reads a breaker's internals: it asks for the counts recorded since it
//! last asked ([`SharedBreaker::take_deltas`]), tells it about transitions decided elsewhere
//! ([`SharedBreaker::apply_remote`]), answers its probe-lease requests
//! ([`SharedBreaker::grant_probes`]) and tells it how the store is doing
//! ([`SharedBreaker::store_status`]). The breaker reaches the coordinator through its [`Link`]:
//! it marks itself active, reports local trips, requests and returns leases.
//!
//! Every [`SharedBreaker`] method is called from the coordinator task, never while a lock of
//! the coordinator is held, so an implementation may call its [`Link`] (or register other
//! breakers) from inside one.

use crate::names::{BreakerId, ReplicaId};
use crate::protocol::{Lease, ProbeOutcome, Reason};
use breaker_core::breaker::State;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Outcome counts recorded since the last [`SharedBreaker::take_deltas`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deltas {
    /// The shared generation the counts were recorded under (the generation of the last
    /// [`RemoteUpdate`] applied, 0 before any). Counts of another generation than the store's
    /// are dropped by the store.
    pub generation: u64,
    /// Successful calls.
    pub successes: u64,
    /// Failed calls.
    pub failures: u64,
    /// Slow calls (also counted as successes or failures).
    pub slow: u64,
}

impl Deltas {
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.successes == 0 && self.failures == 0
    }
}

/// A transition of the shared state, to apply locally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUpdate {
    /// The shared generation entered (strictly newer than any update given before).
    pub generation: u64,
    /// The shared state entered.
    pub state: State,
    /// When open: the deadline as a reading of the store's [`Clock`](breaker_core::Clock)
    /// (nanoseconds), converted from the server's time with the server's own "now", so no two
    /// replicas' clocks are ever compared. `None` otherwise.
    pub deadline: Option<u64>,
    /// Consecutive openings since the fleet's breaker last closed.
    pub streak: u32,
    /// The replica that caused it (`None` if unknown).
    pub caused_by: Option<ReplicaId>,
    /// Whether that replica is this one.
    pub by_this_replica: bool,
    /// Why.
    pub reason: Reason,
}

/// The answer to [`Link::request_probes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeGrant {
    /// Leases granted; each must be returned with [`Link::end_probe`] (a lease that is not
    /// returned frees its slot at its expiry).
    Leases(Vec<Lease>),
    /// None granted: the fleet is not half-open yet, or every slot is taken. The state known
    /// after the request was applied with [`SharedBreaker::apply_remote`] first.
    Denied,
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

/// A replica's policy differs from the one pinned in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyMismatch {
    /// The breaker.
    pub id: BreakerId,
    /// This replica's fingerprint.
    pub ours: String,
    /// The pinned one (which governs the fleet's decisions).
    pub pinned: String,
}

/// What the coordinator needs from a local breaker. See the [module docs](self).
pub trait SharedBreaker: Send + Sync + 'static {
    /// Returns the outcome counts recorded since the last call, and resets them.
    fn take_deltas(&self) -> Deltas;

    /// Applies a transition decided by the fleet (any replica, this one included), firing the
    /// breaker's listeners with its cause.
    fn apply_remote(&self, update: &RemoteUpdate);

    /// Answers a [`Link::request_probes`].
    fn grant_probes(&self, grant: ProbeGrant);

    /// The store's health changed.
    fn store_status(&self, status: StoreStatus);

    /// This replica's policy differs from the pinned one (reported once per registration until
    /// it matches again).
    fn policy_mismatch(&self, mismatch: &PolicyMismatch);

    /// Called by the coordinator's sweep (a bounded batch of registered breakers per flush):
    /// lets go of the local breaker if nothing but this holds it, and says whether it did
    /// (the registration then ends with the breaker). The default keeps it.
    fn release_if_unused(&self) -> bool {
        false
    }
}

pub(crate) enum Urgent {
    Trip {
        idx: u32,
        generation: u64,
        reason: Reason,
    },
    Acquire {
        idx: u32,
        want: u32,
    },
    End {
        idx: u32,
        lease: Lease,
        outcome: ProbeOutcome,
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
pub struct Link {
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
    pub fn id(&self) -> &BreakerId {
        &self.id
    }

    /// Marks the breaker active: its counts are flushed at the next flush. Call it when
    /// recording an outcome; after the first call per flush interval it is one relaxed load.
    #[inline]
    pub fn touch(&self) {
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
    pub fn flush_soon(&self) {
        self.touch();
        self.state.shared.push(Urgent::FlushSoon);
    }

    /// The breaker tripped locally from shared generation `generation` (a vote under quorum).
    pub fn local_trip(&self, generation: u64, reason: Reason) {
        self.state.shared.push(Urgent::Trip {
            idx: self.state.idx,
            generation,
            reason,
        });
    }

    /// Asks for up to `want` probe leases; answered with [`SharedBreaker::grant_probes`].
    /// Requests of one breaker queued together are merged into one store operation.
    pub fn request_probes(&self, want: u32) {
        self.state.shared.push(Urgent::Acquire {
            idx: self.state.idx,
            want,
        });
    }

    /// Returns a lease with the probe's outcome (asynchronously; a lost return costs at most
    /// the lease time).
    pub fn end_probe(&self, lease: Lease, outcome: ProbeOutcome) {
        self.state.shared.push(Urgent::End {
            idx: self.state.idx,
            lease,
            outcome,
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
