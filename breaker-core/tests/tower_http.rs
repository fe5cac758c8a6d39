//! The tower layers with the standard HTTP rules (issue 13 §5): one classifier trait for the
//! `BreakerLayer`, the `RetryLayer` and the `PolicyLayer`; `Ok` responses judged by status; a
//! `RetryLayer` around a `BreakerLayer` judging that layer's own error. On tokio's paused clock.
#![cfg(all(feature = "tower", feature = "tokio", feature = "http"))]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_core::classify::Nested;
use breaker_core::clock::Clock;
use breaker_core::error::Rejection;
use breaker_core::http::HttpClassifier;
use breaker_core::pipeline::AllErrors;
use breaker_core::policy::Policy;
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryPolicy};
use breaker_core::tower::breaker::BreakerLayer;
use breaker_core::tower::policy::PolicyLayer;
use breaker_core::tower::retry::RetryLayer;
use breaker_core::Error;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::{service_fn, Layer, Service, ServiceBuilder, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn breaker(failures: u32) -> CircuitBreaker {
    CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(failures),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    })
    .name("http")
    .clock(Clock::tokio())
    .totals(true)
    .build()
    .unwrap()
}

fn fixed(attempts: u32, delay: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        backoff: Backoff::Fixed { delay },
        jitter: Jitter::None,
    }
}

/// Answers `status` (with `Retry-After: after` when given) to every request, the body the
/// request's number; counts the requests.
fn answering(
    calls: &Arc<AtomicU32>,
    status: u16,
    after: Option<&'static str>,
) -> impl Service<
    (),
    Response = http::Response<u32>,
    Error = BoxError,
    Future = impl Future<Output = Result<http::Response<u32>, BoxError>> + Send,
> + Clone
       + Send {
    let calls = Arc::clone(calls);
    service_fn(move |()| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let mut b = http::Response::builder().status(status);
        if let Some(after) = after {
            b = b.header("retry-after", after);
        }
        let resp = b.body(n).unwrap();
        async move { Ok::<_, BoxError>(resp) }
    })
}

/// Fails in transport every time; counts the requests.
fn refusing(
    calls: &Arc<AtomicU32>,
) -> impl Service<
    (),
    Response = http::Response<u32>,
    Error = std::io::Error,
    Future = impl Future<Output = Result<http::Response<u32>, std::io::Error>> + Send,
> + Clone
       + Send {
    let calls = Arc::clone(calls);
    service_fn(move |()| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)) }
    })
}

/// `BreakerLayer::new(b).with_classifier(HttpClassifier)` is ready and trips on `Ok(503)`
/// responses, which the caller still gets.
#[tokio::test(start_paused = true)]
async fn a_breaker_layer_with_the_http_rules_trips_on_503_responses() {
    let calls = Arc::default();
    let layer = BreakerLayer::new(breaker(3)).with_classifier(HttpClassifier);
    let mut svc = layer.layer(answering(&calls, 503, None));
    for n in 1..=3 {
        let resp = svc.ready().await.unwrap().call(()).await.unwrap();
        assert_eq!((resp.status().as_u16(), *resp.body()), (503, n));
    }
    assert_eq!(layer.breaker().state(), State::Open);
    let e = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(matches!(e, Error::Rejected(Rejection::Breaker(_))), "{e:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A 404 response is neither a failure nor a success to the breaker.
#[tokio::test(start_paused = true)]
async fn a_breaker_layer_with_the_http_rules_ignores_404_responses() {
    let calls = Arc::default();
    let layer = BreakerLayer::new(breaker(1)).with_classifier(HttpClassifier);
    let svc = layer.layer(answering(&calls, 404, None));
    for _ in 0..5 {
        assert_eq!(svc.clone().oneshot(()).await.unwrap().status(), 404);
    }
    assert_eq!(layer.breaker().state(), State::Closed);
    assert_eq!(layer.breaker().snapshot().totals.unwrap().ignored, 5);
}

/// A `RetryLayer` around a `BreakerLayer` sees the breaker's `Error<E>`: with the HTTP rules it
/// retries the transport errors, stops at the rejection once the breaker opens, and does not
/// retry that rejection.
#[tokio::test(start_paused = true)]
async fn a_retry_layer_around_a_breaker_layer_does_not_retry_its_rejection() {
    for nested in [false, true] {
        let calls = Arc::default();
        let layer = BreakerLayer::new(breaker(2)).with_classifier(HttpClassifier);
        let retry = RetryLayer::new(fixed(5, Duration::ZERO)).unwrap();
        let svc = if nested {
            ServiceBuilder::new()
                .layer(retry.with_classifier(Nested(HttpClassifier)))
                .layer(layer.clone())
                .service(refusing(&calls))
                .boxed_clone()
        } else {
            ServiceBuilder::new()
                .layer(retry.with_classifier(HttpClassifier))
                .layer(layer.clone())
                .service(refusing(&calls))
                .boxed_clone()
        };
        let e = svc.oneshot(()).await.unwrap_err();
        // Two attempts reached the service and tripped the breaker; the third was refused and
        // returned as it is, not retried up to five attempts.
        assert!(
            matches!(e, Error::Inner(Error::Rejected(Rejection::Breaker(_)))),
            "{e:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(layer.breaker().state(), State::Open);
    }

    // The default classifier retries every error, the rejection too: five attempts.
    let calls = Arc::default();
    let layer = BreakerLayer::new(breaker(2)).with_classifier(HttpClassifier);
    let svc = ServiceBuilder::new()
        .layer(
            RetryLayer::new(fixed(5, Duration::ZERO))
                .unwrap()
                .with_classifier(AllErrors),
        )
        .layer(layer)
        .service(refusing(&calls));
    let e = svc.oneshot(()).await.unwrap_err();
    assert_eq!(e.give_up_reason(), Some(GiveUpReason::AttemptsExhausted));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A `RetryLayer` with the HTTP rules retries a `503` response after its `Retry-After`, and
/// when it gives up returns the last response.
#[tokio::test(start_paused = true)]
async fn a_retry_layer_with_the_http_rules_retries_responses() {
    let calls = Arc::default();
    let svc = RetryLayer::new(fixed(3, Duration::from_millis(50)))
        .unwrap()
        .with_classifier(HttpClassifier)
        .layer(answering(&calls, 503, Some("1")));
    let start = Instant::now();
    let resp = svc.oneshot(()).await.unwrap();
    assert_eq!((resp.status().as_u16(), *resp.body()), (503, 3));
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "two waits of the server's 1 s"
    );
}

/// A `PolicyLayer` with the HTTP rules: `Ok(503)` trips its breaker through the retry loop.
#[tokio::test(start_paused = true)]
async fn a_policy_layer_with_the_http_rules_trips_on_503_responses() {
    let policy = Policy {
        breaker: Some(BreakerPolicy {
            consecutive_failures: Some(2),
            ..BreakerPolicy::default()
        }),
        retry: Some(fixed(3, Duration::ZERO)),
        idempotent: true,
        ..Policy::default()
    };
    let calls = Arc::default();
    let layer = PolicyLayer::new(&policy)
        .unwrap()
        .with_classifier(HttpClassifier);
    let svc = layer.layer(answering(&calls, 503, None));
    // retry > breaker: two 503s open the breaker, the third attempt is refused.
    let e = svc.clone().oneshot(()).await.unwrap_err();
    assert!(matches!(e, Error::Rejected(Rejection::Breaker(_))), "{e:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(layer.pipeline().breaker().unwrap().state(), State::Open);
}
