//! Regression tests for the real-world breaker faults in `shared/cases/CASES.md`, each named
//! after its case id. Time is a `ManualClock` or tokio's paused clock: nothing sleeps.

use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, NeutralProbe, RejectReason, SlidingWindow, State, Transition,
    TransitionReason,
};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::Outcome;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn consecutive(n: u32, cooldown: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(n),
        cooldown,
        cooldown_max: cooldown,
        ..BreakerPolicy::default()
    }
}

fn rate(percent: f64, window: u32, min_calls: u32, cooldown: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(percent),
        window: SlidingWindow::Count(window),
        min_calls,
        cooldown,
        cooldown_max: cooldown,
        ..BreakerPolicy::default()
    }
}

fn manual(policy: BreakerPolicy) -> (CircuitBreaker, ManualClock) {
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(policy)
        .clock(Clock::manual(&time))
        .totals(true)
        .build()
        .expect("valid policy");
    (b, time)
}

fn record(b: &CircuitBreaker, outcome: Outcome) {
    b.try_acquire().expect("admitted").record(outcome);
}

fn trip(b: &CircuitBreaker) {
    while b.state() == State::Closed {
        record(b, Outcome::Failure);
    }
    assert_eq!(b.state(), State::Open);
}

fn events(policy: BreakerPolicy) -> (CircuitBreaker, ManualClock, Arc<Mutex<Vec<Transition>>>) {
    let time = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let b = CircuitBreaker::builder(policy)
        .clock(Clock::manual(&time))
        .totals(true)
        .on_transition(move |t| sink.lock().unwrap().push(t.clone()))
        .build()
        .unwrap();
    (b, time, seen)
}

#[test]
fn br_01_ignored_probes_release_their_slots() {
    let (b, time) = manual(BreakerPolicy {
        half_open_probes: 2,
        successes_to_close: 2,
        ..consecutive(1, secs(10.0))
    });
    trip(&b);
    time.set(secs(10.0));
    for _ in 0..2 {
        let probe = b.try_acquire().expect("probe admitted");
        assert!(probe.is_probe());
        assert_eq!(b.snapshot().probes_in_flight, 1);
        probe.ignored();
        let s = b.snapshot();
        assert_eq!(s.state, State::HalfOpen);
        assert_eq!(
            s.probes_in_flight, 0,
            "the ignored probe gave its slot back"
        );
        assert_eq!(s.probe_successes, 0);
    }
    let p3 = b.try_acquire().expect("call 3 admitted as a probe");
    assert!(p3.is_probe());
    p3.success();
    assert_eq!(b.state(), State::HalfOpen);
    let p4 = b.try_acquire().expect("call 4 admitted as a probe");
    p4.success();
    assert_eq!(b.state(), State::Closed);
}

/// A gated call: acquires a permit, counts the inner invocation, waits for the gate to give
/// its outcome, records it.
async fn gated(
    b: CircuitBreaker,
    invoked: Arc<AtomicUsize>,
    gate: tokio::sync::oneshot::Receiver<Outcome>,
) -> Result<(), RejectReason> {
    let permit = b.try_acquire().map_err(|r| r.reason())?;
    invoked.fetch_add(1, Ordering::SeqCst);
    let outcome = gate.await.expect("gate");
    permit.record(outcome);
    Ok(())
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn br_03_half_open_admission_is_reserved_atomically_and_shared_by_clones() {
    let b = CircuitBreaker::builder(consecutive(1, secs(5.0)))
        .clock(Clock::tokio())
        .totals(true)
        .build()
        .unwrap();
    trip(&b);
    tokio::time::advance(secs(5.0)).await;

    let invoked = Arc::new(AtomicUsize::new(0));
    let mut gates = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (tx, rx) = tokio::sync::oneshot::channel();
        gates.push(tx);
        tasks.push(tokio::spawn(gated(b.clone(), Arc::clone(&invoked), rx)));
    }
    settle().await;
    assert_eq!(
        invoked.load(Ordering::SeqCst),
        1,
        "exactly one inner invocation"
    );
    let mut rejected = 0;
    let mut pending = None;
    for t in tasks {
        if t.is_finished() {
            assert_eq!(t.await.unwrap(), Err(RejectReason::HalfOpenFull));
            rejected += 1;
        } else {
            pending = Some(t);
        }
    }
    assert_eq!(rejected, 7);
    // Drop the admitted probe's future mid-flight.
    let probe = pending.expect("one probe in flight");
    probe.abort();
    assert!(probe.await.unwrap_err().is_cancelled());
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen);
    assert_eq!(s.probes_in_flight, 0, "the dropped probe released its slot");
    assert_eq!(s.probe_successes, 0);
    let totals = s.totals.unwrap();
    assert_eq!((totals.cancelled, totals.succeeded), (1, 0));
    assert_eq!(
        totals.failed, 1,
        "only the failure that tripped the breaker"
    );
    // The next call is admitted as a probe.
    let next = b.try_acquire().expect("admitted");
    assert!(next.is_probe());
    drop(gates);
}

