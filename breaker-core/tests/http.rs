//! The standard HTTP classification (feature `http`), case BR-37.
#![cfg(feature = "http")]

use breaker_core::http::{retry_after, HttpClassifier};
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::{GiveUpReason, RetryPolicy};
use breaker_core::timeout::TimeoutKind;
use breaker_core::{Error, Outcome};
use http::{HeaderMap, HeaderValue, StatusCode};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// "3x exp": 3 attempts, exponential backoff, idempotent, 1 s attempt timeout.
fn three_x_exp() -> Pipeline {
    Pipeline::builder()
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .idempotent(true)
        .timeout(Duration::from_secs(1))
        .seed(37)
        .build()
        .unwrap()
}

/// BR-37: only 408, 429, 5xx, our own timeout and transport errors are retried; other 4xx are
/// returned unchanged after one attempt.
#[tokio::test(start_paused = true)]
async fn br_37_default_predicate_retries_only_transient_statuses() {
    let table = [
        (400, 1),
        (401, 1),
        (403, 1),
        (404, 1),
        (409, 1),
        (422, 1),
        (408, 3),
        (429, 3),
        (502, 3),
        (503, 3),
        (504, 3),
    ];
    for (code, expected) in table {
        let p = three_x_exp();
        let calls = AtomicU32::new(0);
        let status = StatusCode::from_u16(code).unwrap();
        let e = p
            .call_with(&HttpClassifier, || {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Err::<(), _>(status) }
            })
            .await
            .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), expected, "status {code}");
        if expected == 1 {
            assert!(
                matches!(e, Error::Inner(s) if s == status),
                "status {code}: unchanged"
            );
        } else {
            assert_eq!(e.give_up_reason(), Some(GiveUpReason::AttemptsExhausted));
            assert_eq!(e.inner(), Some(&status));
        }
    }

    // Our own attempt timeout: 3 invocations.
    let p = three_x_exp();
    let calls = AtomicU32::new(0);
    let e = p
        .call_with(&HttpClassifier, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<(), StatusCode>(())
            }
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));

    // Connection refused or reset: 3 invocations each.
    for kind in [
        std::io::ErrorKind::ConnectionRefused,
        std::io::ErrorKind::ConnectionReset,
    ] {
        let p = three_x_exp();
        let calls = AtomicU32::new(0);
        let e = p
            .call_with(&HttpClassifier, || {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Err::<(), _>(std::io::Error::from(kind)) }
            })
            .await
            .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "{kind:?}");
        assert_eq!(e.inner().unwrap().kind(), kind);
    }
}

/// The breaker's side: 5xx, 408, 429 and transport errors are failures; other 4xx are ignored.
#[test]
fn http_breaker_outcomes() {
    let c = HttpClassifier;
    for (code, outcome) in [
        (200, Outcome::Success),
        (304, Outcome::Success),
        (400, Outcome::Ignored),
        (404, Outcome::Ignored),
        (408, Outcome::Failure),
        (429, Outcome::Failure),
        (500, Outcome::Failure),
        (503, Outcome::Failure),
    ] {
        assert_eq!(
            c.outcome(&StatusCode::from_u16(code).unwrap()),
            outcome,
            "{code}"
        );
    }
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert_eq!(c.outcome(&refused), Outcome::Failure);
    assert!(c.is_transient(&refused));
}

#[test]
fn retry_after_header_in_seconds() {
    let mut h = HeaderMap::new();
    assert_eq!(retry_after(&h), None);
    h.insert("retry-after", HeaderValue::from_static("120"));
    assert_eq!(retry_after(&h), Some(Duration::from_secs(120)));
    h.insert(
        "retry-after",
        HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
    );
    assert_eq!(retry_after(&h), None);
    let resp = http::Response::builder()
        .status(503)
        .header("retry-after", "7")
        .body(())
        .unwrap();
    assert_eq!(
        HttpClassifier.retry_after(&resp),
        Some(Duration::from_secs(7))
    );
}
