use super::*;
use crate::clock::ManualClock;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn with_clock(policy: BreakerPolicy) -> (CircuitBreaker, ManualClock) {
    let t = ManualClock::new();
    let b = CircuitBreaker::builder(policy)
        .clock(Clock::manual(&t))
        .totals(true)
        .build()
        .unwrap();
    (b, t)
}

fn consecutive(n: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(n),
        cooldown: secs(10.0),
        cooldown_max: secs(10.0),
        ..BreakerPolicy::default()
    }
}

#[test]
fn a_panic_while_holding_a_permit_is_a_failure() {
    let (b, _t) = with_clock(consecutive(1));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = b.try_acquire().unwrap();
        panic!("inner code panicked");
    }));
    assert!(r.is_err());
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().totals.unwrap().failed, 1);
}

#[test]
fn a_panicking_probe_reopens_and_releases_its_slot() {
    let (b, t) = with_clock(consecutive(1));
    b.try_acquire().unwrap().failure();
    t.set(secs(10.0));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _probe = b.try_acquire().unwrap();
        panic!("probe panicked");
    }));
    let s = b.snapshot();
    assert_eq!((s.state, s.probes_in_flight), (State::Open, 0));
}

#[test]
fn forced_states_and_reset() {
    let (b, _t) = with_clock(consecutive(1));
    b.force_open();
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::ForcedOpen);
    assert_eq!(r.retry_after(), None);
    assert_eq!(r.state(), State::ForcedOpen);
    b.force_closed();
    for _ in 0..10 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(
        b.state(),
        State::ForcedClosed,
        "disabled: nothing is recorded"
    );
    b.reset();
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn permits_from_before_a_manual_change_are_late() {
    let (b, _t) = with_clock(consecutive(1));
    let p = b.try_acquire().unwrap();
    b.reset();
    p.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().totals.unwrap().late, 1);
}

#[test]
fn slow_calls_trip_the_slow_call_rate_rule() {
    let (b, t) = with_clock(BreakerPolicy {
        consecutive_failures: None,
        slow_call: Some(SlowCall {
            duration: secs(1.0),
            rate_percent: 50.0,
        }),
        window: SlidingWindow::Count(4),
        min_calls: 4,
        ..consecutive(1)
    });
    for _ in 0..2 {
        b.try_acquire().unwrap().success();
    }
    let p = b.try_acquire().unwrap();
    t.advance(secs(0.999));
    p.success(); // not slow: 0.999s < 1s
    assert_eq!(b.snapshot().window.slow, 0);
    let p = b.try_acquire().unwrap();
    t.advance(secs(1.0));
    p.success(); // slow, 1 of 4 = 25%
    assert_eq!(b.state(), State::Closed);
    let p = b.try_acquire().unwrap();
    t.advance(secs(2.0));
    p.success(); // slow: 2 of 4 = 50% >= 50%
    assert_eq!(b.state(), State::Open);
}

#[test]
fn time_window_forgets_old_failures() {
    let (b, t) = with_clock(BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Time {
            length: secs(10.0),
            buckets: 10,
        },
        min_calls: 4,
        ..consecutive(1)
    });
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    t.set(secs(10.5)); // the three failures (bucket 0) aged out
    b.try_acquire().unwrap().failure();
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.window.calls, s.window.failures),
        (State::Closed, 1, 1)
    );
    for _ in 0..3 {
        b.try_acquire().unwrap().success();
    }
    // 1 of 4 = 25%
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    // 3 of 6 = 50%
    assert_eq!(b.state(), State::Open);
}

#[test]
fn cooldown_grows_on_repeated_trips_and_resets_on_close() {
    let (b, t) = with_clock(BreakerPolicy {
        cooldown_multiplier: 2.0,
        cooldown_max: secs(30.0),
        ..consecutive(1)
    });
    b.try_acquire().unwrap().failure();
    assert_eq!(b.snapshot().retry_after, Some(secs(10.0)));
    t.set(secs(10.0));
    b.try_acquire().unwrap().failure(); // probe fails: streak 2
    assert_eq!(b.snapshot().retry_after, Some(secs(20.0)));
    t.set(secs(30.0));
    b.try_acquire().unwrap().failure(); // streak 3: 40s capped at 30s
    assert_eq!(b.snapshot().retry_after, Some(secs(30.0)));
    t.set(secs(60.0));
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().failure();
    assert_eq!(
        b.snapshot().retry_after,
        Some(secs(10.0)),
        "streak reset on close"
    );
}

#[test]
fn cooldown_jitter_stays_within_its_band() {
    let t = ManualClock::new();
    let factory = CircuitBreaker::builder(BreakerPolicy {
        cooldown_jitter: 0.5,
        ..consecutive(1)
    })
    .clock(Clock::manual(&t))
    .build_factory()
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..200u64 {
        t.set(Duration::from_millis(i * 7));
        let b = factory.create();
        b.try_acquire().unwrap().failure();
        let d = b.snapshot().retry_after.unwrap();
        assert!(d >= secs(5.0) && d <= secs(10.0), "{d:?}");
        seen.insert(d.as_millis() / 500);
    }
    assert!(seen.len() >= 8, "jitter spreads cooldowns: {seen:?}");
}

