//! An adaptive concurrency limit: a bulkhead whose limit follows the dependency.
//!
//! # Why
//! A fixed bulkhead needs its limit guessed in advance: too low and it rejects calls a healthy
//! dependency could take, too high and a slow dependency queues every caller behind it. The
//! right limit is the dependency's own capacity (Little's law: throughput × latency), which
//! moves with its load and health. An adaptive limit measures it from the calls themselves, as
//! TCP's congestion control finds a link's capacity: when calls slow down or fail, the limit
//! falls; while they stay fast, it rises. When the dependency slows, the calls in flight to
//! it are held near what it can serve instead of piling up.
//!
//! # How
//! - **Admission is lock-free**: the calls in flight and the limit are two atomics, and a call
//!   is admitted by one compare-and-swap that raises the count if it is below the limit.
//!   There is no queue: a call over the limit is rejected at once with [`LimitReached`] (as a
//!   full bulkhead with no wait; Netflix's `SimpleLimiter`).
//! - **Each call is a sample.** The permit measures the call's latency on the limiter's
//!   [`Clock`] and, when the call ends, gives the algorithm the latency, the calls that were
//!   in flight when it started, and whether it was a *drop* (a failure or timeout, by the
//!   classifier). An ignored outcome and a cancelled call (the permit dropped unrecorded)
//!   give no sample.
//! - **The algorithm** ([`LimitAlgorithm`]): AIMD, from failures and slow calls, or Gradient2,
//!   from the latency's rise over its long-term average. Both keep the limit within the
//!   policy's floor (`min_limit`) and ceiling (`max_limit`). AIMD updates the limit with one
//!   CAS; Gradient2 keeps a little floating-point state under a lock that a sample *tries*
//!   (a sample that finds it taken by another is skipped, so the end of a call never blocks).
//!
//! The algorithms and their defaults are those of Netflix's `concurrency-limits` library
//! (`AIMDLimit`, `Gradient2Limit`).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::adaptive::{AdaptiveLimitPolicy, AdaptiveLimiter, LimitAlgorithm};
//! use breaker::clock::{Clock, ManualClock};
//!
//! let time = ManualClock::new();
//! let policy = AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 2, 100).initial(4);
//! let limiter = AdaptiveLimiter::with_clock(policy, Clock::manual(&time))?;
//! let permits: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
//! assert!(limiter.try_acquire().is_err()); // 4 in flight, limit 4
//! for p in permits {
//!     p.failure(); // a drop: 4 × 0.9 rounds down to 3
//! }
//! assert_eq!(limiter.limit(), 2); // 4 -> 3 -> 2, and the floor holds it at 2
//! # Ok::<(), breaker::adaptive::InvalidAdaptiveLimit>(())
//! ```

mod error;
mod policy;

pub use error::{InvalidAdaptiveLimit, LimitReached};
pub use policy::{AdaptiveLimitPolicy, LimitAlgorithm};

use crate::classify::Outcome;
use crate::clock::Clock;
use crate::sync::{AtomicU32, Ordering};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An adaptive concurrency limit. See the [module docs](self). Cloning is cheap and clones
/// share the limit.
#[derive(Clone)]
pub struct AdaptiveLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    in_flight: AtomicU32,
    limit: AtomicU32,
    policy: AdaptiveLimitPolicy,
    clock: Clock,
    /// Gradient2's state; `None` for AIMD.
    gradient: Option<Mutex<Gradient>>,
    /// The name its limit's gauge and events carry.
    name: String,
}

/// Gradient2's floating-point state.
struct Gradient {
    /// The estimated limit, before rounding.
    estimated: f64,
    /// The long-term average latency in nanoseconds (0 before the first sample).
    long_rtt: f64,
    /// Samples taken, for the average's warm-up (a plain mean over the first 10).
    samples: u32,
}

/// Samples over which the long-term average is a plain mean before it becomes exponential
/// (Netflix's `ExpAvgMeasurement` warm-up).
const WARMUP: u32 = 10;