#[test]
fn br_04_one_trial_per_break_while_the_probe_is_pending() {
    let (b, time) = manual(consecutive(1, secs(10.0)));
    trip(&b);
    time.set(secs(10.0));
    let a = b.try_acquire().expect("A admitted");
    for t in [10.5, 11.0, 12.0] {
        time.set(secs(t));
        let r = b.try_acquire().unwrap_err();
        assert_eq!(r.reason(), RejectReason::HalfOpenFull, "rejected at t={t}");
    }
    time.set(secs(13.0));
    a.failure();
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.retry_after, Some(secs(10.0)), "open_until = 23s");
    time.set(secs(14.0));
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(r.retry_after(), Some(secs(9.0)));
    time.set(secs(23.0));
    let p = b.try_acquire().expect("admitted at 23s");
    assert!(p.is_probe());
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull,
        "the only probe"
    );
    p.success();
    assert_eq!(b.state(), State::Closed);
}

/// BR-04's design point: a probe outstanding past `max_probe_wait` stops blocking new probes.
/// One more probe is admitted *in the same half-open period* (no transition), so the hung
/// probe's late result still counts: here its late failure re-opens (issue 26 item 4; before,
/// a takeover started a new period and ignored it, so while every call took longer than the
/// wait no probe ever counted and the breaker never closed).
#[test]
fn br_04_a_hung_probe_stops_blocking_after_max_probe_wait() {
    let (b, time, seen) = events(BreakerPolicy {
        max_probe_wait: Some(secs(3.0)),
        ..consecutive(1, secs(10.0))
    });
    trip(&b);
    time.set(secs(10.0));
    let hung = b.try_acquire().expect("probe A");
    time.set(secs(12.999));
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull
    );
    time.set(secs(13.0));
    let fresh = b.try_acquire().expect("a new probe after max_probe_wait");
    assert!(fresh.is_probe());
    let events_before = seen.lock().unwrap().len();
    assert_eq!(
        seen.lock().unwrap().last().unwrap().reason,
        TransitionReason::CooldownElapsed,
        "no transition: the same half-open period"
    );
    assert_eq!(
        b.snapshot().probes_in_flight,
        2,
        "the hung probe keeps its slot"
    );
    // Only one more: the fresh probe is younger than the wait.
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull
    );
    // The hung probe's late failure re-opens with a fresh cooldown.
    time.set(secs(14.0));
    hung.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.snapshot().retry_after,
        Some(secs(10.0)),
        "open_until = 24s"
    );
    let t = seen.lock().unwrap()[events_before].clone();
    assert_eq!(
        (t.from, t.reason),
        (State::HalfOpen, TransitionReason::ProbeFailed)
    );
    fresh.success();
    assert_eq!(b.state(), State::Open, "the fresh probe's period has ended");
    assert_eq!(b.snapshot().totals.unwrap().late, 1);
}

