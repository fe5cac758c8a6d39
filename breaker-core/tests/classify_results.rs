//! Results classified, not only errors (issue 13 §1): an `Ok` value the classifier calls a
//! failure trips the breaker, is retried when transient, and is returned to the caller as
//! `Ok`; when retry gives up on one, the caller gets the last attempt's value. On tokio's
//! paused clock.
#![cfg(all(feature = "tokio", feature = "http"))]

use breaker_core::breaker::{BreakerPolicy, State};
use breaker_core::classify::{from_fn, Classifier, Nested, Outcome, Retry};
use breaker_core::clock::Clock;
use breaker_core::http::{HttpClassifier, HttpErrors};
use breaker_core::layer::Layer;
use breaker_core::pipeline::{classifier, AllErrors, Pipeline};
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use breaker_core::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

type Resp = http::Response<u32>;

fn resp(status: u16, n: u32) -> Resp {
    http::Response::builder().status(status).body(n).unwrap()
}

fn busy(after: &str, n: u32) -> Resp {
    http::Response::builder()
        .status(429)
        .header("retry-after", after)
        .body(n)
        .unwrap()
}

fn fixed(attempts: u32, delay: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        backoff: Backoff::Fixed { delay },
        jitter: Jitter::None,
    }
}

fn consecutive(n: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(n),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

fn s200(n: u32) -> Resp {
    resp(200, n)
}
fn s404(n: u32) -> Resp {
    resp(404, n)
}
fn s503(n: u32) -> Resp {
    resp(503, n)
}
fn busy_1s(n: u32) -> Resp {
    busy("1", n)
}
fn busy_2s(n: u32) -> Resp {
    busy("2", n)
}

type Script = &'static [fn(u32) -> Resp];
const DOWN: Script = &[s503];
const DOWN_THEN_UP: Script = &[s503, s200];
const MISSING: Script = &[s404];
const BUSY_THEN_UP: Script = &[busy_1s, s200];
const BUSY_LONG: Script = &[busy_2s];

/// Answers `script[n]` to the `n`-th call, numbered from 1 in the body (the last entry
/// repeats).
async fn scripted(calls: &AtomicU32, script: Script) -> Result<Resp, std::io::Error> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    Ok(script[(n as usize).min(script.len() - 1)](n + 1))
}

#[tokio::test(start_paused = true)]
async fn an_ok_503_is_a_breaker_failure_and_still_the_callers_response() {
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(consecutive(2))
        .clock(Clock::tokio())
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    for n in 1..=2 {
        let r = p
            .call_with(&HttpClassifier, || scripted(&calls, DOWN))
            .await
            .unwrap();
        assert_eq!((r.status().as_u16(), *r.body()), (503, n));
    }
    let b = p.breaker().unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().totals.unwrap().failed, 2);
    let e = p
        .call_with(&HttpClassifier, || scripted(&calls, DOWN))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Rejected(_)), "{e:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_default_classifier_counts_every_ok_a_success() {
    let p = Pipeline::builder()
        .breaker_policy(consecutive(2))
        .retry(fixed(3, Duration::from_millis(50)))
        .idempotent(true)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    for _ in 0..5 {
        let r = p.call(|| scripted(&calls, DOWN)).await;
        assert_eq!(r.unwrap().status(), 503);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5, "never retried");
    assert_eq!(p.breaker().unwrap().state(), State::Closed);
    // An error classifier judges errors only: the same.
    let errors_only = classifier(|_: &std::io::Error| Outcome::Failure, |_| true);
    let r = p.call_with(&errors_only, || scripted(&calls, DOWN)).await;
    assert_eq!(r.unwrap().status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    let r = p.call_with(&HttpErrors, || scripted(&calls, DOWN)).await;
    assert_eq!(r.unwrap().status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 7);
}

#[tokio::test(start_paused = true)]
async fn a_transient_ok_is_retried_and_the_next_result_returned() {
    let p = Pipeline::builder()
        .retry(fixed(3, Duration::from_millis(50)))
        .idempotent(true)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, DOWN_THEN_UP))
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), *r.body()), (200, 2));
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    // Not transient (a 404, a 501 is): returned after one attempt.
    calls.store(0, Ordering::SeqCst);
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, MISSING))
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), *r.body()), (404, 1));
}

/// Polly's model: a retry that gives up on a result returns the last result.
#[tokio::test(start_paused = true)]
async fn a_retry_that_gives_up_on_an_ok_returns_the_last_attempts_value() {
    let p = Pipeline::builder()
        .retry(fixed(3, Duration::from_millis(50)))
        .idempotent(true)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, DOWN))
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), *r.body()),
        (503, 3),
        "the third attempt's"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn retry_after_of_an_ok_replaces_the_backoff() {
    let p = Pipeline::builder()
        .retry(fixed(3, Duration::from_millis(50)))
        .idempotent(true)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, BUSY_THEN_UP))
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), *r.body()), (200, 2));
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