impl AdaptiveLimiter {
    /// A limiter with `policy` on the system clock.
    ///
    /// # Errors
    /// [`InvalidAdaptiveLimit`] naming every value out of range
    /// ([`AdaptiveLimitPolicy::problems`]).
    pub fn new(policy: AdaptiveLimitPolicy) -> Result<Self, InvalidAdaptiveLimit> {
        AdaptiveLimiter::with_clock(policy, Clock::system())
    }

    /// A limiter with `policy` timing calls on `clock`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_clock(
        policy: AdaptiveLimitPolicy,
        clock: Clock,
    ) -> Result<Self, InvalidAdaptiveLimit> {
        policy.validate()?;
        let gradient = matches!(policy.algorithm, LimitAlgorithm::Gradient2 { .. }).then(|| {
            Mutex::new(Gradient {
                estimated: f64::from(policy.initial_limit),
                long_rtt: 0.0,
                samples: 0,
            })
        });
        Ok(AdaptiveLimiter {
            inner: Arc::new(Inner {
                in_flight: AtomicU32::new(0),
                limit: AtomicU32::new(policy.initial_limit),
                policy,
                clock,
                gradient,
                name: String::new(),
            }),
        })
    }

    /// This limiter reporting its limit under `breaker=name` (the
    /// [`CONCURRENCY_LIMIT`](crate::observe::CONCURRENCY_LIMIT) gauge with the `metrics`
    /// feature, and a `tracing` debug event per change; `""` by default). Call it before
    /// cloning.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.name = name.into();
        }
        self
    }

    /// The policy.
    pub fn policy(&self) -> AdaptiveLimitPolicy {
        self.inner.policy
    }

    /// The limit now, within the policy's floor and ceiling.
    pub fn limit(&self) -> u32 {
        self.inner.limit.load(Ordering::Acquire)
    }

    /// The calls in flight now.
    pub fn in_flight(&self) -> u32 {
        self.inner.in_flight.load(Ordering::Acquire)
    }

    /// Takes a slot if fewer calls than the limit are in flight. Lock-free: one
    /// compare-and-swap, retried only when another call took or gave back a slot meanwhile.
    ///
    /// # Errors
    /// [`LimitReached`] when the limit's slots are all taken.
    #[inline]
    pub fn try_acquire(&self) -> Result<AdaptivePermit<'_>, LimitReached> {
        let (start, in_flight) = self.inner.admit()?;
        Ok(AdaptivePermit {
            inner: &self.inner,
            start,
            in_flight,
            done: false,
        })
    }

    /// Like [`try_acquire`](Self::try_acquire), with a permit that owns a handle to the
    /// limiter (for a future that must be `'static`, as in tower).
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_owned(&self) -> Result<OwnedAdaptivePermit, LimitReached> {
        let (start, in_flight) = self.inner.admit()?;
        Ok(OwnedAdaptivePermit {
            inner: Arc::clone(&self.inner),
            start,
            in_flight,
            done: false,
        })
    }
}

impl Inner {
    /// Admits a call: its start reading and the calls in flight with it.
    #[inline]
    fn admit(&self) -> Result<(u64, u32), LimitReached> {
        let mut n = self.in_flight.load(Ordering::Relaxed);
        loop {
            let limit = self.limit.load(Ordering::Relaxed);
            if n >= limit {
                return Err(LimitReached {
                    limit,
                    in_flight: n,
                });
            }
            match self.in_flight.compare_exchange_weak(
                n,
                n + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok((self.clock.now_nanos(), n + 1)),
                Err(actual) => n = actual,
            }
        }
    }