/// The other half of issue 26 item 4: while every call takes longer than the probe wait, the
/// slow probes' successes still close the breaker (a takeover keeps the half-open period).
#[test]
fn br_04_slow_probes_close_the_breaker_when_every_call_outlasts_the_wait() {
    let (b, time, _) = events(BreakerPolicy {
        max_probe_wait: Some(secs(1.0)),
        successes_to_close: 2,
        ..consecutive(1, secs(10.0))
    });
    trip(&b);
    time.set(secs(10.0));
    let a = b.try_acquire().expect("probe A");
    time.set(secs(11.0));
    let c = b.try_acquire().expect("probe B, A held past the wait");
    time.set(secs(12.5));
    a.success();
    assert_eq!(b.snapshot().probe_successes, 1, "A's late success counts");
    assert_eq!(b.state(), State::HalfOpen);
    c.success();
    assert_eq!(b.state(), State::Closed, "both slow successes closed it");
}

#[test]
fn br_05_a_failed_probe_always_reopens_with_a_fresh_cooldown() {
    let (b, time) = manual(rate(50.0, 10, 10, secs(5.0)));
    for _ in 0..5 {
        record(&b, Outcome::Success);
    }
    for i in 0..5 {
        assert_eq!(b.state(), State::Closed, "closed before failure {i}");
        record(&b, Outcome::Failure);
    }
    assert_eq!(b.state(), State::Open, "trips at the 10th call");
    time.set(secs(5.0));
    b.try_acquire().expect("probe").failure();
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.retry_after, Some(secs(5.0)), "open_until = 10s");
    time.set(secs(6.0));
    assert_eq!(b.try_acquire().unwrap_err().reason(), RejectReason::Open);
    time.set(secs(10.0));
    assert!(b.try_acquire().expect("probe at 10s").is_probe());
}

#[test]
fn br_07_a_failing_trial_call_reopens_instead_of_closing() {
    let (b, time) = manual(consecutive(3, secs(10.0)));
    for _ in 0..3 {
        record(&b, Outcome::Failure);
    }
    assert_eq!(b.state(), State::Open);
    time.set(secs(10.0));
    b.try_acquire().expect("probe").failure();
    assert_eq!(b.state(), State::Open);
    time.set(secs(10.1));
    let invoked = AtomicUsize::new(0);
    let r = b.try_acquire().map(|p| {
        invoked.fetch_add(1, Ordering::SeqCst);
        p.success()
    });
    assert_eq!(r.unwrap_err().reason(), RejectReason::Open);
    assert_eq!(invoked.load(Ordering::SeqCst), 0);
}