/// A `Retry-After` longer than the time left: the `Ok(429)` at once, no sleep.
#[tokio::test(start_paused = true)]
async fn retry_after_of_an_ok_beyond_the_deadline_returns_it_at_once() {
    let p = Pipeline::builder()
        .retry(fixed(3, Duration::from_millis(50)))
        .idempotent(true)
        .deadline(Duration::from_millis(500))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, BUSY_LONG))
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), *r.body()), (429, 1));
    assert_eq!(start.elapsed(), Duration::ZERO);
}

/// Without idempotency a transient `Ok` is not retried either: the pipeline is refused when
/// built (it used to build and make one attempt), and declared idempotent it retries the
/// `Ok(503)` until its attempts run out.
#[tokio::test(start_paused = true)]
async fn a_non_idempotent_call_makes_one_attempt_for_an_ok_too() {
    let retry = || Pipeline::builder().retry(fixed(3, Duration::from_millis(50)));
    let e = retry().build().unwrap_err();
    assert!(e.to_string().contains("call `.idempotent(true)`"), "{e}");
    let p = retry().idempotent(true).build().unwrap();
    let calls = AtomicU32::new(0);
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, DOWN))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// `breaker > retry`: the breaker sees the loop's result, the last `Ok(503)`, as one failure.
#[tokio::test(start_paused = true)]
async fn a_breaker_outside_retry_counts_a_given_up_ok_as_one_failure() {
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(consecutive(2))
        .clock(Clock::tokio())
        .retry(fixed(3, Duration::ZERO))
        .idempotent(true)
        .order([Layer::Breaker, Layer::Retry])
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let r = p
        .call_with(&HttpClassifier, || scripted(&calls, DOWN))
        .await
        .unwrap();
    assert_eq!(*r.body(), 3);
    let b = p.breaker().unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().totals.unwrap().failed, 1);
    p.call_with(&HttpClassifier, || scripted(&calls, DOWN))
        .await
        .unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

/// The fallback is for errors: an `Ok` the classifier calls a failure is returned, and the
/// fallback is not called.
#[tokio::test(start_paused = true)]
async fn a_failing_ok_never_runs_the_fallback() {
    let p = Pipeline::builder()
        .breaker_policy(consecutive(5))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let r = p
        .call_with_fallback(
            &HttpClassifier,
            || scripted(&calls, DOWN),
            |_| async { Ok(resp(200, 0)) },
        )
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
}

/// A closure over the whole result: its failures are retried, the rest are not.
#[tokio::test(start_paused = true)]
async fn from_fn_retries_what_it_calls_a_failure() {
    let p = Pipeline::builder()
        .retry(fixed(3, Duration::ZERO))
        .idempotent(true)
        .build()
        .unwrap();
    let negative = from_fn(|r: Result<&i32, &String>| match r {
        Ok(n) if *n < 0 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Ignored,
    });
    let calls = AtomicU32::new(0);
    let r = p
        .call_with(&negative, || {
            let n = calls.fetch_add(1, Ordering::SeqCst) as i32;
            async move { Ok::<_, String>(n - 1) }
        })
        .await;
    assert_eq!(r.unwrap(), 0, "-1 was retried, 0 returned");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    calls.store(0, Ordering::SeqCst);
    let r = p
        .call_with(&negative, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<i32, _>("not found".to_string()) }
        })
        .await;
    assert!(matches!(r, Err(Error::Inner(_))));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "an ignored error is not retried"
    );
}

/// `Nested` judges a nested layer's error as the pipeline does its own: the inner error by the
/// classifier, a rejection never retried, a timeout retried.
#[test]
fn nested_judges_a_layers_error_by_its_inner_error() {
    use breaker_core::breaker::CircuitBreaker;
    use breaker_core::timeout::{Elapsed, TimeoutKind};
    let b = CircuitBreaker::new(BreakerPolicy::default()).unwrap();
    b.force_open();
    let rejected: Error<std::io::Error> = b.try_acquire().unwrap_err().into();
    let timeout: Error<std::io::Error> = Error::Timeout(Elapsed {
        kind: TimeoutKind::Attempt,
        after: Duration::from_secs(1),
    });
    let refused = Error::Inner(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    for c in [
        &Nested(AllErrors) as &dyn Classifier<(), Error<std::io::Error>>,
        &HttpClassifier,
    ] {
        assert_eq!(c.outcome_of(Err(&rejected)), Outcome::Ignored);
        assert_eq!(c.retry_of(Err(&rejected)), Retry::No);
        assert_eq!(c.outcome_of(Err(&timeout)), Outcome::Failure);
        assert_eq!(c.retry_of(Err(&timeout)), Retry::Yes);
        assert_eq!(c.outcome_of(Err(&refused)), Outcome::Failure);
        assert_eq!(c.retry_of(Err(&refused)), Retry::Yes);
    }
    // `AllErrors` alone would retry the rejection.
    assert_eq!(
        Classifier::<(), _>::retry_of(&AllErrors, Err(&rejected)),
        Retry::Yes
    );
}