    /// Ends a call admitted at `start` with `in_flight` calls: frees its slot and, for a
    /// success or failure, gives the algorithm the sample.
    fn finish(&self, start: u64, in_flight: u32, outcome: Option<Outcome>) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let drop = match outcome {
            Some(Outcome::Success) => false,
            Some(Outcome::Failure) => true,
            Some(Outcome::Ignored) | None => return,
        };
        let rtt = self.clock.elapsed_since(start);
        self.sample(rtt, in_flight, drop);
    }

    /// One sample: a call of latency `rtt` that ran with `in_flight` calls, a drop or not.
    fn sample(&self, rtt: Duration, in_flight: u32, drop: bool) {
        let AdaptiveLimitPolicy {
            min_limit: min,
            max_limit: max,
            ..
        } = self.policy;
        match self.policy.algorithm {
            LimitAlgorithm::Aimd {
                backoff_ratio,
                slow_call,
            } => {
                let drop = drop || rtt > slow_call;
                let moved = self
                    .limit
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |limit| {
                        let next = if drop {
                            // Rounded down, so a small limit still falls.
                            ((f64::from(limit) * backoff_ratio) as u32).max(min)
                        } else if u64::from(in_flight) * 2 >= u64::from(limit) {
                            limit.saturating_add(1).min(max)
                        } else {
                            limit
                        };
                        (next != limit).then_some(next)
                    });
                if let Ok(from) = moved {
                    crate::observe::concurrency_limit(
                        &self.name,
                        from,
                        self.limit.load(Ordering::Relaxed),
                    );
                }
            }
            LimitAlgorithm::Gradient2 {
                tolerance,
                smoothing,
                long_window,
                queue_size,
            } => {
                let Some(Ok(mut g)) = self.gradient.as_ref().map(Mutex::try_lock) else {
                    // Another call is updating the estimate: this sample is skipped.
                    return;
                };
                let short = (rtt.as_nanos() as f64).max(1.0);
                g.samples = g.samples.saturating_add(1);
                g.long_rtt = if g.samples <= WARMUP {
                    g.long_rtt + (short - g.long_rtt) / f64::from(g.samples)
                } else {
                    let factor = 2.0 / (f64::from(long_window) + 1.0);
                    g.long_rtt * (1.0 - factor) + short * factor
                };
                // Latency fell well below the average: let the average catch up fast.
                if g.long_rtt / short > 2.0 {
                    g.long_rtt *= 0.95;
                }
                // A limit the calls do not use is not judged by them.
                if f64::from(in_flight) < g.estimated / 2.0 {
                    return;
                }
                let gradient = (tolerance * g.long_rtt / short).clamp(0.5, 1.0);
                let next = g.estimated * gradient + f64::from(queue_size);
                let next = (g.estimated * (1.0 - smoothing) + next * smoothing)
                    .clamp(f64::from(min), f64::from(max));
                g.estimated = next;
                let from = self.limit.swap(next as u32, Ordering::AcqRel);
                if from != next as u32 {
                    crate::observe::concurrency_limit(&self.name, from, next as u32);
                }
            }
        }
    }
}

/// A slot under an [`AdaptiveLimiter`], held for one call. Say how the call ended
/// ([`success`](Self::success), [`failure`](Self::failure), [`record`](Self::record)); dropped
/// without, it frees the slot and gives no sample (a cancelled call says nothing about the
/// dependency).
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct AdaptivePermit<'a> {
    inner: &'a Inner,
    start: u64,
    in_flight: u32,
    done: bool,
}

impl AdaptivePermit<'_> {
    /// The call succeeded: a sample of its latency.
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The call failed or timed out: a drop.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// The call ended with `outcome` (an ignored one gives no sample).
    pub fn record(mut self, outcome: Outcome) {
        self.done = true;
        self.inner.finish(self.start, self.in_flight, Some(outcome));
    }
}

impl Drop for AdaptivePermit<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.finish(self.start, self.in_flight, None);
        }
    }
}

impl fmt::Debug for AdaptivePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptivePermit")
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

/// An [`AdaptivePermit`] that owns a handle to its limiter.
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct OwnedAdaptivePermit {
    inner: Arc<Inner>,
    start: u64,
    in_flight: u32,
    done: bool,
}

impl OwnedAdaptivePermit {
    /// The call ended with `outcome` (see [`AdaptivePermit::record`]).
    pub fn record(mut self, outcome: Outcome) {
        self.done = true;
        self.inner.finish(self.start, self.in_flight, Some(outcome));
    }
}

impl Drop for OwnedAdaptivePermit {
    fn drop(&mut self) {
        if !self.done {
            self.inner.finish(self.start, self.in_flight, None);
        }
    }
}

impl fmt::Debug for OwnedAdaptivePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedAdaptivePermit")
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for AdaptiveLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimiter")
            .field("policy", &self.inner.policy)
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests;