#[test]
fn br_08_an_ignored_probe_neither_reopens_nor_rearms_the_cooldown() {
    let (b, time) = manual(consecutive(1, secs(10.0)));
    trip(&b);
    time.set(secs(10.0));
    // classification maps 404 -> ignored
    b.try_acquire().expect("probe").ignored();
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen);
    assert_eq!(s.retry_after, None, "no cooldown re-armed");
    assert_eq!(s.probes_in_flight, 0);
    time.set(secs(10.001));
    let p = b.try_acquire().expect("admitted as a probe");
    assert!(p.is_probe());
    p.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn br_08_neutral_probe_can_be_configured_to_count_as_success() {
    let (b, time) = manual(BreakerPolicy {
        neutral_probe: NeutralProbe::CountAsSuccess,
        ..consecutive(1, secs(10.0))
    });
    trip(&b);
    time.set(secs(10.0));
    b.try_acquire().expect("probe").ignored();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn br_10_late_failures_while_open_fire_no_second_event() {
    let (b, _time, seen) = events(consecutive(3, secs(10.0)));
    let permits: Vec<_> = (0..5).map(|_| b.try_acquire().expect("closed")).collect();
    for p in permits {
        p.failure();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "exactly one transition event: {seen:?}");
    assert_eq!((seen[0].from, seen[0].to), (State::Closed, State::Open));
    assert_eq!(seen[0].reason, TransitionReason::ConsecutiveFailures);
    assert_eq!(seen[0].consecutive_failures, 3);
    let totals = b.snapshot().totals.unwrap();
    assert_eq!(totals.opened, 1);
    assert_eq!(totals.late, 2, "the 4th and 5th results");
    assert_eq!(totals.failed, 5);
}

#[test]
fn br_12_a_stale_probe_neither_counts_nor_frees_a_slot() {
    let (b, time) = manual(BreakerPolicy {
        half_open_probes: 2,
        successes_to_close: 2,
        ..consecutive(1, secs(10.0))
    });
    trip(&b);
    time.set(secs(10.0));
    let p1 = b.try_acquire().expect("P1");
    let p2 = b.try_acquire().expect("P2");
    p2.failure();
    assert_eq!(
        b.snapshot().retry_after,
        Some(secs(10.0)),
        "open_until = 20s"
    );
    time.set(secs(20.0));
    let p3 = b.try_acquire().expect("P3");
    let p4 = b.try_acquire().expect("P4");
    time.set(secs(21.0));
    p1.success();
    let s = b.snapshot();
    assert_eq!(s.probe_successes, 0, "P1's success is ignored");
    assert_eq!(s.probes_in_flight, 2, "P3 and P4");
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull,
        "P5 is rejected"
    );
    p3.success();
    assert_eq!(b.state(), State::HalfOpen, "closing needs P4 too");
    p4.success();
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn br_13_caller_cancellation_is_not_a_failure() {
    let b = CircuitBreaker::builder(rate(50.0, 10, 10, secs(5.0)))
        .clock(Clock::tokio())
        .totals(true)
        .build()
        .unwrap();
    let invoked = Arc::new(AtomicUsize::new(0));
    let mut gates = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (tx, rx) = tokio::sync::oneshot::channel();
        gates.push(tx);
        tasks.push(tokio::spawn(gated(b.clone(), Arc::clone(&invoked), rx)));
    }
    settle().await;
    assert_eq!(invoked.load(Ordering::SeqCst), 10);
    for (i, (task, gate)) in tasks.into_iter().zip(gates).enumerate() {
        if i < 6 {
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
        } else {
            gate.send(Outcome::Success).unwrap();
            task.await.unwrap().unwrap();
        }
    }
    let s = b.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        (s.window.calls, s.window.failures),
        (4, 0),
        "cancellations are not in the window"
    );
    assert_eq!(s.totals.unwrap().cancelled, 6);

    // Separately: a dropped probe releases its slot with no verdict.
    trip(&b);
    assert_eq!(
        b.snapshot().totals.unwrap().failed,
        6,
        "4 successes + 6 failures = 60%"
    );
    tokio::time::advance(secs(5.0)).await;
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let probe = tokio::spawn(gated(b.clone(), Arc::clone(&invoked), rx));
    settle().await;
    assert_eq!(b.snapshot().probes_in_flight, 1);
    probe.abort();
    let _ = probe.await;
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.probes_in_flight, s.probe_successes),
        (State::HalfOpen, 0, 0)
    );
}

#[test]
fn br_14_the_call_that_fills_the_window_trips_even_when_it_succeeds() {
    let (b, _time) = manual(rate(50.0, 10, 10, secs(5.0)));
    for _ in 0..9 {
        record(&b, Outcome::Failure);
        assert_eq!(b.state(), State::Closed, "below min_calls");
    }
    record(&b, Outcome::Success);
    assert_eq!(b.state(), State::Open, "90% >= 50% after the 10th call");
    assert_eq!(b.try_acquire().unwrap_err().reason(), RejectReason::Open);
}

