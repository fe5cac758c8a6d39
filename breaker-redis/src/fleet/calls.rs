//! The calls of a [`SharedCircuitBreaker`]: admission (the breaker's own, fleet-wide through
//! its hook), the fleet's commands, and the [`SharedPermit`] that ends a call.

use super::*;

impl SharedCircuitBreaker {
    /// Asks to make a call: the breaker's own [`CircuitBreaker::try_acquire`], which is
    /// fleet-wide since [`Store::share`] (a half-open probe needs a fleet lease). Never blocks
    /// and never waits.
    ///
    /// # Errors
    /// The local breaker's [`Rejected`]; [`RejectReason::HalfOpenFull`] for a probe without a
    /// fleet lease (every fleet slot taken, or the lease not granted yet); [`RejectReason::Open`]
    /// while the store is unreachable past the grace of `closed(grace)` (the plain breaker is
    /// forced open then, and rejects as [`RejectReason::ForcedOpen`]).
    #[inline]
    pub fn try_acquire(&self) -> Result<SharedPermit<'_>, Rejected> {
        let h = &*self.h;
        if h.core.status.load(Ordering::Relaxed) == DEGRADED_REJECT {
            return Err(h.breaker.rejection(RejectReason::Open, None));
        }
        let permit = h.breaker.try_acquire()?;
        Ok(SharedPermit { h, permit })
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
        &self.h.breaker
    }

    /// The shared id.
    pub fn id(&self) -> &BreakerId {
        self.h
            .core
            .link
            .get()
            .expect("a shared breaker's link is set when it is shared")
            .id()
    }

    /// The local breaker's state.
    pub fn state(&self) -> State {
        self.h.breaker.state()
    }

    /// The fleet's state as last told to this replica (read-only: status pages show it
    /// beside the local breaker's [`Snapshot`](breaker_core::breaker::Snapshot)).
    pub fn fleet_view(&self) -> FleetView {
        self.h.core.lock().view.clone()
    }

    /// Probe-lease requests this replica sent.
    pub fn lease_requests(&self) -> u64 {
        self.h.core.lease_requests()
    }

    /// Policy mismatches reported for this breaker: the replica that made the fleet's last
    /// transition runs another policy than this one.
    pub fn mismatches(&self) -> Vec<PolicyMismatch> {
        self.h.core.lock().mismatches.clone()
    }

    /// Fleet-wide force open: every replica rejects until [`reset`](Self::reset) or
    /// [`force_closed`](Self::force_closed).
    ///
    /// # Errors
    /// The store's error (nothing changes then, here or elsewhere).
    pub async fn force_open(&self) -> Result<FleetView, StoreError> {
        self.h.store.force(self.id(), ForceTarget::ForcedOpen).await
    }

    /// Fleet-wide force closed: every replica admits every call and records nothing.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn force_closed(&self) -> Result<FleetView, StoreError> {
        self.h
            .store
            .force(self.id(), ForceTarget::ForcedClosed)
            .await
    }

    /// Fleet-wide open with a fresh cooldown, as if tripped.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn open(&self) -> Result<FleetView, StoreError> {
        self.h.store.force(self.id(), ForceTarget::Open).await
    }

    /// Fleet-wide reset: closed, window and streak cleared, on every replica.
    ///
    /// # Errors
    /// As [`force_open`](Self::force_open).
    pub async fn reset(&self) -> Result<FleetView, StoreError> {
        self.h.store.reset(self.id()).await
    }
}

/// Permission to make one call, from [`SharedCircuitBreaker::try_acquire`]: the breaker's
/// [`Permit`], whose half-open probe holds a fleet lease.
///
/// Dropping it unrecorded is a cancellation (neutral; a lease is returned at once), or a
/// failure while the thread panics (a lease is returned as a failed probe): the permit's own
/// rules, which return the lease through the breaker's fleet hook.
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct SharedPermit<'a> {
    h: &'a Handle,
    permit: Permit<'a>,
}

impl fmt::Debug for SharedPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPermit")
            .field("probe", &self.is_probe())
            .field("lease", &self.lease())
            .finish()
    }
}

impl SharedPermit<'_> {
    /// Records a success.
    #[inline]
    pub fn success(self) {
        self.permit.success()
    }

    /// Records a failure.
    pub fn failure(self) {
        self.permit.failure()
    }

    /// Records an ignored outcome (a probe's lease is returned as neutral, or as a success
    /// under [`NeutralProbe::CountAsSuccess`](breaker_core::breaker::NeutralProbe::CountAsSuccess)).
    pub fn ignored(self) {
        self.permit.ignored()
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.permit.is_probe()
    }

    /// The fleet lease of a probe (`None` for a closed call, or a local probe while the store
    /// is degraded).
    pub fn lease(&self) -> Option<Lease> {
        self.permit
            .fleet_token()
            .and_then(|t| self.h.core.lease_of(t))
    }

    /// Records `outcome`.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        self.permit.record(outcome)
    }
}
