//! loom model tests of the breaker's atomic state machine.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p breaker-core --test loom --release`.
//! Without `--cfg loom` this file compiles to nothing. The default CI run uses a small
//! preemption bound (`LOOM_MAX_PREEMPTIONS=2`); raise it for the exhaustive run (README).
#![cfg(loom)]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::Outcome;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

fn half_open(probes: u32, close: u32) -> CircuitBreaker {
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(1),
        half_open_probes: probes,
        successes_to_close: close,
        cooldown: Duration::from_secs(1),
        cooldown_max: Duration::from_secs(1),
        ..BreakerPolicy::default()
    })
    .clock(Clock::manual(&time))
    .totals(false)
    .build()
    .unwrap();
    b.try_acquire().unwrap().failure();
    time.advance(Duration::from_secs(1));
    b
}

/// Three threads race for one probe slot; at most one is ever in flight, and after every
/// permit is released the slot is free again.
#[test]
fn never_more_than_k_probes_in_flight() {
    loom::model(|| {
        let b = half_open(1, 2);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let b = b.clone();
                let in_flight = in_flight.clone();
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire() {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 1, "{now} probes in flight");
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        if i == 0 {
                            p.success();
                        } else {
                            drop(p); // cancellation
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = b.snapshot();
        assert_eq!(s.probes_in_flight, 0, "every permit released exactly once");
        assert!(s.state == State::HalfOpen || s.state == State::Closed);
    });
}

/// A probe held past the probe wait lets exactly one more in, in the same half-open period:
/// two takeovers racing admit one (the winner's admission is stamped before its swap, so the
/// loser sees a probe younger than the wait), and the held probe's late success still counts.
#[test]
fn a_takeover_admits_one_more_probe_and_the_held_one_still_counts() {
    loom::model(|| {
        let (b, time) = with_clock(1, 2);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let held = b.try_acquire_owned().unwrap();
        let generation = b.snapshot().generation;
        time.advance(PROBE_WAIT);
        let admitted = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (b, admitted) = (b.clone(), admitted.clone());
                thread::spawn(move || match b.try_acquire_owned() {
                    Ok(p) => {
                        admitted.fetch_add(1, Ordering::SeqCst);
                        Some(p)
                    }
                    Err(_) => None,
                })
            })
            .collect();
        let taken: Vec<_> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(admitted.load(Ordering::SeqCst), 1, "one takeover");
        let s = b.snapshot();
        assert_eq!((s.generation, s.probes_in_flight), (generation, 2));
        held.record(Outcome::Success);
        assert_eq!(
            b.snapshot().probe_successes,
            1,
            "the held probe's success counts"
        );
        for p in taken {
            p.record(Outcome::Success);
        }
        assert_eq!(b.state(), State::Closed);
    });
}

