//! Remote transitions applied to a local breaker.

use super::*;
use crate::breaker::{BreakerPolicy, RejectReason, Transition};
use crate::clock::{Clock, ManualClock};
use std::sync::Mutex;
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn rig() -> (CircuitBreaker, ManualClock, Arc<Mutex<Vec<Transition>>>) {
    let time = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let b = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown: secs(10),
        cooldown_max: secs(10),
        ..BreakerPolicy::default()
    })
    .clock(Clock::manual(&time))
    .totals(true)
    .on_transition(move |t| sink.lock().unwrap().push(t.clone()))
    .build()
    .unwrap();
    (b, time, seen)
}

#[test]
fn a_remote_trip_opens_until_the_given_deadline_through_the_local_path() {
    let (b, time, seen) = rig();
    time.set(secs(100));
    let in_flight = b.try_acquire().unwrap();
    let generation = b.apply_remote(RemoteTransition {
        to: State::Open,
        reason: TransitionReason::FailureRate,
        open_until: Some(secs(130).as_nanos() as u64),
        streak: None,
        origin: Arc::from("replica-b"),
    });
    assert_eq!(generation, 1);
    let event = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (event.from, event.to, event.reason, event.generation),
        (State::Closed, State::Open, TransitionReason::FailureRate, 1)
    );
    assert_eq!(event.origin.as_deref(), Some("replica-b"));
    assert_eq!(
        event.cooldown,
        Some(secs(30)),
        "the remote deadline, not the policy's"
    );
    let s = b.snapshot();
    assert_eq!(
        (s.retry_after, s.totals.unwrap().opened),
        (Some(secs(30)), 1)
    );
    // A call admitted before the remote trip is late locally.
    in_flight.failure();
    assert_eq!(b.snapshot().totals.unwrap().late, 1);
    time.set(secs(129));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(
        (r.reason(), r.retry_after()),
        (RejectReason::Open, Some(secs(1)))
    );
    // After the deadline: the local lazy promotion, decided here.
    time.set(secs(130));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    let event = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (event.to, event.reason, event.origin),
        (State::HalfOpen, TransitionReason::CooldownElapsed, None)
    );
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_remote_close_and_a_remote_force_apply_whatever_the_local_state() {
    let (b, time, seen) = rig();
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Open);
    time.set(secs(1));
    b.apply_remote(RemoteTransition {
        to: State::Closed,
        reason: TransitionReason::ProbesSucceeded,
        open_until: None,
        streak: None,
        origin: Arc::from("replica-c"),
    });
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 0);
    b.apply_remote(RemoteTransition {
        to: State::ForcedOpen,
        reason: TransitionReason::Manual,
        open_until: Some(u64::MAX), // ignored: not an open state
        streak: None,
        origin: Arc::from("operator"),
    });
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::ForcedOpen
    );
    let events = seen.lock().unwrap();
    let origins: Vec<_> = events.iter().map(|e| e.origin.as_deref()).collect();
    assert_eq!(origins, [None, Some("replica-c"), Some("operator")]);
    assert_eq!(events[2].cooldown, None);
}

#[test]
fn a_remote_open_without_a_deadline_uses_the_local_cooldown_for_its_streak() {
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(BreakerPolicy {
        cooldown: secs(10),
        cooldown_multiplier: 2.0,
        cooldown_max: secs(100),
        ..BreakerPolicy::default()
    })
    .clock(Clock::manual(&time))
    .build()
    .unwrap();
    time.set(secs(5));
    b.apply_remote(RemoteTransition {
        to: State::Open,
        reason: TransitionReason::ConsecutiveFailures,
        open_until: None,
        streak: None,
        origin: Arc::from("replica-d"),
    });
    assert_eq!(b.snapshot().retry_after, Some(secs(10)), "streak 1 locally");
    b.apply_remote(RemoteTransition {
        to: State::Open,
        reason: TransitionReason::ProbeFailed,
        open_until: None,
        streak: Some(3),
        origin: Arc::from("replica-d"),
    });
    assert_eq!(
        b.snapshot().retry_after,
        Some(secs(40)),
        "the fleet's streak 3: 10 s * 2^2"
    );
    time.set(secs(45));
    assert!(b.try_acquire().unwrap().is_probe());
}
