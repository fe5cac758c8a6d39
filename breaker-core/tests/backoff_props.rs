//! Property tests for delay bounds (invariant 8 of CASES.md: BR-26 to BR-31) and the total
//! deadline (invariant 9: BR-32 to BR-34).

use breaker_core::pipeline::{BuildError, Pipeline};
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..=120_000).prop_map(Duration::from_millis),
        any::<u64>().prop_map(Duration::from_nanos),
        Just(Duration::MAX),
    ]
}

fn factor() -> impl Strategy<Value = f64> {
    prop_oneof![
        1.0f64..=100.0,
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(1e300),
    ]
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        duration().prop_map(|delay| Backoff::Fixed { delay }),
        (duration(), duration(), duration()).prop_map(|(base, step, max)| Backoff::Linear {
            base,
            step,
            max
        }),
        (duration(), factor(), duration())
            .prop_map(|(base, factor, max)| { Backoff::Exponential { base, factor, max } }),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
        duration().prop_map(|spread| Jitter::Additive { spread }),
    ]
}

proptest! {
    /// Every delay, at any retry number up to u32::MAX and with any jitter sample, lies in
    /// [0, cap]; nothing panics.
    #[test]
    fn every_delay_is_within_zero_and_cap(
        backoff in backoff(),
        jitter in jitter(),
        retry in prop_oneof![0u32..200, any::<u32>(), Just(u32::MAX)],
        previous in duration(),
        seed in any::<u64>(),
    ) {
        let cap = backoff.cap();
        let d = backoff.delay(retry);
        prop_assert!(d <= cap);
        let mut rng = SmallRng::seed_from_u64(seed);
        let j = jitter.apply(d, backoff.base(), cap, previous, &mut rng);
        prop_assert!(j <= cap, "{:?} > {:?}", j, cap);
        let policy = RetryPolicy { max_attempts: 3, backoff, jitter };
        for d in policy.delays(rng).take(50) {
            prop_assert!(d <= cap);
        }
    }

    /// For random policies, the sum of backoff sleeps never passes the total deadline and no
    /// attempt starts after it.
    #[test]
    fn sleeps_never_pass_the_deadline(
        base_ms in 0u64..5_000,
        factor in 1.0f64..4.0,
        max_ms in 0u64..20_000,
        jitter in jitter(),
        attempts in 1u32..40,
        deadline_ms in 1u64..60_000,
        work_ms in 0u64..3_000,
        seed in any::<u64>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let deadline = Duration::from_millis(deadline_ms);
        let built = Pipeline::builder()
            .retry(RetryPolicy {
                max_attempts: attempts,
                backoff: Backoff::Exponential {
                    base: Duration::from_millis(base_ms),
                    factor,
                    max: Duration::from_millis(max_ms),
                },
                jitter,
            })
            .idempotent(true)
            .deadline(deadline)
            .seed(seed)
            .build();
        // The builder runs the retry rules: a zero base or a cap below the base is refused.
        let invalid = base_ms == 0 || max_ms < base_ms;
        prop_assert_eq!(
            matches!(built, Err(BuildError::Retry(_))),
            invalid,
            "{:?}",
            built
        );
        let Ok(p) = built else { return Ok(()) };
        let (elapsed, starts, work) = rt.block_on(async {
            let start = Instant::now();
            let starts = Mutex::new(Vec::new());
            let _ = p
                .call(|| {
                    starts.lock().unwrap().push(start.elapsed());
                    async move {
                        tokio::time::sleep(Duration::from_millis(work_ms)).await;
                        Err::<(), _>("transient")
                    }
                })
                .await;
            (start.elapsed(), starts.into_inner().unwrap(), Duration::from_millis(work_ms))
        });
        prop_assert!(elapsed <= deadline, "{:?} > {:?}", elapsed, deadline);
        prop_assert!(starts.len() as u32 <= attempts);
        prop_assert!(starts.iter().all(|s| *s <= deadline));
        // Sleeps = time between the end of one attempt and the start of the next.
        let sleeps: Duration = starts
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0] + work))
            .sum();
        prop_assert!(sleeps <= deadline);
    }
}
