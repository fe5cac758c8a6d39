//! The open state's rejections on a clock with a coarse source beside its precise one (issue
//! 16): while the cooldown has more than the coarse clock's resolution and 0.1 % of itself to
//! go, a rejection reads only the coarse clock; nearer the deadline the precise clock decides,
//! so recovery is never later than with the precise clock alone.
//!
//! Two `ManualClock`s stand in for the precise and the coarse source; the coarse one has its own
//! origin, as the operating system's does.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State};
use breaker_core::clock::{Clock, ManualClock};
use std::sync::Arc;
use std::time::Duration;

const COOLDOWN: Duration = Duration::from_secs(30);
const RESOLUTION: Duration = Duration::from_millis(4);
/// Where the coarse source's origin puts it when the precise one reads zero.
const COARSE_ORIGIN: Duration = Duration::from_secs(1_000);

struct Fixture {
    breaker: CircuitBreaker,
    precise: ManualClock,
    coarse: ManualClock,
}

impl Fixture {
    fn new(failures: u32) -> Fixture {
        let precise = ManualClock::new();
        let coarse = ManualClock::new();
        coarse.set(COARSE_ORIGIN);
        let clock = Clock::custom_with_coarse(
            Arc::new(precise.clone()),
            Arc::new(coarse.clone()),
            RESOLUTION,
        );
        let breaker = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(failures),
            cooldown: COOLDOWN,
            cooldown_max: COOLDOWN,
            ..BreakerPolicy::default()
        })
        .clock(clock)
        .build()
        .unwrap();
        Fixture {
            breaker,
            precise,
            coarse,
        }
    }

    /// Both clocks at `t` after the precise origin, the coarse one `lag` behind.
    fn at(&self, t: Duration, lag: Duration) {
        self.precise.set(t);
        self.coarse.set(COARSE_ORIGIN + t - lag);
    }

    fn trip(&self) {
        for _ in 0..16 {
            if self.breaker.state() == State::Open {
                return;
            }
            self.breaker.try_acquire().unwrap().failure();
        }
        panic!("the breaker did not open");
    }
}

#[test]
fn far_from_the_deadline_only_the_coarse_clock_is_read() {
    let f = Fixture::new(1);
    f.trip();
    // The two sources disagree on purpose, to show which one decides: the precise clock is past
    // the deadline, the coarse one 10 s after the trip.
    f.precise.set(Duration::from_secs(31));
    f.coarse.set(COARSE_ORIGIN + Duration::from_secs(10));
    let r = f.breaker.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    let left = r.retry_after().unwrap();
    // 20 s left by the coarse clock, less the margin (4 ms + 0.1 % of 30 s) and a hint unit.
    assert!(
        left <= Duration::from_secs(20) && left >= Duration::from_millis(19_960),
        "retry after {left:?}"
    );
    // 100 ms before the deadline by the coarse clock: still more than the margin (34 ms) to go.
    f.coarse.set(COARSE_ORIGIN + Duration::from_millis(29_900));
    assert_eq!(
        f.breaker.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    assert_eq!(f.breaker.state(), State::Open);
    // Within the margin the precise clock decides, and it says the cooldown is over.
    f.coarse.set(COARSE_ORIGIN + Duration::from_millis(29_980));
    let probe = f
        .breaker
        .try_acquire()
        .expect("the precise clock admits the probe");
    assert_eq!(f.breaker.state(), State::HalfOpen);
    probe.success();
    assert_eq!(f.breaker.state(), State::Closed);
}

#[test]
fn recovery_is_never_later_than_the_precise_deadline() {
    // Coarse lags of nothing to the whole resolution, and coarse rates 0.05 % off either way
    // (the margin covers 0.1 %).
    for lag_us in [0, 2_000, 4_000] {
        for rate_ppm in [-500i64, 0, 500] {
            let f = Fixture::new(1);
            let tripped_at = Duration::from_secs(5);
            f.at(tripped_at, Duration::from_micros(lag_us));
            f.trip();
            let deadline = tripped_at + COOLDOWN;
            let coarse_at = |t: Duration| {
                let since = (t - tripped_at).as_nanos() as i64;
                let skew = since * rate_ppm / 1_000_000;
                let lag = Duration::from_micros(lag_us);
                COARSE_ORIGIN + tripped_at - lag + Duration::from_nanos((since + skew) as u64)
            };
            // Every millisecond of the last 100 ms, and every second before: rejected, with a
            // retry-after no later than the precise deadline.
            let mut t = tripped_at;
            let steps = (1..30)
                .map(Duration::from_secs)
                .chain((0..100).map(|ms| COOLDOWN - Duration::from_millis(100 - ms)))
                .chain([COOLDOWN - Duration::from_micros(1)]);
            for step in steps {
                t = tripped_at + step;
                f.precise.set(t);
                f.coarse.set(coarse_at(t));
                let r = f.breaker.try_acquire().unwrap_err();
                assert_eq!(r.reason(), RejectReason::Open, "at {step:?}");
                let left = r.retry_after().unwrap();
                assert!(
                    left <= deadline - t + Duration::from_millis(2),
                    "lag {lag_us} us, rate {rate_ppm} ppm, at {step:?}: retry after {left:?}"
                );
            }
            assert!(t < deadline);
            f.precise.set(deadline);
            f.coarse.set(coarse_at(deadline));
            assert!(
                f.breaker.try_acquire().is_ok(),
                "lag {lag_us} us, rate {rate_ppm} ppm: no probe at the precise deadline"
            );
            assert_eq!(f.breaker.state(), State::HalfOpen);
        }
    }
}

#[test]
fn a_late_closed_result_neither_moves_the_hint_nor_counts_in_the_next_closed_period() {
    let f = Fixture::new(3);
    let late = f.breaker.try_acquire().unwrap();
    f.trip();
    late.failure(); // a result of the closed period before the trip
    assert_eq!(f.breaker.state(), State::Open);
    // The hint is intact: the coarse clock 10 s on still rejects, with 20 s to go, even with
    // the precise clock (which would admit) past the deadline.
    f.precise.set(Duration::from_secs(31));
    f.coarse.set(COARSE_ORIGIN + Duration::from_secs(10));
    let left = f.breaker.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(left > Duration::from_millis(19_960), "retry after {left:?}");
    // Recover, then the next closed period counts its failures from zero.
    f.at(Duration::from_secs(31), Duration::ZERO);
    f.breaker.try_acquire().unwrap().success();
    assert_eq!(f.breaker.state(), State::Closed);
    f.breaker.try_acquire().unwrap().failure();
    f.breaker.try_acquire().unwrap().failure();
    assert_eq!(f.breaker.state(), State::Closed);
    assert_eq!(f.breaker.snapshot().consecutive_failures, 2);
    f.breaker.try_acquire().unwrap().failure();
    assert_eq!(f.breaker.state(), State::Open);
}

#[test]
fn each_opening_leaves_its_own_hint() {
    let f = Fixture::new(1);
    f.trip();
    f.at(COOLDOWN, Duration::ZERO);
    f.breaker.try_acquire().unwrap().failure(); // the probe fails: open again, at 30 s
    assert_eq!(f.breaker.state(), State::Open);
    // The first opening's hint (due at 30 s) is not the second's (due at 60 s).
    f.at(COOLDOWN + Duration::from_secs(1), Duration::ZERO);
    let left = f.breaker.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(
        left <= Duration::from_secs(29) && left >= Duration::from_millis(28_960),
        "retry after {left:?}"
    );
    f.at(COOLDOWN * 2, Duration::ZERO);
    assert!(f.breaker.try_acquire().is_ok());
}

#[test]
fn without_a_coarse_source_the_precise_clock_decides_every_rejection() {
    // A resolution above 100 ms means no coarse clock: the coarse source is never read.
    let precise = ManualClock::new();
    let coarse = ManualClock::new();
    let clock = Clock::custom_with_coarse(
        Arc::new(precise.clone()),
        Arc::new(coarse.clone()),
        Duration::from_secs(1),
    );
    let b = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(1),
        ..BreakerPolicy::default()
    })
    .clock(clock)
    .build()
    .unwrap();
    b.try_acquire().unwrap().failure();
    precise.set(Duration::from_secs(10));
    let left = b.try_acquire().unwrap_err().retry_after().unwrap();
    assert_eq!(left, Duration::from_secs(20));
    precise.set(Duration::from_secs(30));
    assert!(b.try_acquire().is_ok());
}

