//! Monotonic clocks for cooldowns, slow-call timing and time windows.
//!
//! Why a clock of our own: every timing decision of a breaker (is the cooldown over? was that
//! call slow? which time bucket does this outcome fall in?) must use a *monotonic* source, never
//! the wall clock (a wall clock stepped forward by a day would hold a breaker open for a day; see
//! case BR-23), and tests must be able to drive time by hand. [`Clock`] is a small, cheaply
//! cloned handle over one of four sources:
//!
//! - [`Clock::system`], the default: the CPU's invariant time-stamp counter through the
//!   [`quanta`] crate, calibrated once per process. It costs a few nanoseconds, several times
//!   less than [`std::time::Instant::now`] on virtual machines, which matters on the open-state
//!   rejection path.
//! - [`Clock::tokio`]: tokio's clock, so tests on a paused runtime (`start_paused = true`) move
//!   breakers and retries forward with `tokio::time::advance`.
//! - [`Clock::manual`]: a [`ManualClock`] the test sets and advances itself.
//! - [`Clock::custom`]: any [`MonotonicSource`].
//!
//! Readings are nanoseconds since an arbitrary origin. A reading that goes backwards (a
//! misbehaving source) is never an error: every elapsed-time computation saturates at zero.

use crate::sync::{AtomicU64, Ordering};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A user-supplied monotonic time source.
///
/// Implementations return nanoseconds since an origin of their choosing. They should never go
/// backwards; if they do, the breaker treats the elapsed time as zero rather than panicking.
pub trait MonotonicSource: Send + Sync + 'static {
    /// The current reading, in nanoseconds since the source's origin.
    fn now_nanos(&self) -> u64;
}

/// A cheaply cloned handle to a monotonic clock. See the [module docs](self).
#[derive(Clone)]
pub struct Clock {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    System(&'static SystemClock),
    #[cfg(feature = "tokio")]
    Tokio(tokio::time::Instant),
    Manual(Arc<AtomicU64>),
    Custom(Arc<dyn MonotonicSource>),
}

struct SystemClock {
    clock: quanta::Clock,
    origin: u64,
}

fn system_clock() -> &'static SystemClock {
    static SYSTEM: OnceLock<SystemClock> = OnceLock::new();
    SYSTEM.get_or_init(|| {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        SystemClock { clock, origin }
    })
}

impl Clock {
    /// The process-wide monotonic clock (the time-stamp counter via `quanta`, falling back to the
    /// operating system's monotonic clock where no reliable counter exists).
    ///
    /// The first call calibrates the counter (a few milliseconds, once per process).
    pub fn system() -> Self {
        Clock {
            kind: Kind::System(system_clock()),
        }
    }

    /// tokio's clock (`tokio::time::Instant`), which a paused test runtime lets you advance.
    ///
    /// The origin is the moment of this call. Works outside a runtime too (then it follows the
    /// real monotonic clock).
    #[cfg(feature = "tokio")]
    pub fn tokio() -> Self {
        Clock {
            kind: Kind::Tokio(tokio::time::Instant::now()),
        }
    }

    /// A clock that reads the given [`ManualClock`]; clones of it share the same time.
    pub fn manual(clock: &ManualClock) -> Self {
        Clock {
            kind: Kind::Manual(Arc::clone(&clock.nanos)),
        }
    }

    /// A clock over a user-supplied source.
    pub fn custom(source: Arc<dyn MonotonicSource>) -> Self {
        Clock {
            kind: Kind::Custom(source),
        }
    }

    /// The current reading, in nanoseconds since this clock's origin.
    #[inline]
    pub fn now_nanos(&self) -> u64 {
        match &self.kind {
            Kind::System(sys) => sys.clock.delta_as_nanos(sys.origin, sys.clock.raw()),
            #[cfg(feature = "tokio")]
            Kind::Tokio(origin) => {
                let d = tokio::time::Instant::now().saturating_duration_since(*origin);
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
            }
            Kind::Manual(nanos) => nanos.load(Ordering::Acquire),
            Kind::Custom(source) => source.now_nanos(),
        }
    }

    /// Time elapsed since an earlier reading `since` (nanoseconds from [`Clock::now_nanos`]),
    /// saturating at zero if the clock reads earlier than `since`.
    #[inline]
    pub fn elapsed_since(&self, since: u64) -> Duration {
        Duration::from_nanos(self.now_nanos().saturating_sub(since))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match &self.kind {
            Kind::System(_) => "system",
            #[cfg(feature = "tokio")]
            Kind::Tokio(_) => "tokio",
            Kind::Manual(_) => "manual",
            Kind::Custom(_) => "custom",
        };
        f.debug_tuple("Clock").field(&name).finish()
    }
}

/// A monotonic clock moved by hand, for tests.
///
/// It starts at zero. Clones share the same time. Its reading is an atomic of `crate::sync`, so
/// under loom every clock read is a point where the model may switch threads.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::clock::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let manual = ManualClock::new();
/// let clock = Clock::manual(&manual);
/// manual.advance(Duration::from_secs(10));
/// assert_eq!(clock.now_nanos(), 10_000_000_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Sets the reading to `at` since the origin. Setting it *backwards* is allowed, to test
    /// that nothing panics and elapsed times saturate at zero.
    pub fn set(&self, at: Duration) {
        let at = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(at, Ordering::Release);
    }

    /// The current reading.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_monotonic_non_decreasing() {
        let clock = Clock::system();
        let a = clock.now_nanos();
        let b = clock.now_nanos();
        assert!(b >= a);
    }

    #[test]
    fn elapsed_saturates_when_reading_goes_backwards() {
        let manual = ManualClock::new();
        let clock = Clock::manual(&manual);
        manual.set(Duration::from_secs(5));
        let at5 = clock.now_nanos();
        manual.set(Duration::from_secs(2));
        assert_eq!(clock.elapsed_since(at5), Duration::ZERO);
        manual.set(Duration::from_secs(7));
        assert_eq!(clock.elapsed_since(at5), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let clock = Clock::tokio();
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(clock.now_nanos(), 1_500_000_000);
    }
}