#[test]
fn br_15_a_success_resets_the_consecutive_count() {
    let (b, _t) = manual(consecutive(2, secs(5.0)));
    for o in [Outcome::Failure, Outcome::Success, Outcome::Failure] {
        record(&b, o);
    }
    let s = b.snapshot();
    assert_eq!((s.state, s.consecutive_failures), (State::Closed, 1));

    let (b, _t) = manual(consecutive(2, secs(5.0)));
    record(&b, Outcome::Failure);
    record(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn br_17_no_trip_before_min_calls_and_ge_at_the_boundary() {
    let (b, _t) = manual(rate(50.0, 20, 10, secs(5.0)));
    record(&b, Outcome::Failure);
    assert_eq!(
        b.state(),
        State::Closed,
        "100% of 1 call is below min_calls"
    );
    for _ in 0..8 {
        record(&b, Outcome::Success);
    }
    record(&b, Outcome::Failure);
    assert_eq!(b.snapshot().window.calls, 10);
    assert_eq!(b.state(), State::Closed, "20% at 10 calls");
    for call in 11..=16 {
        assert_eq!(b.state(), State::Closed, "closed before call {call}");
        record(&b, Outcome::Failure);
    }
    // 8 of 16 = exactly 50%: `>=` trips at the boundary.
    assert_eq!(b.state(), State::Open, "trips at the 16th call");
}

#[test]
fn br_21_rejections_are_never_failures() {
    let (b, time) = manual(consecutive(3, secs(10.0)));
    for _ in 0..3 {
        record(&b, Outcome::Failure);
    }
    for i in 0..100 {
        time.set(Duration::from_millis(1 + i * 99));
        assert!(b.try_acquire().is_err());
    }
    time.set(secs(10.0));
    b.try_acquire().expect("probe").success();
    let s = b.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        (s.consecutive_failures, s.window.calls),
        (0, 0),
        "a fresh closed window"
    );
    let t = s.totals.unwrap();
    assert_eq!((t.failed, t.rejected, t.succeeded), (3, 100, 1));
}

/// A clock with separate monotonic and wall readings; the breaker must only ever see the
/// monotonic one.
struct TwoClocks {
    monotonic: ManualClock,
    wall_offset_secs: std::sync::atomic::AtomicI64,
}

impl breaker_core::clock::MonotonicSource for TwoClocks {
    fn now_nanos(&self) -> u64 {
        self.monotonic.now().as_nanos() as u64
    }
}

#[test]
fn br_23_the_open_period_follows_the_monotonic_clock_only() {
    let clocks = Arc::new(TwoClocks {
        monotonic: ManualClock::new(),
        wall_offset_secs: 0.into(),
    });
    let b = CircuitBreaker::builder(consecutive(1, secs(30.0)))
        .clock(Clock::custom(clocks.clone()))
        .totals(true)
        .build()
        .unwrap();
    trip(&b);
    clocks.monotonic.set(secs(1.0));
    clocks.wall_offset_secs.store(86_400, Ordering::SeqCst); // wall +1 day
    assert!(b.try_acquire().is_err());
    clocks.monotonic.set(secs(2.0));
    clocks
        .wall_offset_secs
        .store(86_400 - 7_200, Ordering::SeqCst); // wall -2h
    assert!(b.try_acquire().is_err());
    clocks.monotonic.set(secs(29.999));
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_millis(1))
    );
    // A reading that goes backwards: no panic, elapsed saturates.
    clocks.monotonic.set(secs(5.0));
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(secs(25.0)));
    clocks.monotonic.set(secs(30.0));
    assert!(b.try_acquire().expect("probe at 30s").is_probe());
    clocks.monotonic.set(secs(29.0));
    let s = b.snapshot();
    assert_eq!(s.time_in_state, Duration::ZERO, "saturates at zero");
}

#[test]
fn br_25_every_counter_clears_on_reset_and_on_closing() {
    let (b, time) = manual(consecutive(3, secs(10.0)));
    for _ in 0..3 {
        record(&b, Outcome::Failure);
    }
    b.reset();
    record(&b, Outcome::Failure);
    let s = b.snapshot();
    assert_eq!((s.state, s.consecutive_failures), (State::Closed, 1));
    record(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Closed);
    record(&b, Outcome::Failure);
    assert_eq!(b.state(), State::Open, "3 new consecutive failures");

    // The path through half-open.
    time.set(secs(10.0));
    b.try_acquire().unwrap().success();
    record(&b, Outcome::Failure);
    let s = b.snapshot();
    assert_eq!((s.state, s.consecutive_failures), (State::Closed, 1));

    // A rate window is cleared too.
    let (b, time) = manual(rate(50.0, 4, 4, secs(10.0)));
    for _ in 0..4 {
        record(&b, Outcome::Failure);
    }
    time.set(secs(10.0));
    b.try_acquire().unwrap().success();
    record(&b, Outcome::Failure);
    assert_eq!(b.snapshot().window.calls, 1);
}