#[test]
fn an_expired_hint_is_never_read_as_a_live_one() {
    // Nothing calls the breaker for weeks after its cooldown: the first call must still be a
    // probe, whatever the hint's arithmetic makes of the time that passed (a hint on a 32-bit
    // circle of ~1 ms units would read 40 days later as 12 days still to go).
    for days in [27, 40, 51, 60, 400] {
        let f = Fixture::new(1);
        f.trip();
        f.at(Duration::from_secs(days * 86_400), Duration::ZERO);
        let probe = f.breaker.try_acquire();
        assert!(
            probe.is_ok(),
            "{days} days after the trip: {:?}",
            probe.err()
        );
        assert_eq!(f.breaker.state(), State::HalfOpen);
    }
}

/// A hint is read only in the open period that left it (its own field, tagged with the open
/// generation): after a reset, an opening too short to leave one (less than the coarse clock's
/// resolution to go) is decided by the precise clock, not by the earlier opening's hint, which
/// is still in the field with 30 s to go.
#[test]
fn a_hint_is_read_only_in_the_open_period_that_left_it() {
    let precise = ManualClock::new();
    let coarse = ManualClock::new();
    coarse.set(COARSE_ORIGIN);
    let clock = Clock::custom_with_coarse(
        Arc::new(precise.clone()),
        Arc::new(coarse.clone()),
        RESOLUTION,
    );
    let policy = |cooldown| BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown,
        cooldown_max: cooldown,
        ..BreakerPolicy::default()
    };
    let factory = CircuitBreaker::builder(policy(COOLDOWN))
        .clock(clock)
        .build_factory()
        .unwrap();
    let b = factory.create();
    b.try_acquire().unwrap().failure(); // open for 30 s: a hint is left
    let left = b.try_acquire().unwrap_err().retry_after().unwrap();
    assert!(left > Duration::from_millis(29_960), "retry after {left:?}");
    b.reset();
    factory
        .set_policy(policy(Duration::from_millis(2)))
        .unwrap();
    b.try_acquire().unwrap().failure(); // open again for 2 ms: too short to leave a hint
    assert_eq!(b.state(), State::Open);
    f_at(&precise, &coarse, Duration::from_millis(1));
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_millis(1)),
        "the precise clock decides the second opening"
    );
    f_at(&precise, &coarse, Duration::from_millis(3));
    assert!(
        b.try_acquire().is_ok(),
        "the first opening's hint decided the second's rejection"
    );
    assert_eq!(b.state(), State::HalfOpen);
}

fn f_at(precise: &ManualClock, coarse: &ManualClock, t: Duration) {
    precise.set(t);
    coarse.set(COARSE_ORIGIN + t);
}
