//! `TimeoutLayer` / `TimeoutService` (feature `tower`): the pipeline's timeout on a tower
//! service, on tokio's paused clock, alone and under a `RetryLayer`.
#![cfg(all(feature = "tower", feature = "tokio"))]

use breaker_core::pipeline::BuildError;
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryPolicy};
use breaker_core::timeout::{Elapsed, TimeoutKind};
use breaker_core::tower::retry::RetryLayer;
use breaker_core::tower::timeout::TimeoutLayer;
use breaker_core::Error;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::{service_fn, Layer, Service, ServiceBuilder, ServiceExt};

/// Counts drops of the response future's state.
struct DropCount(Arc<AtomicU32>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Sleeps `req` milliseconds, then answers `req`; counts calls and dropped futures.
fn sleeper(
    calls: &Arc<AtomicU32>,
    drops: &Arc<AtomicU32>,
) -> impl Service<
    u64,
    Response = u64,
    Error = std::io::Error,
    Future = impl Future<Output = Result<u64, std::io::Error>> + Send,
> + Clone
       + Send {
    let (calls, drops) = (Arc::clone(calls), Arc::clone(drops));
    service_fn(move |ms: u64| {
        calls.fetch_add(1, Ordering::SeqCst);
        let guard = DropCount(Arc::clone(&drops));
        async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(ms)
        }
    })
}

#[tokio::test(start_paused = true)]
async fn times_out_at_the_limit_and_drops_the_inner_future() {
    let (calls, drops) = (Arc::default(), Arc::default());
    let svc = TimeoutLayer::new(Duration::from_secs(1))
        .unwrap()
        .layer(sleeper(&calls, &drops));
    let start = Instant::now();

    assert_eq!(svc.clone().oneshot(999).await.unwrap(), 999);
    assert_eq!(start.elapsed(), Duration::from_millis(999));

    let start = Instant::now();
    match svc.oneshot(5_000).await {
        Err(Error::Timeout(e)) => assert_eq!(
            e,
            Elapsed {
                kind: TimeoutKind::Attempt,
                after: Duration::from_secs(1)
            }
        ),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_result_ready_at_the_limit_wins() {
    let (calls, drops) = (Arc::default(), Arc::default());
    let svc = TimeoutLayer::new(Duration::from_secs(1))
        .unwrap()
        .layer(sleeper(&calls, &drops));
    assert_eq!(svc.oneshot(1_000).await.unwrap(), 1_000);
}

#[tokio::test(start_paused = true)]
async fn retry_outside_timeout_retries_each_timed_out_attempt() {
    let (calls, drops) = (Arc::default(), Arc::default());
    let retry = RetryLayer::new(RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::Fixed {
            delay: Duration::from_millis(10),
        },
        jitter: Jitter::None,
    })
    .unwrap();
    let svc = ServiceBuilder::new()
        .layer(retry)
        .layer(TimeoutLayer::new(Duration::from_millis(100)).unwrap())
        .service(sleeper(&calls, &drops));
    let start = Instant::now();

    match svc.oneshot(1_000).await {
        Err(Error::GaveUp {
            attempts,
            reason,
            last,
            ..
        }) => {
            assert_eq!(attempts, 3);
            assert_eq!(reason, GiveUpReason::AttemptsExhausted);
            assert!(matches!(*last, Error::Inner(Error::Timeout(_))), "{last:?}");
        }
        other => panic!("expected GaveUp, got {other:?}"),
    }
    // Three attempts of 100 ms, two sleeps of 10 ms.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(320));
}

#[test]
fn zero_timeout_is_a_build_error() {
    assert!(matches!(
        TimeoutLayer::new(Duration::ZERO),
        Err(BuildError::Invalid {
            field: "timeout",
            ..
        })
    ));
}

/// The layer's timeouts are counted in `breaker_timeouts_total`, as a pipeline counts its own:
/// under `breaker=""` by default, under the layer's name when it has one.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn timeouts_are_counted_in_the_metrics() {
    use metrics_util::debugging::DebuggingRecorder;
    let recorder = DebuggingRecorder::new();
    let (calls, drops) = (Arc::default(), Arc::default());
    let (named, unnamed) = metrics::with_local_recorder(&recorder, || {
        let layer = TimeoutLayer::new(Duration::from_secs(1)).unwrap();
        (
            layer.clone().name("svc").layer(sleeper(&calls, &drops)),
            layer.layer(sleeper(&calls, &drops)),
        )
    });
    for _ in 0..2 {
        assert!(named.clone().oneshot(5_000).await.is_err());
    }
    assert!(unnamed.clone().oneshot(5_000).await.is_err());
    assert_eq!(named.oneshot(10).await.unwrap(), 10); // in time: not counted
    assert_eq!(
        support::nonzero(&recorder),
        support::expected(&[
            ("breaker_timeouts_total{breaker=,kind=attempt}", 1.0),
            ("breaker_timeouts_total{breaker=svc,kind=attempt}", 2.0),
        ])
    );
}

#[cfg(feature = "metrics")]
#[path = "support/metrics.rs"]
mod support;