/// Concurrent failures while closed trip the breaker exactly once.
#[test]
fn concurrent_failures_trip_once() {
    loom::model(|| {
        let opened = Arc::new(AtomicUsize::new(0));
        let seen = opened.clone();
        let b = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(2),
            ..BreakerPolicy::default()
        })
        .clock(Clock::manual(&ManualClock::new()))
        .totals(false)
        .on_transition(move |t| {
            if t.to == State::Open {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
        let p1 = b.try_acquire_owned().unwrap();
        let p2 = b.try_acquire().unwrap();
        let p3 = b.try_acquire().unwrap();
        let t = thread::spawn(move || p1.record(Outcome::Failure));
        p2.record(Outcome::Failure);
        p3.record(Outcome::Failure);
        t.join().unwrap();
        assert_eq!(b.state(), State::Open);
        assert_eq!(opened.load(Ordering::SeqCst), 1);
    });
}

/// A count window full of successes (where a success takes no position and writes nothing)
/// while a failure is recorded concurrently: in every interleaving the failure makes half of
/// the last two calls and trips the breaker, once; the racing success never hides it.
#[test]
fn a_failure_racing_successes_in_a_healthy_count_window_trips() {
    use breaker_core::breaker::SlidingWindow;
    loom::model(|| {
        let opened = Arc::new(AtomicUsize::new(0));
        let seen = opened.clone();
        let b = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window: SlidingWindow::Count(2),
            min_calls: 2,
            ..BreakerPolicy::default()
        })
        .clock(Clock::manual(&ManualClock::new()))
        .totals(false)
        .on_transition(move |t| {
            if t.to == State::Open {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success();
        let failure = b.try_acquire_owned().unwrap();
        let success = b.try_acquire().unwrap();
        let t = thread::spawn(move || failure.record(Outcome::Failure));
        success.success();
        t.join().unwrap();
        assert_eq!(b.state(), State::Open);
        assert_eq!(opened.load(Ordering::SeqCst), 1);
    });
}

/// A probe success racing a probe failure: the breaker ends open or closed, never wedged
/// half-open with a slot held.
#[test]
fn racing_probe_outcomes_leave_no_slot_held() {
    loom::model(|| {
        let b = half_open(2, 2);
        let p1 = b.try_acquire_owned().unwrap();
        let p2 = b.try_acquire().unwrap();
        let t = thread::spawn(move || p1.record(Outcome::Success));
        p2.record(Outcome::Failure);
        t.join().unwrap();
        let s = b.snapshot();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.probes_in_flight, 0);
    });
}

// --- No dead end ------------------------------------------------------------------------------
//
// In these models the clock is a `ManualClock`, whose reading is a loom atomic: every clock
// read is a point where loom may switch threads, and every stamp the breaker writes after a
// transition is a loom atomic too. After the threads are joined (no call in flight) each model
// checks the invariant: once the longest cooldown plus the probe wait has passed, the next call
// is admitted.

const COOLDOWN: Duration = Duration::from_secs(1);
const PROBE_WAIT: Duration = Duration::from_secs(1);

fn with_clock(probes: u32, close: u32) -> (CircuitBreaker, ManualClock) {
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(1),
        half_open_probes: probes,
        successes_to_close: close,
        cooldown: COOLDOWN,
        cooldown_max: COOLDOWN,
        max_probe_wait: Some(PROBE_WAIT),
        ..BreakerPolicy::default()
    })
    .clock(Clock::manual(&time))
    .totals(false)
    .build()
    .unwrap();
    (b, time)
}

fn assert_no_dead_end(b: &CircuitBreaker, time: &ManualClock) {
    let s = b.snapshot();
    assert_eq!(s.probes_in_flight, 0, "no call in flight: {s:?}");
    time.advance(COOLDOWN + PROBE_WAIT);
    assert!(
        b.try_acquire().is_ok(),
        "dead end: {s:?} -> {:?}",
        b.snapshot()
    );
}

/// The reported wedge: a probe slot reserved while another probe fails and re-opens.
#[test]
fn no_dead_end_when_a_probe_fails_while_a_slot_is_reserved() {
    loom::model(|| {
        let (b, time) = with_clock(2, 2);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let first = b.try_acquire_owned().unwrap();
        let b2 = b.clone();
        let t = thread::spawn(move || drop(b2.try_acquire()));
        first.record(Outcome::Failure);
        t.join().unwrap();
        assert_eq!(b.state(), State::Open);
        assert_no_dead_end(&b, &time);
    });
}

/// A trip racing a reset and a second trip.
#[test]
fn no_dead_end_when_a_trip_races_a_reset_and_a_new_trip() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        let p = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || p.record(Outcome::Failure));
        b.reset();
        if let Ok(p) = b.try_acquire() {
            p.failure();
        }
        t.join().unwrap();
        assert_no_dead_end(&b, &time);
    });
}

/// The expired-probe takeover racing the hung probe's failure.
#[test]
fn no_dead_end_when_a_takeover_races_the_hung_probe() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let hung = b.try_acquire_owned().unwrap();
        time.advance(PROBE_WAIT);
        let b2 = b.clone();
        let t = thread::spawn(move || drop(b2.try_acquire()));
        hung.record(Outcome::Failure);
        t.join().unwrap();
        assert_no_dead_end(&b, &time);
    });
}

/// Two promotions from open racing, one probe failing.
#[test]
fn no_dead_end_when_promotions_race() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let b2 = b.clone();
        let t = thread::spawn(move || {
            if let Ok(p) = b2.try_acquire() {
                p.failure();
            }
        });
        drop(b.try_acquire());
        t.join().unwrap();
        assert_no_dead_end(&b, &time);
    });
}

