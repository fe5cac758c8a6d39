//! A fake local breaker for tests of the coordinator, and a reference for implementers of
//! [`SharedBreaker`].
//!
//! [`FakeBreaker`] keeps only what the coordinator exchanges with a breaker: the shared state
//! it was told (generation, state, deadline as a local instant), the counts recorded since the
//! last flush, the probe leases granted and not yet used, and the store status. Its admission
//! follows the contract a real shared breaker keeps:
//!
//! - closed and forced closed admit; forced open rejects; open rejects until its local
//!   deadline;
//! - past the deadline, and in half-open, a call is a probe only with a lease. The first call
//!   that finds none requests leases **once** (one request per half-open period per replica,
//!   not one per caller; G6) and is rejected, as are the calls until the grant arrives. After a
//!   denial it asks again only in a newer generation, or once a lease time has passed (a
//!   leaked slot is free by then), or 1 ms later if the fleet was not half-open yet (the
//!   replica's conversion of the deadline ran ahead of the server by up to a round trip);
//! - store degraded: `DegradedIgnoreShared` admits everything (it stands in for the local
//!   rules), `DegradedRejectAll` rejects everything, `DegradedLocal` keeps the last known
//!   shared state and, where a probe would need a lease, admits a *local* probe.

use crate::link::{
    Deltas, Link, PolicyMismatch, ProbeGrant, RemoteUpdate, SharedBreaker, StoreStatus,
};
use crate::names::BreakerId;
use crate::policy::SharedPolicy;
use crate::protocol::{Lease, ProbeOutcome, Reason};
use crate::store::{RegisterError, Store};
use breaker_core::breaker::State;
use breaker_core::clock::Clock;
use std::sync::{Arc, Mutex, OnceLock};

/// What [`FakeBreaker::admit`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A normal call.
    Admitted,
    /// A fleet probe holding this lease; finish it with [`FakeBreaker::finish_probe`].
    Probe(Lease),
    /// A local probe while the store is degraded (mode `local`).
    LocalProbe,
    /// Rejected.
    Rejected,
}

/// An outcome for [`FakeBreaker::record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A success.
    Success,
    /// A failure.
    Failure,
    /// A slow success.
    SlowSuccess,
}

#[derive(Debug)]
struct Inner {
    view: RemoteUpdate,
    deltas: Deltas,
    leases: Vec<Lease>,
    requested: bool,
    status: StoreStatus,
    updates: Vec<(u64, RemoteUpdate)>,
    grants: Vec<ProbeGrant>,
    statuses: Vec<StoreStatus>,
    mismatches: Vec<PolicyMismatch>,
    requests: u64,
    /// No new request before this local instant in this generation (after a denial).
    retry_at: Option<(u64, u64)>,
}

/// A fake shared breaker. See the [module docs](self).
pub struct FakeBreaker {
    clock: Clock,
    want: u32,
    lease: u64,
    inner: Mutex<Inner>,
    link: OnceLock<Link>,
}

impl std::fmt::Debug for FakeBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBreaker")
            .field("inner", &self.lock())
            .finish()
    }
}

