//! `#[circuit_breaker(classify = http)]`: the standard HTTP rules through the attribute, for
//! `Ok` responses and `Err` errors, `Retry-After` included (issue 13 §1). The breaker tests call
//! a real HTTP server on loopback with reqwest; the `Retry-After` tests run on tokio's paused
//! clock with responses built in the process, so their waits are exact.
#![cfg(feature = "reqwest")]

use breaker::breaker::State;
use breaker::circuit_breaker;
use breaker::http::{HttpClassifier, ResponseExt};
use breaker::Error;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A loopback server answering every request with `status`; returns its base URL and a count
/// of the requests it answered.
async fn server(status: u16) -> (String, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&hits);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_: Request<Incoming>| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async move {
                        let mut resp = Response::new(Full::new(Bytes::from_static(b"down")));
                        *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (base, hits)
}

#[circuit_breaker(name = "http_ok_503", threshold = 3, cooldown = "30s", classify = http)]
async fn get_response(
    client: &reqwest::Client,
    url: &str,
) -> Result<reqwest::Response, reqwest::Error> {
    client.get(url).send().await
}

/// reqwest returns `Ok(response)` for a 503: with `classify = http` each one is a breaker
/// failure, the caller still gets the response, and the third opens the breaker.
#[tokio::test]
async fn ok_503_responses_trip_the_breaker_and_are_returned() {
    let (base, hits) = server(503).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let resp = get_response(&client, &base).await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.text().await.unwrap(), "down");
    }
    let breaker = breaker::annotated::breaker("http_ok_503").unwrap();
    assert_eq!(breaker.state(), State::Open);
    for _ in 0..5 {
        assert!(matches!(
            get_response(&client, &base).await,
            Err(Error::Rejected(_))
        ));
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "rejected calls never reach the server"
    );
}

#[circuit_breaker(name = "http_ok_404", threshold = 3, cooldown = "30s", classify = http)]
async fn get_missing(
    client: &reqwest::Client,
    url: &str,
) -> Result<reqwest::Response, reqwest::Error> {
    client.get(url).send().await
}

/// A 404 is ignored by the breaker: ten of them leave it closed, every one reaches the server.
#[tokio::test]
async fn ok_404_responses_are_ignored() {
    let (base, hits) = server(404).await;
    let client = reqwest::Client::new();
    for _ in 0..10 {
        assert_eq!(get_missing(&client, &base).await.unwrap().status(), 404);
    }
    let breaker = breaker::annotated::breaker("http_ok_404").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().totals.unwrap().ignored, 10);
    assert_eq!(hits.load(Ordering::SeqCst), 10);
}

#[circuit_breaker(name = "http_text_503", threshold = 3, cooldown = "30s", classify = http)]
async fn get_text(client: &reqwest::Client, url: &str) -> Result<String, reqwest::Error> {
    client
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

/// A function that reads the body (`Ok` is a `String`, without a status) is judged by its
/// errors: `error_for_status` makes the 503 one, and the breaker opens.
#[tokio::test]
async fn errors_for_status_trip_the_breaker() {
    let (base, hits) = server(503).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let e = get_text(&client, &base).await.unwrap_err();
        assert_eq!(
            e.inner().and_then(reqwest::Error::status),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
    }
    assert!(matches!(
        get_text(&client, &base).await,
        Err(Error::Rejected(_))
    ));
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

/// Answers of a scripted server built in the process: the `n`-th call gets `script[n]`
/// (`(status, Retry-After)`), the last entry repeats.
fn scripted(script: &[(u16, Option<&str>)], calls: &AtomicU32) -> http::Response<&'static str> {
    let n = calls.fetch_add(1, Ordering::SeqCst) as usize;
    let (status, after) = script[n.min(script.len() - 1)];
    let mut b = http::Response::builder().status(status);
    if let Some(after) = after {
        b = b.header("retry-after", after);
    }
    b.body("body").unwrap()
}

const BUSY_THEN_OK: &[(u16, Option<&str>)] = &[(429, Some("1")), (200, None)];
static BUSY_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 50, retry = "3x fixed 50ms", classify = http)]
async fn busy_response() -> Result<http::Response<&'static str>, std::io::Error> {
    Ok(scripted(BUSY_THEN_OK, &BUSY_CALLS))
}

