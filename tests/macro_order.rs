//! `#[circuit_breaker]` behaves exactly like the same pipeline built by hand, for each declared
//! order: the same invocation counts, the same errors, the same breaker state (cases BR-42,
//! BR-43). Every test runs on tokio's paused clock, so backoff sleeps take no real time.

use breaker::breaker::{BreakerPolicy, State};
use breaker::circuit_breaker;
use breaker::clock::Clock;
use breaker::layer::Layer;
use breaker::pipeline::Pipeline;
use breaker::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
struct Down;

/// What four logical calls looked like: invocations of the operation, the kind of each
/// call's error, and the breaker's state afterwards.
#[derive(Debug, PartialEq)]
struct Trace {
    invocations: u32,
    errors: Vec<&'static str>,
    state: State,
}

fn kind<E>(e: &Error<E>) -> &'static str {
    match e {
        Error::Inner(_) => "inner",
        Error::Rejected(_) => "rejected",
        Error::Timeout(_) => "timeout",
        Error::GaveUp { .. } => "gave_up",
        _ => "other",
    }
}

fn by_hand(order: [Layer; 2]) -> Pipeline {
    Pipeline::builder()
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(5),
            ..BreakerPolicy::default()
        })
        .clock(Clock::tokio())
        .retry("3x".parse().unwrap())
        .idempotent(true)
        .order(order)
        .build()
        .unwrap()
}

async fn trace_by_hand(order: [Layer; 2]) -> Trace {
    let pipeline = by_hand(order);
    let count = AtomicU32::new(0);
    let mut errors = Vec::new();
    for _ in 0..4 {
        let r: Result<(), Error<Down>> = pipeline
            .call(|| async {
                count.fetch_add(1, Ordering::SeqCst);
                Err(Down)
            })
            .await;
        errors.push(kind(&r.unwrap_err()));
    }
    Trace {
        invocations: count.load(Ordering::SeqCst),
        errors,
        state: pipeline.breaker().unwrap().state(),
    }
}

static RETRY_OUTSIDE: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 5, retry = "3x", order = [retry, breaker], name = "br42_a")]
async fn retry_outside_breaker() -> Result<(), Down> {
    RETRY_OUTSIDE.fetch_add(1, Ordering::SeqCst);
    Err(Down)
}

static BREAKER_OUTSIDE: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 5, retry = "3x", order = [breaker, retry], name = "br42_b")]
async fn breaker_outside_retry() -> Result<(), Down> {
    BREAKER_OUTSIDE.fetch_add(1, Ordering::SeqCst);
    Err(Down)
}

#[tokio::test(start_paused = true)]
async fn br_42_retry_outside_breaker_makes_5_invocations() {
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(kind(&retry_outside_breaker().await.unwrap_err()));
    }
    let annotated = Trace {
        invocations: RETRY_OUTSIDE.load(Ordering::SeqCst),
        errors,
        state: breaker::annotated::breaker("br42_a").unwrap().state(),
    };
    let expected = Trace {
        invocations: 5,
        errors: vec!["gave_up", "rejected", "rejected", "rejected"],
        state: State::Open,
    };
    assert_eq!(annotated, expected);
    assert_eq!(
        trace_by_hand([Layer::Retry, Layer::Breaker]).await,
        expected
    );
}

#[tokio::test(start_paused = true)]
async fn br_42_breaker_outside_retry_makes_12_invocations() {
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(kind(&breaker_outside_retry().await.unwrap_err()));
    }
    let annotated = Trace {
        invocations: BREAKER_OUTSIDE.load(Ordering::SeqCst),
        errors,
        state: breaker::annotated::breaker("br42_b").unwrap().state(),
    };
    let expected = Trace {
        invocations: 12,
        errors: vec!["gave_up"; 4],
        state: State::Closed,
    };
    assert_eq!(annotated, expected);
    assert_eq!(
        trace_by_hand([Layer::Breaker, Layer::Retry]).await,
        expected
    );
}

