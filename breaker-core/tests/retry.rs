//! Backoff arithmetic and jitter bounds (cases BR-26, BR-28, BR-30, BR-31) and the retry budget.

use breaker_core::pipeline::Pipeline;
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryBudget, RetryPolicy};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

fn exp(base: Duration, factor: f64, max: Duration, jitter: Jitter, attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        backoff: Backoff::Exponential { base, factor, max },
        jitter,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Delays are non-decreasing until the cap and exactly the cap after it.
fn assert_monotone_then_capped(delays: &[Duration], cap: Duration) {
    let first_cap = delays
        .iter()
        .position(|d| *d == cap)
        .expect("reaches the cap");
    for w in delays[..=first_cap].windows(2) {
        assert!(w[0] <= w[1], "{w:?}");
    }
    assert!(delays[first_cap..].iter().all(|d| *d == cap));
}

/// BR-26: exponential backoff never overflows: 200 delays with factor 10 and 10,000 with
/// factor 2, exact values up to the cap, then exactly 60 s.
#[test]
fn br_26_exponential_backoff_never_overflows() {
    let p = exp(ms(10), 10.0, Duration::from_secs(60), Jitter::None, 200);
    let delays: Vec<_> = p.delays(SmallRng::seed_from_u64(1)).take(200).collect();
    assert_eq!(
        delays[..6],
        [
            ms(10),
            ms(100),
            ms(1_000),
            ms(10_000),
            ms(60_000),
            ms(60_000)
        ]
    );
    assert_monotone_then_capped(&delays, Duration::from_secs(60));

    let p = exp(ms(10), 2.0, Duration::from_secs(60), Jitter::None, 100);
    let delays: Vec<_> = p.delays(SmallRng::seed_from_u64(1)).take(10_000).collect();
    assert_eq!(delays[12], ms(40_960));
    assert_eq!(delays[13], ms(60_000));
    assert_monotone_then_capped(&delays, Duration::from_secs(60));

    // The schedule itself at extreme retry numbers.
    let b = p.backoff;
    for n in [0, 1, 63, 64, 65, 1_000, 1 << 31, u32::MAX] {
        assert!(b.delay(n) <= Duration::from_secs(60));
    }
    assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
}

/// BR-28: a float backoff far beyond any Duration never panics and never leaves [0, 20 s],
/// through the schedule (2000 delays) and through a pipeline run of the most attempts a
/// pipeline accepts (100: past the point where `1s * 2^n` leaves `Duration`'s range, n = 64).
#[tokio::test(start_paused = true)]
async fn br_28_huge_float_backoff_stays_finite_and_capped() {
    let cap = Duration::from_secs(20);
    for factor in [2.0, 1e10, f64::MAX, f64::INFINITY, f64::NAN] {
        let p = exp(Duration::from_secs(1), factor, cap, Jitter::Full, 2000);
        let delays: Vec<_> = p.delays(SmallRng::seed_from_u64(28)).take(2000).collect();
        assert!(delays.iter().all(|d| *d <= cap), "factor {factor}");
        // Full jitter is really applied: the samples are spread, not all at the cap.
        let below_half = delays.iter().filter(|d| **d < cap / 2).count();
        assert!(below_half > 500, "factor {factor}: {below_half}");
    }

    let pipeline = Pipeline::builder()
        .retry(exp(Duration::from_secs(1), 2.0, cap, Jitter::Full, 100))
        .idempotent(true)
        .seed(28)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let e = pipeline
        .call(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>("unavailable") }
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 100);
    assert_eq!(e.give_up_reason(), Some(GiveUpReason::AttemptsExhausted));
    assert_eq!(e.attempts(), 100);
    assert!(start.elapsed() <= cap * 99);
}

