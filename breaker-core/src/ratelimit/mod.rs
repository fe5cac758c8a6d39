//! A rate limiter: at most so many calls per period, smooth, with a burst.
//!
//! # Why
//! A breaker protects the caller from a dependency that fails; a rate limiter protects the
//! dependency (and the caller's quota with it) from the caller. A client allowed 100 requests
//! a second by its provider, or a service that must not send a shared database more than it
//! can take, needs the calls spread out, not cut off after the fact by 429s.
//!
//! # How
//! The limiter is GCRA, the generic cell rate algorithm (ATM Forum TM 4.1; the algorithm of
//! the `governor` crate, whose implementation this module uses): one atomic "theoretical
//! arrival time", advanced by one emission interval (`per / rate`) per permit, by one
//! compare-and-swap. A call is admitted if it comes no more than `burst - 1` intervals
//! before that time. There is no refill task and no lock: a limiter costs one `u64` of state
//! and an admission a clock read and one CAS ([`RateLimitPolicy`] says exactly what is
//! admitted).
//!
//! - **Rejected, with the time to the next permit.** [`RateLimiter::try_acquire`] never
//!   waits: it takes a permit or returns [`RateLimited`] whose `retry_after` is exactly when
//!   one will be free (if no one else takes it first).
//! - **Or waiting, up to a bound.** [`RateLimiter::acquire`] waits up to the policy's
//!   `max_wait` (tokio's timer, so a paused test clock drives it). A call whose permit comes
//!   later than the wait allows, or than an enclosing deadline, is rejected at once rather
//!   than after waiting in vain. Waiters are not queued: each retries at the instant its
//!   permit was due, and a newcomer may take it first (as with `governor`'s `until_ready`).
//! - **Its own clock.** Time is read from a [`Clock`] (the system clock by default): build the
//!   limiter with [`Clock::tokio`] on a paused test runtime, or a
//!   [`ManualClock`](crate::clock::ManualClock) for a test that never sleeps.
//!
//! # Why `governor`
//! `governor` is the reference GCRA implementation in Rust: lock-free, exact and well kept.
//! It fits: its clock is a trait, implemented here over this crate's [`Clock`], so the paused
//! tokio clock and the manual clock drive it like every other layer. Its keyed store
//! (`dashmap`, unbounded) and its waiting (`futures-timer`, real time) are not used: keys go
//! through our bounded registry, waits through tokio's timer.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::clock::{Clock, ManualClock};
//! use breaker::ratelimit::{RateLimitPolicy, RateLimiter};
//! use std::time::Duration;
//!
//! let time = ManualClock::new();
//! let limiter =
//!     RateLimiter::with_clock(RateLimitPolicy::per_second(10).burst(2), Clock::manual(&time))?;
//! assert!(limiter.try_acquire().is_ok());
//! assert!(limiter.try_acquire().is_ok()); // the burst
//! let refused = limiter.try_acquire().unwrap_err();
//! assert_eq!(refused.retry_after, Duration::from_millis(100));
//! time.advance(Duration::from_millis(100));
//! assert!(limiter.try_acquire().is_ok());
//! # Ok::<(), breaker::ratelimit::InvalidRateLimit>(())
//! ```

mod error;
mod keyed;
mod policy;

pub use error::{InvalidRateLimit, RateLimited};
pub use keyed::{RateLimiters, RateLimitersBuilder};
pub use policy::{RateLimitPolicy, MAX_BURST};

use crate::clock::Clock;
use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::Quota;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// This crate's [`Clock`] as a `governor` clock: readings in nanoseconds since its origin.
#[derive(Clone)]
struct Ticks(Clock);

impl GovernorClock for Ticks {
    type Instant = Nanos;

    #[inline]
    fn now(&self) -> Nanos {
        Nanos::new(self.0.now_nanos())
    }
}

type Gcra = governor::RateLimiter<NotKeyed, InMemoryState, Ticks, NoOpMiddleware<Nanos>>;

/// A GCRA rate limiter. See the [module docs](self). Cloning is cheap and clones share the
/// limit.
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    gcra: Gcra,
    policy: RateLimitPolicy,
    clock: Clock,
}

impl RateLimiter {
    /// A limiter with `policy`, on the system clock.
    ///
    /// # Errors
    /// [`InvalidRateLimit`] naming every value of `policy` out of range (see
    /// [`RateLimitPolicy::problems`]).
    pub fn new(policy: RateLimitPolicy) -> Result<Self, InvalidRateLimit> {
        RateLimiter::with_clock(policy, Clock::system())
    }

