//! Adaptive throttling: the client rejects a share of its own calls as the dependency
//! rejects them.
//!
//! # Why
//! When a dependency is overloaded, rejecting a request still costs it something (accepting
//! the connection, parsing, answering "overloaded"). Clients that keep sending at full rate
//! keep it overloaded with rejections alone. The Google SRE book's client-side throttling
//! (chapter 21, "Handling Overload") has each client notice that its requests are being
//! rejected and reject a growing share locally, without a round trip, while still sending
//! enough to notice recovery.
//!
//! # How
//! Over a sliding window (the last `window`, in 16 buckets) the throttler counts `requests`
//! (every call it was asked to admit, its own rejections included) and `accepts` (calls the
//! dependency accepted: a success or an outcome the classifier ignores; a failure or timeout
//! is not accepted). A call is rejected locally with probability
//!
//! ```text
//! p = max(0, (requests - K × accepts) / (requests + 1))
//! ```
//!
//! So while the dependency accepts at least one in `K` requests nothing is rejected; beyond
//! that the client sends about `K` requests per accepted one. A rejected call is
//! [`Throttled`]. The admission is lock-free: the counts are atomics (a bucket's two counts in
//! one word) and the draw a lock-free random sequence (seedable for tests). A call dropped
//! before it ends (cancelled: a hedge that lost, a caller that gave up) is not counted at
//! all, so cancellations do not read as rejections.
//!
//! # A layer, not a trip rule
//! This is a layer of its own (`throttle` in a pipeline's order) rather than a trip rule of the
//! breaker, because it is not a state: a trip rule moves the breaker from closed to open, all
//! or nothing, followed by a cooldown and probes. The SRE rule is proportional and never
//! stops sending (the calls it lets through are its probes), and it must count its own
//! rejections as requests, which a breaker's window (admitted calls only) does not. Beside a
//! breaker it answers a different question: the breaker stops calls to a dependency that
//! fails; throttling sheds the share of calls an overloaded one rejects.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::clock::{Clock, ManualClock};
//! use breaker::throttle::{ThrottlePolicy, Throttler};
//!
//! let time = ManualClock::new();
//! let throttler =
//!     Throttler::with_clock(ThrottlePolicy::default(), Clock::manual(&time))?.seeded(1);
//! // The dependency rejects every call; the client soon rejects most of them itself.
//! let mut local = 0;
//! for _ in 0..10 {
//!     match throttler.try_acquire() {
//!         Ok(call) => call.failure(),
//!         Err(_) => local += 1,
//!     }
//! }
//! assert!(local > 0);
//! // (10 - 2 × 0) / (10 + 1): 91% of the next calls are rejected locally.
//! assert_eq!(throttler.counts(), (10, 0));
//! assert!((throttler.probability() - 10.0 / 11.0).abs() < 1e-9);
//! # Ok::<(), breaker::throttle::InvalidThrottle>(())
//! ```

mod error;
mod policy;
mod window;

pub use error::{InvalidThrottle, Throttled};
pub use policy::{ThrottlePolicy, MAX_WINDOW, MIN_WINDOW};

use crate::classify::Outcome;
use crate::clock::Clock;
use crate::sync::{AtomicU64, Ordering};
use std::fmt;
use std::sync::Arc;
use window::Window;

/// The rejection probability of the rule for these counts.
pub(crate) fn probability(requests: u32, accepts: u32, k: f64) -> f64 {
    let requests = f64::from(requests);
    ((requests - k * f64::from(accepts)) / (requests + 1.0)).max(0.0)
}

/// Client-side adaptive throttling. See the [module docs](self). Cloning is cheap and clones
/// share the counts.
#[derive(Clone)]
pub struct Throttler {
    inner: Arc<Inner>,
}

struct Inner {
    window: Window,
    policy: ThrottlePolicy,
    clock: Clock,
    /// The state of the draw's random sequence (splitmix64's Weyl sequence).
    draw: AtomicU64,
}

