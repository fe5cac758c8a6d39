//! `RetryLayer` / `RetryService` (feature `tower`): the pipeline's retry on a tower service,
//! with exact invocation counts and sleeps on tokio's paused clock.
#![cfg(all(feature = "tower", feature = "tokio"))]

use breaker_core::pipeline::{classifier, BuildError};
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryPolicy};
use breaker_core::tower::retry::RetryLayer;
use breaker_core::Error;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{service_fn, Layer, Service, ServiceExt};

fn fixed(max_attempts: u32, delay_ms: u64) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        backoff: Backoff::Fixed {
            delay: Duration::from_millis(delay_ms),
        },
        jitter: Jitter::None,
    }
}

/// A service that records every request it is called with and fails the first `failures`.
fn flaky(
    seen: &Arc<Mutex<Vec<String>>>,
    failures: usize,
) -> impl Service<
    String,
    Response = usize,
    Error = String,
    Future = impl Future<Output = Result<usize, String>> + Send,
> + Clone
       + Send {
    let seen = Arc::clone(seen);
    service_fn(move |req: String| {
        let mut seen = seen.lock().unwrap();
        seen.push(req);
        let n = seen.len();
        async move {
            if n <= failures {
                Err(format!("failure {n}"))
            } else {
                Ok(n)
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn retries_until_success_with_the_policy_backoff() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let svc = RetryLayer::new(fixed(3, 100))
        .unwrap()
        .layer(flaky(&seen, 2));
    let start = Instant::now();

    assert_eq!(svc.oneshot("req".to_string()).await.unwrap(), 3);
    // Three invocations, each with its own clone of the request, two sleeps of 100 ms.
    assert_eq!(*seen.lock().unwrap(), ["req", "req", "req"]);
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_attempts() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let svc = RetryLayer::new(fixed(3, 50))
        .unwrap()
        .layer(flaky(&seen, usize::MAX));
    let start = Instant::now();

    match svc.oneshot("x".to_string()).await {
        Err(Error::GaveUp {
            attempts,
            reason,
            last,
        }) => {
            assert_eq!(attempts, 3);
            assert_eq!(reason, GiveUpReason::AttemptsExhausted);
            assert!(matches!(*last, Error::Inner(ref e) if e == "failure 3"));
        }
        other => panic!("expected GaveUp, got {other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn errors_the_classifier_calls_permanent_are_not_retried() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let permanent = classifier(
        |_: &String| breaker_core::Outcome::Failure,
        |e: &String| !e.starts_with("failure"),
    );
    let svc = RetryLayer::new(fixed(5, 10))
        .unwrap()
        .with_classifier(permanent)
        .layer(flaky(&seen, usize::MAX));

    let err = svc.oneshot("x".to_string()).await.unwrap_err();
    assert!(
        matches!(err, Error::Inner(ref e) if e == "failure 1"),
        "{err:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn each_call_of_a_cloned_service_retries_on_its_own() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut svc = RetryLayer::new(fixed(2, 0)).unwrap().layer(flaky(&seen, 1));

    // First call: one failure, one success (2 invocations); second: succeeds at once.
    assert_eq!(
        svc.ready().await.unwrap().call("a".into()).await.unwrap(),
        2
    );
    assert_eq!(
        svc.ready().await.unwrap().call("b".into()).await.unwrap(),
        3
    );
    assert_eq!(*seen.lock().unwrap(), ["a", "a", "b"]);
}

#[test]
fn zero_attempts_is_a_build_error() {
    assert!(matches!(
        RetryLayer::new(fixed(0, 0)),
        Err(BuildError::Invalid {
            field: "retry.max_attempts",
            ..
        })
    ));
}
