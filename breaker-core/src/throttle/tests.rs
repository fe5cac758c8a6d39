use super::*;
use crate::clock::ManualClock;
use std::time::Duration;

fn throttler(time: &ManualClock) -> Throttler {
    Throttler::with_clock(ThrottlePolicy::default(), Clock::manual(time))
        .unwrap()
        .seeded(7)
}

#[test]
fn nothing_is_rejected_while_the_dependency_accepts() {
    let time = ManualClock::new();
    let t = throttler(&time);
    for _ in 0..1000 {
        t.try_acquire().unwrap().success();
    }
    assert_eq!(t.counts(), (1000, 1000));
    assert_eq!(t.probability(), 0.0);
}

/// Half the calls rejected by the dependency: with `K = 2`, `requests - 2 × accepts` stays at
/// or below zero, so the client rejects none itself (it tolerates up to `K` requests per
/// accepted one).
#[test]
fn a_ratio_within_k_rejects_nothing() {
    let time = ManualClock::new();
    let t = throttler(&time);
    for i in 0..1000 {
        let p = t.try_acquire().unwrap();
        if i % 2 == 0 {
            p.success()
        } else {
            p.failure()
        }
    }
    assert_eq!(t.probability(), 0.0);
}

/// The book's case: 10 calls a millisecond against a dependency that can accept 1 a
/// millisecond (and rejects the rest). The client converges on sending about `K` = 2 requests
/// per accepted one, so about 80% of its calls are rejected locally and never reach it.
#[test]
fn an_overloaded_dependency_gets_about_k_requests_per_accept() {
    let time = ManualClock::new();
    let t = throttler(&time);
    let (mut sent, mut accepted, mut local) = (0u32, 0u32, 0u32);
    for _ in 0..3000 {
        let mut capacity = 1;
        for _ in 0..10 {
            match t.try_acquire() {
                Ok(p) if capacity > 0 => {
                    capacity -= 1;
                    sent += 1;
                    accepted += 1;
                    p.success();
                }
                Ok(p) => {
                    sent += 1;
                    p.failure();
                }
                Err(e) => {
                    local += 1;
                    assert!(e.probability() > 0.0 && e.requests > e.accepts);
                }
            }
        }
        time.advance(Duration::from_millis(1));
    }
    let share = f64::from(local) / 30_000.0;
    assert!(
        (0.75..0.85).contains(&share),
        "{local} of 30000 rejected locally"
    );
    let per_accept = f64::from(sent) / f64::from(accepted);
    assert!(
        (1.8..2.3).contains(&per_accept),
        "{per_accept} requests per accept"
    );
}

#[test]
fn the_window_forgets_and_a_cancelled_call_counts_for_nothing() {
    let time = ManualClock::new();
    let t = throttler(&time);
    for _ in 0..50 {
        if let Ok(p) = t.try_acquire() {
            p.failure();
        }
    }
    assert_eq!(t.counts().1, 0);
    assert!(t.probability() > 0.9);
    time.advance(Duration::from_secs(121));
    assert_eq!(t.counts(), (0, 0));
    // A permit dropped without an outcome (a hedge that lost) is not a request.
    drop(t.try_acquire().unwrap());
    assert_eq!(t.counts(), (0, 0));
}

#[test]
fn an_invalid_policy_names_every_value() {
    let err = Throttler::new(ThrottlePolicy {
        k: 0.5,
        window: Duration::from_millis(10),
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid throttling: `k` must be in 1.0..=10.0 (below 1 the client would reject calls a \
         healthy dependency accepts), got 0.5; `window` must be in 1s..=1h, got 10ms"
    );
}

#[test]
fn the_display_of_a_rejection_names_the_counts_and_the_share() {
    let e = Throttled {
        requests: 60,
        accepts: 10,
        k_milli: 2000,
    };
    assert_eq!(
        e.to_string(),
        "throttled: 60 requests and 10 accepted in the window, 66% rejected locally"
    );
}