/// A 429 returned as `Ok` with `Retry-After: 1` under `"3x fixed 50ms"`: the next attempt comes
/// 1 s later, not 50 ms, and its 200 is the result.
#[tokio::test(start_paused = true)]
async fn retry_after_of_an_ok_429_is_honoured_through_the_attribute() {
    let start = Instant::now();
    let resp = busy_response().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(BUSY_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

const ALWAYS_BUSY: &[(u16, Option<&str>)] = &[(503, None)];
static GIVE_UP_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 50, retry = "3x fixed 50ms", classify = http)]
async fn always_busy() -> Result<http::Response<&'static str>, std::io::Error> {
    Ok(scripted(ALWAYS_BUSY, &GIVE_UP_CALLS))
}

/// When retry gives up on a failing `Ok`, the caller gets the last response, as Polly returns
/// the last result: 3 attempts, two 50 ms sleeps, `Ok(503)`.
#[tokio::test(start_paused = true)]
async fn a_retry_that_gives_up_on_an_ok_returns_the_last_response() {
    let start = Instant::now();
    let resp = always_busy().await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(GIVE_UP_CALLS.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

/// The `reqwest::Response` of a scripted answer, as `send()` would return it.
fn reqwest_response(script: &[(u16, Option<&str>)], calls: &AtomicU32) -> reqwest::Response {
    reqwest::Response::from(scripted(script, calls))
}

static KEPT_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 50, retry = "3x fixed 50ms", classify = http)]
async fn text_keeping_retry_after() -> Result<String, reqwest::Error> {
    let resp = reqwest_response(BUSY_THEN_OK, &KEPT_CALLS);
    resp.error_for_status_with_retry_after()?.text().await
}

/// `error_for_status_with_retry_after` keeps the hint that `error_for_status` loses: the
/// second attempt comes after the server's 1 s.
#[tokio::test(start_paused = true)]
async fn retry_after_survives_error_for_status_with_retry_after() {
    let start = Instant::now();
    assert_eq!(text_keeping_retry_after().await.unwrap(), "body");
    assert_eq!(KEPT_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

static LOST_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 50, retry = "3x fixed 50ms", classify = http)]
async fn text_losing_retry_after() -> Result<String, reqwest::Error> {
    let resp = reqwest_response(BUSY_THEN_OK, &LOST_CALLS);
    resp.error_for_status()?.text().await
}

/// Plain `error_for_status` drops the header: the backoff's 50 ms is all the wait. (Why the
/// helper exists; the status alone still makes the 429 transient.)
#[tokio::test(start_paused = true)]
async fn plain_error_for_status_loses_retry_after() {
    let start = Instant::now();
    assert_eq!(text_losing_retry_after().await.unwrap(), "body");
    assert_eq!(LOST_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(50));
}

/// A classifier value (`classify = expr`) and `retry_if` together: the value judges `Ok`
/// responses, `retry_if` says which errors are transient.
fn never(_: &std::io::Error) -> bool {
    false
}

static VALUE_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(threshold = 50, retry = "3x fixed 50ms", classify = HttpClassifier, retry_if = never)]
async fn value_and_retry_if(fail: bool) -> Result<http::Response<&'static str>, std::io::Error> {
    if fail {
        VALUE_CALLS.fetch_add(1, Ordering::SeqCst);
        return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    }
    Ok(scripted(BUSY_THEN_OK, &VALUE_CALLS))
}

#[tokio::test(start_paused = true)]
async fn a_classifier_value_and_retry_if_combine() {
    // A transport error is transient to `HttpClassifier`, but `retry_if` says no: one attempt.
    assert!(matches!(
        value_and_retry_if(true).await,
        Err(Error::Inner(_))
    ));
    assert_eq!(VALUE_CALLS.load(Ordering::SeqCst), 1);
    // An `Ok(429)` is the classifier's to judge: retried after its `Retry-After`.
    VALUE_CALLS.store(0, Ordering::SeqCst);
    let start = Instant::now();
    assert_eq!(value_and_retry_if(false).await.unwrap().status(), 200);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}
