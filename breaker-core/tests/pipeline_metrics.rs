//! The pipeline counts its calls, rejections, retries and timeouts in the `metrics` facade under
//! its breaker's name, and a breaker it builds from a policy counts its transitions and state
//! (feature `metrics`). Exact values for scripted sequences, on tokio's paused clock.
#![cfg(all(feature = "metrics", feature = "tokio"))]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use metrics_util::debugging::DebuggingRecorder;
use std::time::Duration;

type Result<T> = std::result::Result<T, breaker_core::Error<std::io::Error>>;

#[path = "support/metrics.rs"]
mod support;
use support::{expected, nonzero};

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn failed() -> std::io::Error {
    std::io::Error::other("503")
}

#[test]
fn retries_timeouts_and_calls_are_counted_under_the_breaker_name() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        paused_runtime().block_on(async {
            // A breaker built by hand and handed over: its transitions are not instrumented,
            // but the pipeline counts its calls.
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
            // Every attempt hangs past the 100 ms timeout: 3 attempts, 2 retries, 3 timeouts,
            // 3 breaker failures (retry is outside the breaker).
            let r: Result<()> = pipeline
                .call(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    Ok(())
                })
                .await;
            assert_eq!(r.unwrap_err().attempts(), 3);
            // A success on the first attempt: one successful call, no retry.
            let ok: Result<u8> = pipeline.call(|| async { Ok(1) }).await;
            assert_eq!(ok.unwrap(), 1);
        });
    });
    assert_eq!(
        nonzero(&recorder),
        expected(&[
            (
                "breaker_calls_total{breaker=inventory,outcome=failure}",
                3.0
            ),
            (
                "breaker_calls_total{breaker=inventory,outcome=success}",
                1.0
            ),
            ("breaker_retries_total{breaker=inventory}", 2.0),
            (
                "breaker_timeouts_total{breaker=inventory,kind=attempt}",
                3.0
            ),
        ])
    );
}

#[test]
fn a_pipeline_breaker_counts_outcomes_rejections_cancellations_transitions_and_state() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        paused_runtime().block_on(async {
            let pipeline = Pipeline::builder()
                .name("stock")
                .breaker_policy(BreakerPolicy {
                    consecutive_failures: Some(2),
                    cooldown: Duration::from_secs(10),
                    half_open_probes: 1,
                    successes_to_close: 1,
                    ..BreakerPolicy::default()
                })
                .clock(Clock::tokio())
                .build()
                .unwrap();
            let fail = || async { Err::<u8, _>(failed()) };
            // Two failures trip the breaker; the third call is rejected locally.
            for _ in 0..2 {
                assert!(matches!(
                    pipeline.call(fail).await,
                    Err(breaker_core::Error::Inner(_))
                ));
            }
            assert!(matches!(
                pipeline.call(fail).await,
                Err(breaker_core::Error::Rejected(_))
            ));
            // After the cooldown one probe is admitted: the caller drops it while it is in
            // flight (a cancellation, which frees the probe slot), then a probe succeeds and
            // closes the breaker.
            tokio::time::advance(Duration::from_secs(10)).await;
            let dropped = tokio::time::timeout(
                Duration::from_millis(1),
                pipeline.call(std::future::pending::<Result<u8>>),
            )
            .await;
            assert!(dropped.is_err(), "the caller gave up on the call");
            let ok: Result<u8> = pipeline.call(|| async { Ok(7) }).await;
            assert_eq!(ok.unwrap(), 7);
        });
    });
    assert_eq!(
        nonzero(&recorder),
        expected(&[
            ("breaker_calls_total{breaker=stock,outcome=cancelled}", 1.0),
            ("breaker_calls_total{breaker=stock,outcome=failure}", 2.0),
            ("breaker_calls_total{breaker=stock,outcome=success}", 1.0),
            ("breaker_rejections_total{breaker=stock,reason=open}", 1.0),
            ("breaker_state{breaker=stock,state=closed}", 1.0),
            (
                "breaker_transitions_total{breaker=stock,from=closed,reason=consecutive_failures,to=open}",
                1.0
            ),
            (
                "breaker_transitions_total{breaker=stock,from=half-open,reason=probes_succeeded,to=closed}",
                1.0
            ),
            (
                "breaker_transitions_total{breaker=stock,from=open,reason=cooldown_elapsed,to=half-open}",
                1.0
            ),
        ])
    );
}