static SLOW: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(
    threshold = 2,
    timeout = "1s",
    cooldown = "10s",
    name = "timeout_breaker"
)]
async fn slow() -> Result<(), Down> {
    SLOW.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_breaker_failures_and_cooldown_follows_tokio_time() {
    assert_eq!(kind(&slow().await.unwrap_err()), "timeout");
    assert_eq!(kind(&slow().await.unwrap_err()), "timeout");
    let breaker = breaker::annotated::breaker("timeout_breaker").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(kind(&slow().await.unwrap_err()), "rejected");
    assert_eq!(SLOW.load(Ordering::SeqCst), 2);
    tokio::time::advance(Duration::from_secs(10)).await;
    // The probe is admitted (and times out again).
    assert_eq!(kind(&slow().await.unwrap_err()), "timeout");
    assert_eq!(SLOW.load(Ordering::SeqCst), 3);
}

static NOT_FOUND_FALLBACKS: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, PartialEq)]
enum ApiError {
    NotFound,
    Unavailable,
}

fn outcome(e: &ApiError) -> breaker::Outcome {
    match e {
        ApiError::NotFound => breaker::Outcome::Ignored,
        ApiError::Unavailable => breaker::Outcome::Failure,
    }
}

async fn degraded(_: Error<ApiError>) -> Result<u32, Error<ApiError>> {
    NOT_FOUND_FALLBACKS.fetch_add(1, Ordering::SeqCst);
    Ok(0)
}

#[circuit_breaker(threshold = 5, classify = outcome, fallback = degraded)]
async fn lookup(fail: Option<ApiError>) -> Result<u32, ApiError> {
    match fail {
        Some(e) => Err(e),
        None => Ok(1),
    }
}

#[tokio::test(start_paused = true)]
async fn br_45_fallback_skips_ignored_errors() {
    assert!(matches!(
        lookup(Some(ApiError::NotFound)).await,
        Err(Error::Inner(ApiError::NotFound))
    ));
    assert_eq!(NOT_FOUND_FALLBACKS.load(Ordering::SeqCst), 0);
    assert_eq!(lookup(Some(ApiError::Unavailable)).await.unwrap(), 0);
    assert_eq!(NOT_FOUND_FALLBACKS.load(Ordering::SeqCst), 1);
}

static RETRY_IF: AtomicU32 = AtomicU32::new(0);

fn transient(e: &ApiError) -> bool {
    *e == ApiError::Unavailable
}

#[circuit_breaker(threshold = 50, retry = "3x", retry_if = transient)]
async fn maybe_retried(e: ApiError) -> Result<u32, ApiError> {
    RETRY_IF.fetch_add(1, Ordering::SeqCst);
    Err(e)
}

impl Clone for ApiError {
    fn clone(&self) -> Self {
        match self {
            ApiError::NotFound => ApiError::NotFound,
            ApiError::Unavailable => ApiError::Unavailable,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn retry_if_decides_what_is_retried() {
    let _ = maybe_retried(ApiError::NotFound).await;
    assert_eq!(RETRY_IF.load(Ordering::SeqCst), 1);
    let _ = maybe_retried(ApiError::Unavailable).await;
    assert_eq!(RETRY_IF.load(Ordering::SeqCst), 4);
}

static KEYED: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 2, key = host)]
async fn per_host(host: &str) -> Result<(), Down> {
    let _ = host;
    KEYED.fetch_add(1, Ordering::SeqCst);
    Err(Down)
}

#[tokio::test(start_paused = true)]
async fn key_keeps_one_breaker_per_value() {
    for _ in 0..3 {
        let _ = per_host("a").await;
    }
    // "a" tripped after 2 failures; its third call was rejected.
    assert_eq!(KEYED.load(Ordering::SeqCst), 2);
    // "b" has its own, closed breaker.
    assert_eq!(kind(&per_host("b").await.unwrap_err()), "inner");
    assert_eq!(KEYED.load(Ordering::SeqCst), 3);
}