    /// A limiter with `policy` whose time is read from `clock` ([`Clock::tokio`] on a paused
    /// test runtime, [`Clock::manual`] in a test that moves time by hand).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_clock(policy: RateLimitPolicy, clock: Clock) -> Result<Self, InvalidRateLimit> {
        policy.validate()?;
        Ok(RateLimiter::validated(policy, clock))
    }

    /// A limiter of a policy [`validate`](RateLimitPolicy::validate) accepted.
    fn validated(policy: RateLimitPolicy, clock: Clock) -> Self {
        let (Some(interval), Some(burst)) = (policy.interval(), NonZeroU32::new(policy.burst))
        else {
            unreachable!("validated: a non-zero interval and burst")
        };
        let quota = Quota::with_period(interval)
            .expect("a non-zero interval")
            .allow_burst(burst);
        RateLimiter {
            inner: Arc::new(Inner {
                gcra: governor::RateLimiter::direct_with_clock(quota, Ticks(clock.clone())),
                policy,
                clock,
            }),
        }
    }

    /// Bytes this limiter uses: its handle and its shared state (the GCRA state, policy and
    /// clock), not counting what a shared clock holds.
    pub fn memory_bytes(&self) -> usize {
        // The `Arc`'s block: two counts and the state.
        std::mem::size_of::<Self>()
            + 2 * std::mem::size_of::<usize>()
            + std::mem::size_of::<Inner>()
    }

    /// How many handles share this limiter (clones, and calls that hold it).
    pub(crate) fn handle_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The policy.
    pub fn policy(&self) -> RateLimitPolicy {
        self.inner.policy
    }

    /// The clock the limiter reads.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// Takes a permit now, or says when the next one is due. Lock-free: a clock read and one
    /// compare-and-swap (retried only when another call took a permit meanwhile).
    ///
    /// # Errors
    /// [`RateLimited`] with the time until the next permit (`waited` zero).
    #[inline]
    pub fn try_acquire(&self) -> Result<(), RateLimited> {
        self.check().map_err(|retry_after| RateLimited {
            retry_after,
            waited: Duration::ZERO,
        })
    }

    /// One GCRA decision: `Err` with the time until the next permit.
    #[inline]
    fn check(&self) -> Result<(), Duration> {
        match self.inner.gcra.check() {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(Nanos::new(self.inner.clock.now_nanos()));
                // Never zero: a rejection always names a time in the future.
                Err(wait.max(Duration::from_nanos(1)))
            }
        }
    }
}

#[cfg(feature = "tokio")]
impl RateLimiter {
    /// Takes a permit, waiting up to the policy's `max_wait` for one (tokio's timer).
    ///
    /// # Errors
    /// [`RateLimited`] when no permit came within the wait, or when the next permit is due
    /// later than the wait allows (then at once, `waited` zero).
    ///
    /// # Panics
    /// If it has to wait and no tokio runtime with the time driver is current.
    pub async fn acquire(&self) -> Result<(), RateLimited> {
        self.acquire_until(None).await
    }

    /// Takes a permit, waiting up to `max_wait` but not past `deadline`: the pipeline's
    /// rate-limit layer under a total deadline or an outer timeout.
    pub(crate) async fn acquire_until(
        &self,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), RateLimited> {
        let start = tokio::time::Instant::now();
        let give_up = match (start.checked_add(self.inner.policy.max_wait), deadline) {
            (Some(g), Some(d)) => g.min(d),
            (Some(g), None) => g,
            (None, Some(d)) => d,
            (None, None) => start + Duration::from_secs(86_400 * 365 * 30),
        };
        loop {
            let retry_after = match self.check() {
                Ok(()) => return Ok(()),
                Err(retry_after) => retry_after,
            };
            let now = tokio::time::Instant::now();
            let due = now.checked_add(retry_after);
            if due.map_or(true, |due| due > give_up) {
                return Err(RateLimited {
                    retry_after,
                    waited: now.saturating_duration_since(start),
                });
            }
            tokio::time::sleep(retry_after).await;
        }
    }
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("policy", &self.inner.policy)
            .field("clock", &self.inner.clock)
            .finish()
    }
}

#[cfg(test)]
mod tests;