/// The first probe of a half-open period is stamped after its promotion's swap; a caller whose
/// swap lost to that promotion must not date the period's newest probe with its own reading
/// from before it. One probe slot: A reads the clock at the deadline (1 s), B moves it to 1.5 s
/// and promotes; if A then stamped its stale 1 s before B's stamp landed, a call at 2 s (one
/// probe wait after 1 s, half a wait after B's probe) took over, and two probes admitted within
/// one probe wait were in flight. Each admission is bracketed by clock readings; no two held
/// probes may surely lie within one wait.
#[test]
fn a_stale_reading_never_dates_the_first_probe_of_a_period() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let half = PROBE_WAIT / 2;
        let bracketed = |b: &CircuitBreaker, time: &ManualClock| {
            let before = time.now();
            b.try_acquire_owned().ok().map(|p| (before, time.now(), p))
        };
        let (b1, t1) = (b.clone(), time.clone());
        let a = thread::spawn(move || bracketed(&b1, &t1));
        let (b2, t2) = (b.clone(), time.clone());
        let promoter = thread::spawn(move || {
            t2.advance(half);
            bracketed(&b2, &t2)
        });
        time.advance(half);
        let late = bracketed(&b, &time);
        let probes: Vec<_> = [a.join().unwrap(), promoter.join().unwrap(), late]
            .into_iter()
            .flatten()
            .collect();
        for (i, (b1, a1, _)) in probes.iter().enumerate() {
            for (b2, a2, _) in &probes[i + 1..] {
                assert!(
                    (*a1).max(*a2) - (*b1).min(*b2) >= PROBE_WAIT,
                    "two probes admitted within one probe wait: {:?} and {:?}",
                    (b1, a1),
                    (b2, a2)
                );
            }
        }
    });
}

/// The word does not tell probe slots apart: a probe ending and a new one taking its free slot
/// restore the very word a takeover decided on. One probe slot, the first probe held past the
/// wait: A asks for a takeover while B ends the held probe and takes the free slot. If A's
/// swap succeeded on the restored word by the held probe's age alone, two probes admitted in
/// the same instant (within one probe wait) were in flight; at most one may be admitted.
#[test]
fn a_takeover_never_rides_on_a_restored_word() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let held = b.try_acquire_owned().unwrap();
        time.advance(PROBE_WAIT);
        let b1 = b.clone();
        let a = thread::spawn(move || b1.try_acquire_owned().ok());
        drop(held);
        let mine = b.try_acquire_owned().ok();
        let theirs = a.join().unwrap();
        assert!(
            mine.is_none() || theirs.is_none(),
            "two probes admitted within one probe wait: {:?}",
            b.snapshot()
        );
        let admitted = u32::from(mine.is_some()) + u32::from(theirs.is_some());
        assert_eq!(b.snapshot().probes_in_flight, admitted, "no slot leaked");
    });
}

/// Half-open -> closed racing a manual change.
#[test]
fn no_dead_end_when_a_close_races_a_manual_change() {
    loom::model(|| {
        let (b, time) = with_clock(1, 1);
        b.try_acquire().unwrap().failure();
        time.advance(COOLDOWN);
        let probe = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || probe.record(Outcome::Success));
        b.force_open();
        b.reset();
        t.join().unwrap();
        assert_no_dead_end(&b, &time);
    });
}

// --- Lazily published stripes ------------------------------------------------------------------
//
// A time window's stripes and the lifetime totals' stripes are allocated by the first outcome
// counted in them and published with one compare-and-swap from null; a thread that loses the
// race frees its own allocation and counts into the winner's. (Under loom every thread maps to
// the same stripe, so the two threads here race for the same cell.)

fn lazily_striped(window: bool) -> CircuitBreaker {
    let time = ManualClock::new();
    let policy = if window {
        BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window: breaker_core::SlidingWindow::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            min_calls: 100,
            ..BreakerPolicy::default()
        }
    } else {
        BreakerPolicy::default()
    };
    CircuitBreaker::builder(policy)
        .clock(Clock::manual(&time))
        .totals(!window)
        .build()
        .unwrap()
}

fn two_racing_successes(b: &CircuitBreaker) {
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            thread::spawn(move || b.try_acquire().unwrap().success())
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Two first outcomes race to publish a time window's stripe: one publication wins, and
/// neither outcome is lost (a lost race frees its stripe and counts into the winner's).
#[test]
fn time_window_stripes_publish_once() {
    loom::model(|| {
        let b = lazily_striped(true);
        two_racing_successes(&b);
        assert_eq!(b.snapshot().window.calls, 2);
    });
}

/// Two first counted events race to publish the totals' table and stripe: neither is lost.
#[test]
fn totals_publish_once() {
    loom::model(|| {
        let b = lazily_striped(false);
        two_racing_successes(&b);
        let totals = b.snapshot().totals.expect("totals are on");
        assert_eq!((totals.succeeded, totals.admitted), (2, 2));
    });
}
