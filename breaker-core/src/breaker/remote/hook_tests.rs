//! The fleet hook: counts, probe decisions and lease ends, local trips, room.

use super::*;
use crate::breaker::{BreakerPolicy, RejectReason};
use crate::clock::{Clock, ManualClock};
use std::sync::Mutex;

/// A hook that records every call and answers probes from a script.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    answer: Mutex<Option<FleetProbe>>,
}

impl Recorder {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl FleetHook for Recorder {
    fn activated(&self) {
        self.calls.lock().unwrap().push("activated".into());
    }
    fn failures_reached(&self, n: u64) {
        self.calls.lock().unwrap().push(format!("failures {n}"));
    }
    fn admit_probe(&self, generation: u32) -> FleetProbe {
        self.calls
            .lock()
            .unwrap()
            .push(format!("probe {generation}"));
        self.answer.lock().unwrap().unwrap_or(FleetProbe::Local)
    }
    fn end_probe(&self, token: u32, end: FleetProbeEnd) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("end {token} {end:?}"));
    }
    fn local_trip(&self, generation: u32, reason: TransitionReason) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("trip {generation} {reason:?}"));
    }
}

fn hooked(early: u64) -> (CircuitBreaker, ManualClock, Arc<Recorder>) {
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown: Duration::from_secs(10),
        cooldown_max: Duration::from_secs(10),
        half_open_probes: 1,
        ..BreakerPolicy::default()
    })
    .name("hooked")
    .clock(Clock::manual(&time))
    .build()
    .unwrap();
    let hook = Arc::new(Recorder::default());
    b.install_fleet_hook(Arc::clone(&hook) as Arc<dyn FleetHook>, early)
        .unwrap();
    (b, time, hook)
}

#[test]
fn closed_outcomes_are_counted_and_the_hook_is_called_once_per_take() {
    let (b, _time, hook) = hooked(2);
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().ignored();
    drop(b.try_acquire().unwrap());
    b.try_acquire().unwrap().failure();
    assert_eq!(
        hook.take(),
        ["activated"],
        "once, at the first counted outcome"
    );
    b.try_acquire().unwrap().failure();
    assert_eq!(hook.take(), ["failures 2"], "the early bound");
    let taken = b.take_fleet_counts();
    assert_eq!(
        taken,
        FleetTaken {
            successes: 2,
            failures: 2,
            slow: 0
        }
    );
    assert_eq!(b.take_fleet_counts(), FleetTaken::default());
    b.try_acquire().unwrap().success();
    assert_eq!(hook.take(), ["activated"], "again after a take");
    assert_eq!(
        b.install_fleet_hook(Arc::clone(&hook) as Arc<dyn FleetHook>, 0),
        Err(HookError::Installed)
    );
}

#[test]
fn a_local_trip_is_reported_once_with_its_reason_and_a_remote_one_is_not() {
    let (b, _time, hook) = hooked(0);
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(
        hook.take(),
        ["activated", "trip 1 ConsecutiveFailures"],
        "the trip, decided here"
    );
    b.apply_remote(RemoteTransition {
        to: State::Closed,
        reason: TransitionReason::Manual,
        open_until: None,
        streak: None,
        origin: Arc::from("r9"),
    });
    b.apply_remote(RemoteTransition {
        to: State::Open,
        reason: TransitionReason::FailureRate,
        open_until: None,
        streak: None,
        origin: Arc::from("r9"),
    });
    assert!(
        hook.take().is_empty(),
        "decided elsewhere: not reported back"
    );
}

#[test]
fn a_probe_runs_only_as_the_hook_decides_and_returns_its_lease_once() {
    let (b, time, hook) = hooked(0);
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    hook.take();
    time.advance(Duration::from_secs(10));
    // Denied: rejected as half-open-full, the local slot released (the next call asks
    // again instead of finding the slot taken).
    *hook.answer.lock().unwrap() = Some(FleetProbe::Reject(RejectReason::HalfOpenFull));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::HalfOpenFull);
    assert_eq!(b.snapshot().probes_in_flight, 0);
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull
    );
    assert_eq!(hook.take(), ["probe 2", "probe 2"]);
    // Leased: the token rides in the permit and comes back once, with the outcome.
    *hook.answer.lock().unwrap() = Some(FleetProbe::Leased(7));
    let p = b.try_acquire().unwrap();
    assert_eq!((p.is_probe(), p.fleet_token()), (true, Some(7)));
    drop(p); // cancelled
    *hook.answer.lock().unwrap() = Some(FleetProbe::Leased(8));
    let p = b.try_acquire().unwrap();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = p;
        panic!("the probe panicked");
    }));
    assert_eq!(
        hook.take(),
        ["probe 2", "end 7 Neutral", "probe 2", "end 8 Failure"]
    );
    assert_eq!(b.state(), State::Open, "the panic failed the probe");
    time.advance(Duration::from_secs(10));
    *hook.answer.lock().unwrap() = Some(FleetProbe::Leased(9));
    b.try_acquire().unwrap().success();
    assert_eq!(hook.take(), ["probe 4", "end 9 Success"]);
    assert_eq!(b.state(), State::Closed);
    // A local probe (store degraded) carries no token and returns nothing.
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    time.advance(Duration::from_secs(10));
    *hook.answer.lock().unwrap() = Some(FleetProbe::Local);
    hook.take();
    let p = b.try_acquire().unwrap();
    assert_eq!(p.fleet_token(), None);
    p.success();
    assert_eq!(hook.take(), ["probe 7"]);
}

#[test]
fn a_breaker_that_keeps_nothing_else_takes_a_hook_and_handle_counts_exclude_it() {
    let factory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(3),
        ..BreakerPolicy::default()
    })
    .name("tight")
    .totals(false)
    .build_factory()
    .unwrap();
    // A breaker that keeps nothing beyond its state (no window, totals or key) gets the
    // block that holds a hook when one is installed, and only then.
    let tight = factory.create();
    assert!(tight.inner.heavy().is_none());
    assert_eq!(tight.fleet_hook_room(), Ok(()));
    let hook = Arc::new(Recorder::default());
    tight
        .install_fleet_hook(Arc::clone(&hook) as Arc<dyn FleetHook>, 0)
        .unwrap();
    assert!(tight.has_fleet_hook() && tight.inner.heavy().is_some());
    assert_eq!(tight.fleet_hook_room(), Err(HookError::Installed));
    assert_eq!(
        tight.install_fleet_hook(Arc::clone(&hook) as Arc<dyn FleetHook>, 0),
        Err(HookError::Installed)
    );
    // Its outcomes now reach the hook (the success's steady path no longer skips it).
    tight.try_acquire().unwrap().success();
    tight.try_acquire().unwrap().failure();
    assert_eq!(hook.take(), ["activated"]);
    assert_eq!(
        tight.take_fleet_counts(),
        FleetTaken {
            successes: 1,
            failures: 1,
            slow: 0
        }
    );
    // The hook is taken to hold one handle (a fleet backend's does); this one holds none.
    let (b, _time, _hook) = hooked(0);
    assert_eq!((b.handle_count(), b.all_handles()), (0, 1));
    let held = b.clone();
    assert_eq!((b.handle_count(), b.all_handles()), (1, 2));
    drop(held);
}
