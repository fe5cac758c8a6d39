//! Values that used to be accepted and then misbehave (issue 11): a cooldown long enough to
//! wrap the packed deadline, clock readings past what 48 bits of microseconds hold, and
//! `cooldown_max` below the cooldown with a constant cooldown (accepted on purpose: see
//! `BreakerPolicy::cooldown_max`).

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State, MAX_COOLDOWN};
use breaker_core::clock::{Clock, ManualClock, MonotonicSource};
use std::sync::Arc;
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A manual clock whose readings start at `origin` nanoseconds.
struct Offset {
    origin: u64,
    time: ManualClock,
}

impl MonotonicSource for Offset {
    fn now_nanos(&self) -> u64 {
        self.origin + self.time.now().as_nanos() as u64
    }
}

fn breaker_at(origin: u64, policy: BreakerPolicy) -> (CircuitBreaker, ManualClock) {
    let time = ManualClock::new();
    let clock = Clock::custom(Arc::new(Offset {
        origin,
        time: time.clone(),
    }));
    let b = CircuitBreaker::builder(policy)
        .clock(clock)
        .build()
        .unwrap();
    (b, time)
}

fn consecutive(cooldown: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown,
        cooldown_max: cooldown,
        ..BreakerPolicy::default()
    }
}

/// Opens at the clock's origin, then checks the cooldown is kept to the microsecond.
fn holds_its_cooldown(origin: u64, cooldown: Duration) {
    let (b, time) = breaker_at(origin, consecutive(cooldown));
    b.try_acquire().unwrap().failure();
    assert_eq!(b.snapshot().retry_after, Some(cooldown), "origin {origin}");
    time.set(cooldown / 2);
    let r = b.try_acquire().unwrap_err();
    assert_eq!(
        (r.reason(), r.retry_after()),
        (RejectReason::Open, Some(cooldown - cooldown / 2)),
        "origin {origin}"
    );
    time.set(cooldown - Duration::from_micros(1));
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_micros(1))
    );
    time.set(cooldown);
    assert!(
        b.try_acquire().unwrap().is_probe(),
        "admitted at the deadline"
    );
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn a_clock_counting_from_1970_keeps_the_breaker_open_for_its_cooldown() {
    // Nanoseconds since the Unix epoch: far past 2^48 microseconds.
    holds_its_cooldown(1_700_000_000_000_000_000, secs(30));
}

#[test]
fn a_deadline_across_the_48_bit_wrap_of_microseconds() {
    let wrap = (1u64 << 48) * 1_000; // 2^48 µs in ns, about 8.9 years
    holds_its_cooldown(wrap - 5_000_000_000, secs(10)); // opened 5 s before the wrap
    holds_its_cooldown(wrap - 1_000, secs(10));
}

#[test]
fn the_longest_cooldown_accepted_is_kept_exactly() {
    holds_its_cooldown(0, MAX_COOLDOWN);
    holds_its_cooldown(1_700_000_000_000_000_000, MAX_COOLDOWN);
}

#[test]
fn a_nine_year_cooldown_is_rejected_with_the_bound() {
    let nine_years = secs(9 * 365 * 86_400);
    let err = CircuitBreaker::new(consecutive(nine_years)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid policy: `cooldown`: must be at most 365 days (31536000s), got 283824000s"
    );
    let grows = BreakerPolicy {
        cooldown_multiplier: 2.0,
        cooldown_max: nine_years,
        ..consecutive(secs(10))
    };
    assert_eq!(
        CircuitBreaker::new(grows).unwrap_err().errors[0].field,
        "cooldown_max"
    );
}

#[test]
fn cooldown_max_below_a_constant_cooldown_changes_nothing() {
    for max in [Duration::ZERO, secs(5)] {
        let (b, time) = breaker_at(
            0,
            BreakerPolicy {
                cooldown_max: max,
                ..consecutive(secs(60))
            },
        );
        b.try_acquire().unwrap().failure();
        assert_eq!(b.snapshot().retry_after, Some(secs(60)));
        time.set(secs(60));
        b.try_acquire().unwrap().failure(); // the probe fails: open streak 2
        assert_eq!(
            b.snapshot().retry_after,
            Some(secs(60)),
            "a constant cooldown neither grows nor shrinks to cooldown_max {max:?}"
        );
    }
}
