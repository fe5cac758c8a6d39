//! The pipeline counts its retries and timeouts in the `metrics` facade, under its breaker's
//! name (feature `metrics`).
#![cfg(all(feature = "metrics", feature = "tokio"))]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::BTreeMap;
use std::time::Duration;

fn counters(recorder: &DebuggingRecorder) -> BTreeMap<String, u64> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            match value {
                DebugValue::Counter(n) => {
                    Some((format!("{}{{{}}}", key.name(), labels.join(",")), n))
                }
                _ => None,
            }
        })
        .collect()
}

#[test]
fn retries_and_timeouts_are_counted_under_the_breaker_name() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let breaker = CircuitBreaker::builder(BreakerPolicy {
                consecutive_failures: Some(100),
                ..BreakerPolicy::default()
            })
            .name("inventory")
            .clock(Clock::tokio())
            .build()
            .unwrap();
            let pipeline = Pipeline::builder()
                .breaker(breaker)
                .retry(RetryPolicy {
                    max_attempts: 3,
                    backoff: Backoff::Fixed {
                        delay: Duration::from_millis(10),
                    },
                    jitter: Jitter::None,
                })
                .idempotent(true)
                .timeout(Duration::from_millis(100))
                .build()
                .unwrap();
            // Every attempt hangs past the 100 ms timeout: 3 attempts, 2 retries, 3 timeouts.
            let r: Result<(), breaker_core::Error<std::io::Error>> = pipeline
                .call(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    Ok(())
                })
                .await;
            assert_eq!(r.unwrap_err().attempts(), 3);
            // A success on the first attempt adds nothing.
            let ok: Result<u8, breaker_core::Error<std::io::Error>> =
                pipeline.call(|| async { Ok(1) }).await;
            assert_eq!(ok.unwrap(), 1);
        });
    });
    let got = counters(&recorder);
    assert_eq!(
        got.get("breaker_retries_total{breaker=inventory}"),
        Some(&2)
    );
    assert_eq!(
        got.get("breaker_timeouts_total{breaker=inventory,kind=attempt}"),
        Some(&3)
    );
    assert_eq!(got.len(), 2, "no other counters: {got:?}");
}
