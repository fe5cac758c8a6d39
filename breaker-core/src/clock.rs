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
//! - [`Clock::custom_with_coarse`]: a precise source with a coarse one beside it (below).
//!
//! **The coarse clock.** Beside its precise reading, the system clock has a coarse one: the
//! operating system's `CLOCK_MONOTONIC_COARSE` on Linux and Android, a read of a time the kernel
//! updates on every tick (no counter instruction, about half the cost of the time-stamp counter
//! on a virtual machine), as exact as one tick (its resolution, read once per process with
//! `clock_getres`; 4 ms on a kernel with `HZ=250`). The breaker reads it where a tick of error
//! cannot change a decision: an open breaker's rejections while the cooldown has more than a
//! tick and 0.1 % of itself to go (see the [`breaker`](crate::breaker) module's invariants), and
//! a time window's buckets, whose edges then fall up to a tick late
//! ([`SlidingWindow::Time`](crate::breaker::SlidingWindow::Time)). Coarse readings are only
//! ever compared with other coarse readings of the same clock; slow-call timing, stamps and
//! deadlines read the precise one. The tokio, manual and custom clocks have no coarse clock, so
//! there every decision reads the precise one.
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
    WithCoarse(Arc<WithCoarse>),
}

struct WithCoarse {
    precise: Arc<dyn MonotonicSource>,
    coarse: Arc<dyn MonotonicSource>,
    resolution: u64,
}

struct SystemClock {
    clock: quanta::Clock,
    origin: u64,
    /// The coarse clock's resolution in nanoseconds; 0 where there is no coarse clock.
    coarse_resolution: u64,
}

fn system_clock() -> &'static SystemClock {
    static SYSTEM: OnceLock<SystemClock> = OnceLock::new();
    SYSTEM.get_or_init(|| {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        SystemClock {
            clock,
            origin,
            coarse_resolution: coarse::resolution(),
        }
    })
}

/// The operating system's coarse monotonic clock, where it has one.
#[cfg(all(any(target_os = "linux", target_os = "android"), not(loom)))]
mod coarse {
    use rustix::time::{clock_getres, clock_gettime, ClockId, Timespec};

    /// Nanoseconds in `ts`.
    #[inline(always)]
    fn nanos(ts: Timespec) -> u64 {
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64)
    }

    /// Nanoseconds since an origin of the system's (boot, on Linux).
    /// `CLOCK_MONOTONIC_COARSE` exists on every Linux since 2.6.32 (checked once in
    /// `resolution`), read through the vDSO.
    #[inline(always)]
    pub(super) fn now() -> u64 {
        nanos(clock_gettime(ClockId::MonotonicCoarse))
    }

    /// The resolution in nanoseconds, 0 if it is coarser than 100 ms (then the clock is not
    /// used).
    pub(super) fn resolution() -> u64 {
        let res = nanos(clock_getres(ClockId::MonotonicCoarse));
        if res > 0 && res <= 100_000_000 {
            res
        } else {
            0
        }
    }
}

#[cfg(not(all(any(target_os = "linux", target_os = "android"), not(loom))))]
mod coarse {
    pub(super) fn now() -> u64 {
        0
    }
    pub(super) fn resolution() -> u64 {
        0
    }
}

/// A coarse reading and how far behind the true time it may be, both in nanoseconds (see the
/// [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CoarseReading {
    pub(crate) now: u64,
    pub(crate) resolution: u64,
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

    /// A clock over a precise source and a coarse one beside it, which the breaker reads where
    /// an error of `resolution` cannot change a decision (see the [module docs](self)): the
    /// system clock's arrangement, with sources of your own (or two [`ManualClock`]s in a test).
    ///
    /// `coarse` may have its own origin, but must advance at the rate of `precise` and lag the
    /// true time by at most `resolution`. A `resolution` of zero or above 100 ms means no coarse
    /// clock.
    pub fn custom_with_coarse(
        precise: Arc<dyn MonotonicSource>,
        coarse: Arc<dyn MonotonicSource>,
        resolution: Duration,
    ) -> Self {
        let resolution = u64::try_from(resolution.as_nanos()).unwrap_or(u64::MAX);
        Clock {
            kind: Kind::WithCoarse(Arc::new(WithCoarse {
                precise,
                coarse,
                resolution: if resolution <= 100_000_000 {
                    resolution
                } else {
                    0
                },
            })),
        }
    }

    /// The coarse clock's reading, `None` for a clock without one.
    #[inline(always)]
    pub(crate) fn coarse(&self) -> Option<CoarseReading> {
        match &self.kind {
            Kind::System(sys) if sys.coarse_resolution != 0 => Some(CoarseReading {
                now: coarse::now(),
                resolution: sys.coarse_resolution,
            }),
            Kind::WithCoarse(w) if w.resolution != 0 => Some(CoarseReading {
                now: w.coarse.now_nanos(),
                resolution: w.resolution,
            }),
            _ => None,
        }
    }

    /// The coarse clock's reading alone (nanoseconds), for a caller that already knows there
    /// is one ([`Clock::coarse`] returned `Some` for this clock before: the open state's hint,
    /// which is left only then); `None` for a kind without a coarse source. Without the
    /// resolution's check, so the rejection path reads one field fewer.
    #[inline(always)]
    pub(crate) fn coarse_now(&self) -> Option<u64> {
        // The system clock first, with its own test: the kind a breaker with defaults has.
        if let Kind::System(_) = &self.kind {
            return Some(coarse::now());
        }
        self.coarse_now_other()
    }

    /// [`Clock::coarse_now`] for a kind other than the system clock, out of line.
    #[cold]
    #[inline(never)]
    fn coarse_now_other(&self) -> Option<u64> {
        match &self.kind {
            Kind::WithCoarse(w) => Some(w.coarse.now_nanos()),
            _ => None,
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
            Kind::WithCoarse(w) => w.precise.now_nanos(),
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
            Kind::WithCoarse(_) => "custom with coarse",
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

/// A manual clock as a source, for [`Clock::custom_with_coarse`] in tests.
impl MonotonicSource for ManualClock {
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }
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