impl FakeBreaker {
    /// Registers a fake as `id` with `store`; it reads time from the store's clock and asks for
    /// `policy.half_open_probes` leases per request.
    ///
    /// # Errors
    /// As [`Store::register`].
    pub fn register(
        store: &Store,
        id: BreakerId,
        policy: &SharedPolicy,
    ) -> Result<Arc<FakeBreaker>, RegisterError> {
        let fake = Arc::new(FakeBreaker {
            clock: store.clock().clone(),
            want: policy.half_open_probes,
            lease: u64::try_from(policy.probe_lease.as_nanos()).unwrap_or(u64::MAX),
            inner: Mutex::new(Inner {
                view: RemoteUpdate {
                    generation: 0,
                    state: State::Closed,
                    deadline: None,
                    streak: 0,
                    caused_by: None,
                    by_this_replica: false,
                    reason: Reason::Initial,
                },
                deltas: Deltas::default(),
                leases: Vec::new(),
                requested: false,
                status: store.status(),
                updates: Vec::new(),
                grants: Vec::new(),
                statuses: Vec::new(),
                mismatches: Vec::new(),
                requests: 0,
                retry_at: None,
            }),
            link: OnceLock::new(),
        });
        let link = store.register(id, policy, Arc::clone(&fake) as Arc<dyn SharedBreaker>)?;
        let _ = fake.link.set(link);
        Ok(fake)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn link(&self) -> &Link {
        self.link.get().expect("registered")
    }

    /// Records an outcome (counted only where a window counts: closed, or while the store is
    /// degraded and the shared state is ignored).
    pub fn record(&self, o: Outcome) {
        {
            let mut g = self.lock();
            if g.view.state != State::Closed {
                return;
            }
            match o {
                Outcome::Success => g.deltas.successes += 1,
                Outcome::Failure => g.deltas.failures += 1,
                Outcome::SlowSuccess => {
                    g.deltas.successes += 1;
                    g.deltas.slow += 1;
                }
            }
        }
        self.link().touch();
    }

    /// Decides a call. See the [module docs](self).
    pub fn admit(&self) -> Admission {
        let mut g = self.lock();
        match g.status {
            StoreStatus::DegradedIgnoreShared => return Admission::Admitted,
            StoreStatus::DegradedRejectAll => return Admission::Rejected,
            _ => {}
        }
        match g.view.state {
            State::Closed | State::ForcedClosed => return Admission::Admitted,
            State::ForcedOpen => return Admission::Rejected,
            State::Open => {
                if g.view.deadline.is_some_and(|d| self.clock.now_nanos() < d) {
                    return Admission::Rejected;
                }
            }
            State::HalfOpen => {}
        }
        if let Some(lease) = g.leases.pop() {
            return Admission::Probe(lease);
        }
        if g.status == StoreStatus::DegradedLocal {
            return Admission::LocalProbe;
        }
        let now = self.clock.now_nanos();
        let generation = g.view.generation;
        let waiting = g
            .retry_at
            .is_some_and(|(gen, at)| gen == generation && now < at);
        if !g.requested && !waiting {
            g.requested = true;
            g.requests += 1;
            drop(g);
            self.link().request_probes(self.want);
        }
        Admission::Rejected
    }

    /// Ends a fleet probe (returns its lease with the outcome).
    pub fn finish_probe(&self, lease: Lease, outcome: ProbeOutcome) {
        self.link().end_probe(lease, outcome);
    }

    /// Trips locally (a vote under quorum) from the current shared generation.
    pub fn trip(&self, reason: Reason) {
        let generation = self.lock().view.generation;
        self.link().local_trip(generation, reason);
    }

    /// Asks for an early flush.
    pub fn flush_soon(&self) {
        self.link().flush_soon();
    }

    /// The shared state last applied.
    pub fn view(&self) -> RemoteUpdate {
        self.lock().view.clone()
    }

    /// The shared state's name last applied.
    pub fn state(&self) -> State {
        self.lock().view.state
    }

    /// Every update applied, with the local clock's reading when it was applied.
    pub fn updates(&self) -> Vec<(u64, RemoteUpdate)> {
        self.lock().updates.clone()
    }

    /// Every grant answered.
    pub fn grants(&self) -> Vec<ProbeGrant> {
        self.lock().grants.clone()
    }

    /// Lease requests sent.
    pub fn requests(&self) -> u64 {
        self.lock().requests
    }

    /// Leases granted and not used yet.
    pub fn unused_leases(&self) -> usize {
        self.lock().leases.len()
    }

    /// The store status last told, and every change told.
    pub fn status(&self) -> (StoreStatus, Vec<StoreStatus>) {
        let g = self.lock();
        (g.status, g.statuses.clone())
    }

    /// Policy mismatches told.
    pub fn mismatches(&self) -> Vec<PolicyMismatch> {
        self.lock().mismatches.clone()
    }

    /// The counts not flushed yet.
    pub fn pending(&self) -> Deltas {
        self.lock().deltas
    }
}

impl SharedBreaker for FakeBreaker {
    fn take_deltas(&self) -> Deltas {
        let mut g = self.lock();
        let generation = g.view.generation;
        let d = std::mem::take(&mut g.deltas);
        Deltas { generation, ..d }
    }

    fn apply_remote(&self, update: &RemoteUpdate) {
        let mut g = self.lock();
        if update.generation <= g.view.generation && g.view.generation != 0 {
            return;
        }
        g.view = update.clone();
        // Counts of an older generation are the store's to drop; a fresh generation starts empty.
        g.deltas = Deltas::default();
        g.leases.retain(|l| l.generation() == update.generation);
        if update.state != State::HalfOpen && update.state != State::Open {
            g.requested = false;
        }
        let now = self.clock.now_nanos();
        g.updates.push((now, update.clone()));
    }

    fn grant_probes(&self, grant: ProbeGrant) {
        let mut g = self.lock();
        g.requested = false;
        if grant == ProbeGrant::Denied {
            let wait = if g.view.state == State::HalfOpen {
                self.lease
            } else {
                1_000_000
            };
            g.retry_at = Some((
                g.view.generation,
                self.clock.now_nanos().saturating_add(wait),
            ));
        }
        if let ProbeGrant::Leases(l) = &grant {
            let generation = g.view.generation;
            g.leases
                .extend(l.iter().filter(|l| l.generation() == generation).cloned());
        }
        g.grants.push(grant);
    }

    fn store_status(&self, status: StoreStatus) {
        let mut g = self.lock();
        g.status = status;
        g.statuses.push(status);
    }

    fn policy_mismatch(&self, mismatch: &PolicyMismatch) {
        self.lock().mismatches.push(mismatch.clone());
    }
}