/// BR-30: the cap is a hard ceiling after jitter, for every strategy: 10,000 seeded samples
/// per attempt index 0..=10 with base 800 ms, factor 2, cap 1200 ms.
#[test]
fn br_30_jitter_never_exceeds_the_cap() {
    let cap = ms(1200);
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Additive { spread: ms(400) },
    ] {
        let p = exp(ms(800), 2.0, cap, jitter, 11);
        let mut max = Duration::ZERO;
        let mut min = Duration::MAX;
        for seed in 0..10_000 {
            for d in p.delays(SmallRng::seed_from_u64(seed)).take(11) {
                max = max.max(d);
                min = min.min(d);
            }
        }
        assert!(max <= cap, "{jitter:?}: {max:?}");
        match jitter {
            Jitter::None => assert_eq!((min, max), (ms(800), cap)),
            Jitter::Full => assert!(min < ms(10) && max > ms(1190), "{min:?} {max:?}"),
            Jitter::Equal => assert!(min >= ms(400) && max > ms(1190), "{min:?} {max:?}"),
            Jitter::Decorrelated => assert!(min >= ms(800) && max == cap, "{min:?} {max:?}"),
            Jitter::Additive { .. } => assert!(min < ms(410) && max == cap, "{min:?} {max:?}"),
        }
    }
}

/// BR-31: an additive jitter wider than the delay clamps at zero: never negative, never a
/// panic, and the zero bound is actually reached.
#[test]
fn br_31_additive_jitter_wider_than_delay_clamps_at_zero() {
    // delay = 100 ms, jitter = ±200 ms: samples in [0, 300 ms].
    let p = RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::Exponential {
            base: ms(100),
            factor: 1.0,
            max: Duration::from_secs(1),
        },
        jitter: Jitter::Additive { spread: ms(200) },
    };
    let samples: Vec<_> = p.delays(SmallRng::seed_from_u64(31)).take(10_000).collect();
    assert!(samples.iter().all(|d| *d <= ms(300)));
    let clamped = samples.iter().filter(|d| d.is_zero()).count();
    assert!(
        clamped > 0,
        "a third of the interval is below zero and clamps to it"
    );

    // delay = 0, jitter = 200 ms: samples in [0, 200 ms].
    let p = RetryPolicy {
        backoff: Backoff::Exponential {
            base: Duration::ZERO,
            factor: 2.0,
            max: Duration::from_secs(1),
        },
        ..p
    };
    let samples: Vec<_> = p.delays(SmallRng::seed_from_u64(31)).take(10_000).collect();
    assert!(samples.iter().all(|d| *d <= ms(200)));

    // A fixed delay of 100 ms caps itself: ±200 ms stays in [0, 100 ms].
    let p = RetryPolicy {
        backoff: Backoff::Fixed { delay: ms(100) },
        ..p
    };
    assert!(p
        .delays(SmallRng::seed_from_u64(31))
        .take(10_000)
        .all(|d| d <= ms(100)));
}

/// The same seed gives the same delays: the random source is injectable.
#[test]
fn seeded_jitter_is_reproducible() {
    let p = exp(ms(100), 2.0, Duration::from_secs(10), Jitter::Full, 10);
    let a: Vec<_> = p.delays(SmallRng::seed_from_u64(9)).take(10).collect();
    let b: Vec<_> = p.delays(SmallRng::seed_from_u64(9)).take(10).collect();
    assert_eq!(a, b);
}

/// The retry budget throttles retries once half the tokens are gone (gRPC A6 arithmetic):
/// 10 tokens, every attempt failing: 3 + 2 + 1 + 1 invocations.
#[tokio::test(start_paused = true)]
async fn retry_budget_throttles_retries() {
    let budget = RetryBudget::new(10, 0.1).unwrap();
    let p = Pipeline::builder()
        .retry(RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Fixed {
                delay: Duration::ZERO,
            },
            jitter: Jitter::None,
        })
        .idempotent(true)
        .retry_budget(budget.clone())
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let mut per_call = Vec::new();
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let before = calls.load(Ordering::SeqCst);
        let e = p
            .call(|| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>("unavailable") }
            })
            .await
            .unwrap_err();
        per_call.push(calls.load(Ordering::SeqCst) - before);
        reasons.push(e.give_up_reason().unwrap());
    }
    assert_eq!(per_call, [3, 2, 1, 1]);
    assert_eq!(
        reasons,
        [
            GiveUpReason::AttemptsExhausted,
            GiveUpReason::Throttled,
            GiveUpReason::Throttled,
            GiveUpReason::Throttled
        ]
    );
    assert_eq!(budget.tokens(), 3.0);
    // Successes refill it: 0.1 token each.
    for _ in 0..21 {
        p.call(|| async { Ok::<(), &str>(()) }).await.unwrap();
    }
    assert!(budget.can_retry());
}
