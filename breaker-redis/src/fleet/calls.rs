//! The calls of a [`SharedCircuitBreaker`]: admission (with a fleet probe lease for a
//! half-open probe), the fleet's commands, and the [`SharedPermit`] that ends a call.

use super::*;

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