/// splitmix64's increment.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Throttler {
    /// A throttler with `policy` on the system clock, its draw seeded from the clock.
    ///
    /// # Errors
    /// [`InvalidThrottle`] naming every value out of range ([`ThrottlePolicy::problems`]).
    pub fn new(policy: ThrottlePolicy) -> Result<Self, InvalidThrottle> {
        Throttler::with_clock(policy, Clock::system())
    }

    /// A throttler with `policy` whose window is measured on `clock`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_clock(policy: ThrottlePolicy, clock: Clock) -> Result<Self, InvalidThrottle> {
        policy.validate()?;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(Throttler {
            inner: Arc::new(Inner {
                window: Window::new(policy.window),
                policy,
                clock,
                draw: AtomicU64::new(seed),
            }),
        })
    }

    /// This throttler with its random draws seeded, for reproducible tests and simulations.
    /// Call it before cloning (clones share the sequence).
    pub fn seeded(self, seed: u64) -> Self {
        self.inner.draw.store(seed, Ordering::Relaxed);
        self
    }

    /// The policy.
    pub fn policy(&self) -> ThrottlePolicy {
        self.inner.policy
    }

    /// The requests and accepts counted in the window now.
    pub fn counts(&self) -> (u32, u32) {
        self.inner.window.totals(self.inner.clock.now_nanos())
    }

    /// The rejection probability now, in `0.0..1.0`.
    pub fn probability(&self) -> f64 {
        let (requests, accepts) = self.counts();
        probability(requests, accepts, self.inner.policy.k)
    }

    /// Admits a call, or rejects it with the rule's probability. Lock-free.
    ///
    /// # Errors
    /// [`Throttled`] (counted as a request of the window).
    #[inline]
    pub fn try_acquire(&self) -> Result<ThrottlePermit<'_>, Throttled> {
        self.inner.admit()?;
        Ok(ThrottlePermit { inner: &self.inner })
    }

    /// Like [`try_acquire`](Self::try_acquire), with a permit that owns a handle to the
    /// throttler (for a `'static` future, as in tower).
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_owned(&self) -> Result<OwnedThrottlePermit, Throttled> {
        self.inner.admit()?;
        Ok(OwnedThrottlePermit {
            inner: Arc::clone(&self.inner),
        })
    }
}

impl Inner {
    fn admit(&self) -> Result<(), Throttled> {
        let now = self.clock.now_nanos();
        let (requests, accepts) = self.window.totals(now);
        let p = probability(requests, accepts, self.policy.k);
        if p > 0.0 && self.draw() < p {
            self.window.add(now, 1, 0);
            return Err(Throttled {
                requests: requests.saturating_add(1),
                accepts,
                k_milli: (self.policy.k * 1000.0).round() as u32,
            });
        }
        Ok(())
    }

    /// A uniform draw in `[0, 1)`: splitmix64 over a Weyl sequence, one atomic add.
    fn draw(&self) -> f64 {
        let mut z = self
            .draw
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Counts an admitted call that ended with `outcome`.
    fn finish(&self, outcome: Outcome) {
        let accepted = outcome != Outcome::Failure;
        self.window
            .add(self.clock.now_nanos(), 1, u32::from(accepted));
    }
}

/// A call admitted by a [`Throttler`]. Say how it ended ([`success`](Self::success),
/// [`failure`](Self::failure), [`record`](Self::record)); dropped without, the call is not
/// counted (a cancellation is not a rejection by the dependency).
#[must_use = "an admitted call is counted only when its outcome is recorded"]
pub struct ThrottlePermit<'a> {
    inner: &'a Inner,
}

impl ThrottlePermit<'_> {
    /// The dependency accepted the call.
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The dependency rejected the call, or it failed or timed out.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// The call ended with `outcome`: accepted unless it is a failure.
    pub fn record(self, outcome: Outcome) {
        self.inner.finish(outcome);
    }
}

impl fmt::Debug for ThrottlePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottlePermit").finish_non_exhaustive()
    }
}

/// A [`ThrottlePermit`] that owns a handle to its throttler.
#[must_use = "an admitted call is counted only when its outcome is recorded"]
pub struct OwnedThrottlePermit {
    inner: Arc<Inner>,
}

impl OwnedThrottlePermit {
    /// The call ended with `outcome` (see [`ThrottlePermit::record`]).
    pub fn record(self, outcome: Outcome) {
        self.inner.finish(outcome);
    }
}

impl fmt::Debug for OwnedThrottlePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedThrottlePermit")
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Throttler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttler")
            .field("policy", &self.inner.policy)
            .field("counts", &self.counts())
            .finish()
    }
}

#[cfg(test)]
mod tests;
