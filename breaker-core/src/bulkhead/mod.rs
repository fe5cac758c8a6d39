//! A bulkhead: a limit on how many calls run at once.
//!
//! # Why
//! A slow dependency does not fail fast: it ties up every caller that reaches it. A bulkhead
//! caps the calls in flight to one dependency, so a slow one can take at most `max_concurrent`
//! tasks, connections or threads with it, and the rest of the service keeps working (the
//! ship's bulkhead of Nygard's *Release It!*).
//!
//! # How
//! A [`tokio::sync::Semaphore`] with `max_concurrent` permits. A call takes a permit for its
//! whole duration (in a [`Pipeline`](crate::pipeline::Pipeline): everything nested inside the
//! bulkhead layer) and gives it back when it ends, however it ends: success, error, timeout,
//! panic or cancellation (the permit is an RAII guard). When no permit is free the call waits
//! at most [`BulkheadPolicy::max_wait`] (zero: not at all), then is rejected locally with
//! [`BulkheadFull`]: the dependency is never called, no breaker records anything, and the
//! retry layer does not retry it. Waiters are served first come, first served.

mod error;
pub(crate) mod policy;

pub(crate) use error::waited_suffix;
pub use error::{BulkheadFull, InvalidBulkhead};
pub(crate) use policy::check_bulkhead;
pub use policy::{BulkheadPolicy, MAX_CONCURRENT};

#[cfg(feature = "tokio")]
pub use runtime::{Bulkhead, BulkheadPermit};

#[cfg(feature = "tokio")]
mod runtime {
    use super::{BulkheadFull, BulkheadPolicy, InvalidBulkhead};
    use std::fmt;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::{Semaphore, SemaphorePermit};
    use tokio::time::Instant;

    /// A concurrency limit. See the [module docs](super). Cloning is cheap and clones share
    /// the limit.
    #[derive(Clone)]
    pub struct Bulkhead {
        semaphore: Arc<Semaphore>,
        policy: BulkheadPolicy,
    }

    /// A slot of a [`Bulkhead`], held for the duration of one call; dropping it frees the slot.
    #[must_use = "the slot is released as soon as the permit is dropped"]
    #[derive(Debug)]
    pub struct BulkheadPermit<'a> {
        _permit: SemaphorePermit<'a>,
    }

    impl Bulkhead {
        /// A bulkhead with `policy`.
        ///
        /// # Errors
        /// [`InvalidBulkhead`] if `max_concurrent` is outside `1..=1_000_000`.
        pub fn new(policy: BulkheadPolicy) -> Result<Self, InvalidBulkhead> {
            let mut errors = Vec::new();
            super::check_bulkhead(&policy, &mut errors);
            if !errors.is_empty() {
                return Err(InvalidBulkhead {
                    max_concurrent: policy.max_concurrent,
                });
            }
            Ok(Bulkhead {
                semaphore: Arc::new(Semaphore::new(policy.max_concurrent as usize)),
                policy,
            })
        }

        /// The policy.
        pub fn policy(&self) -> BulkheadPolicy {
            self.policy
        }

        /// Free slots now.
        pub fn available(&self) -> usize {
            self.semaphore.available_permits()
        }

        /// Takes a slot, waiting up to `max_wait` for one.
        ///
        /// # Errors
        /// [`BulkheadFull`] if no slot freed up in time.
        ///
        /// # Panics
        /// If it has to wait and no tokio runtime with the time driver is current.
        pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
            match self.acquire_until(None).await {
                Ok(p) => Ok(p),
                Err(Wait::Full(e)) => Err(e),
                Err(Wait::Deadline) => unreachable!("no deadline was given"),
            }
        }

        /// Takes a slot without waiting.
        ///
        /// # Errors
        /// [`BulkheadFull`] if every slot is taken.
        pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadFull> {
            self.semaphore
                .try_acquire()
                .map(|p| BulkheadPermit { _permit: p })
                .map_err(|_| self.full(Duration::ZERO))
        }

        fn full(&self, waited: Duration) -> BulkheadFull {
            BulkheadFull {
                max_concurrent: self.policy.max_concurrent,
                waited,
            }
        }

        /// Takes a slot, waiting up to `max_wait` but not past `deadline`.
        pub(crate) async fn acquire_until(
            &self,
            deadline: Option<Instant>,
        ) -> Result<BulkheadPermit<'_>, Wait> {
            if let Ok(p) = self.semaphore.try_acquire() {
                return Ok(BulkheadPermit { _permit: p });
            }
            let wait = self.policy.max_wait;
            if wait.is_zero() {
                return Err(Wait::Full(self.full(Duration::ZERO)));
            }
            let now = Instant::now();
            let give_up = now.checked_add(wait);
            let (until, by_deadline) = match (give_up, deadline) {
                (Some(g), Some(d)) if d < g => (d, true),
                (None, Some(d)) => (d, true),
                (Some(g), _) => (g, false),
                (None, None) => (far_future(now), false),
            };
            match tokio::time::timeout_at(until, self.semaphore.acquire()).await {
                Ok(Ok(p)) => Ok(BulkheadPermit { _permit: p }),
                // The semaphore is never closed.
                Ok(Err(_)) => Err(Wait::Full(self.full(now.elapsed()))),
                Err(_) if by_deadline => Err(Wait::Deadline),
                Err(_) => Err(Wait::Full(self.full(wait))),
            }
        }
    }

    fn far_future(now: Instant) -> Instant {
        // About 30 years, as tokio itself uses for "never".
        now + Duration::from_secs(86_400 * 365 * 30)
    }

    /// Why a wait for a slot ended without one.
    pub(crate) enum Wait {
        Full(BulkheadFull),
        /// An enclosing deadline came first.
        Deadline,
    }

    impl fmt::Debug for Bulkhead {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Bulkhead")
                .field("max_concurrent", &self.policy.max_concurrent)
                .field("max_wait", &self.policy.max_wait)
                .field("available", &self.available())
                .finish()
        }
    }
}

#[cfg(feature = "tokio")]
pub(crate) use runtime::Wait;