#[test]
fn set_policy_changes_thresholds_and_keeps_state() {
    let t = ManualClock::new();
    let factory = CircuitBreaker::builder(consecutive(3))
        .clock(Clock::manual(&t))
        .build_factory()
        .unwrap();
    let b = factory.create();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.snapshot().consecutive_failures, 1);
    factory.set_policy(consecutive(2)).unwrap();
    assert_eq!(b.snapshot().consecutive_failures, 1, "count kept");
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open, "new threshold applies");
    let bad = factory.set_policy(consecutive(0)).unwrap_err();
    assert_eq!(bad.errors[0].field, "consecutive_failures");
    assert_eq!(
        factory.policy().consecutive_failures,
        Some(2),
        "old policy kept"
    );
}

#[test]
fn consecutive_breaker_is_72_bytes() {
    let b = CircuitBreaker::builder(consecutive(5))
        .totals(false)
        .build()
        .unwrap();
    // One cache line of heap (the reference count and the state block) and the handle.
    assert_eq!(b.memory_bytes(), 72);
    assert_eq!(std::mem::size_of::<CircuitBreaker>(), 8);
}

#[test]
fn rejection_messages_name_the_breaker() {
    let t = ManualClock::new();
    let b = CircuitBreaker::builder(consecutive(1))
        .clock(Clock::manual(&t))
        .name("inventory")
        .build()
        .unwrap();
    b.try_acquire().unwrap().failure();
    t.set(secs(4.0));
    assert_eq!(
        b.try_acquire().unwrap_err().to_string(),
        "circuit breaker `inventory` is open; a probe may be admitted in 6s"
    );
    // The message rounds the rest up to the millisecond; `retry_after` keeps it whole.
    t.set(Duration::from_nanos(4_032_746_496));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_micros(5_967_254)));
    assert_eq!(
        r.to_string(),
        "circuit breaker `inventory` is open; a probe may be admitted in 5.968s"
    );
    t.set(Duration::from_micros(9_999_500));
    assert_eq!(
        b.try_acquire().unwrap_err().to_string(),
        "circuit breaker `inventory` is open; a probe may be admitted in 1ms"
    );
    t.set(secs(10.0));
    let _probe = b.try_acquire().unwrap();
    assert_eq!(
        b.try_acquire().unwrap_err().to_string(),
        "circuit breaker `inventory` is half-open and every probe slot is taken"
    );
}

#[test]
fn owned_permits_work_like_borrowed_ones() {
    let (b, _t) = with_clock(consecutive(1));
    let p = b.try_acquire_owned().unwrap();
    drop(b.clone());
    p.failure();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn invalid_policy_is_rejected_at_build() {
    let err = CircuitBreaker::new(BreakerPolicy {
        failure_rate_percent: Some(101.0),
        ..BreakerPolicy::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid policy: `failure_rate`: must be a percentage in (0, 100], got 101"
    );
}

/// `State::ALL` and `TransitionReason::ALL` hold every variant once, in declaration order (a
/// new variant breaks the exhaustive matches here until it is added to the list).
#[test]
fn all_lists_hold_every_variant_in_order() {
    let state_index = |s: State| match s {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::ForcedClosed => 4,
    };
    let got: Vec<usize> = State::ALL.into_iter().map(state_index).collect();
    assert_eq!(got, [0, 1, 2, 3, 4]);
    let reason_index = |r: TransitionReason| match r {
        TransitionReason::ConsecutiveFailures => 0,
        TransitionReason::FailureRate => 1,
        TransitionReason::SlowCallRate => 2,
        TransitionReason::CooldownElapsed => 3,
        TransitionReason::ProbeFailed => 4,
        TransitionReason::ProbesSucceeded => 5,
        TransitionReason::ProbeExpired => 6,
        TransitionReason::Manual => 7,
    };
    let got: Vec<usize> = TransitionReason::ALL
        .into_iter()
        .map(reason_index)
        .collect();
    assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn breakers_from_new_share_their_configuration_not_their_state() {
    let a = CircuitBreaker::new(consecutive(1)).unwrap();
    let b = CircuitBreaker::new(consecutive(1)).unwrap();
    assert!(
        Arc::ptr_eq(&a.policy(), &b.policy()),
        "one configuration block for equal policies"
    );
    a.try_acquire().unwrap().failure();
    assert_eq!(a.state(), State::Open);
    assert_eq!(b.state(), State::Closed, "state is per breaker");
    assert_eq!(b.snapshot().totals, None, "totals are opt-in");
    let c = CircuitBreaker::new(consecutive(2)).unwrap();
    assert_eq!(c.policy().consecutive_failures, Some(2));
    c.try_acquire().unwrap().failure();
    assert_eq!(c.state(), State::Closed);
    let d = CircuitBreaker::builder(consecutive(1))
        .totals(true)
        .build()
        .unwrap();
    assert_eq!(
        d.snapshot().totals,
        Some(Totals::default()),
        "the totals setting is part of the match"
    );
    let e = CircuitBreaker::new(consecutive(1)).unwrap();
    assert_eq!(e.policy().consecutive_failures, Some(1));
    assert_eq!(e.snapshot().totals, None);
}

/// A success of an earlier closed period changes nothing in the next one: it neither resets
/// the new period's consecutive failures nor keeps them from tripping (a breaker that keeps
/// nothing optional decides such a success without reading the word).
#[test]
fn a_late_success_does_not_reset_the_next_periods_failures() {
    let b = CircuitBreaker::builder(consecutive(3)).build().unwrap();
    let late = b.try_acquire().unwrap();
    let late_too = b.try_acquire().unwrap();
    late_too.failure(); // the earlier period's own count: 1
    b.reset();
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    late.success();
    assert_eq!(b.snapshot().consecutive_failures, 2);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
}
