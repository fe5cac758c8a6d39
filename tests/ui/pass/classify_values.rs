//! Every form of `classify = ..`: the HTTP switch on functions with and without a response in
//! `Ok` (and in a generic function), a classifier value of the library or of one's own, an
//! expression, and a function over errors together with `retry_if`.
#![deny(warnings)]
use breaker::circuit_breaker;
use breaker::classify::{from_fn, Classifier, Outcome, Retry};

#[circuit_breaker(classify = http)]
async fn response(client: &reqwest::Client) -> Result<reqwest::Response, reqwest::Error> {
    client.get("http://127.0.0.1:1/").send().await
}

#[circuit_breaker(classify = http, retry = "3x")]
async fn text(client: &reqwest::Client) -> Result<String, reqwest::Error> {
    client
        .get("http://127.0.0.1:1/")
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

/// A body type without a status: errors only.
pub struct Stock(pub u32);

#[circuit_breaker(classify = http)]
async fn stock(client: &reqwest::Client) -> Result<Stock, reqwest::Error> {
    let n = client
        .get("http://127.0.0.1:1/")
        .send()
        .await?
        .text()
        .await?
        .len();
    Ok(Stock(u32::try_from(n).unwrap_or(u32::MAX)))
}

#[circuit_breaker(classify = http)]
async fn generic<T: Send>(value: T) -> Result<T, std::io::Error> {
    Ok(value)
}

#[circuit_breaker(classify = breaker::http::HttpClassifier)]
async fn value(status: u16) -> Result<http::Response<()>, std::io::Error> {
    Ok(http::Response::builder().status(status).body(()).unwrap())
}

/// A classifier of one's own: a negative answer is a failure, worth retrying.
pub struct Negative;

impl<E> Classifier<i32, E> for Negative {
    fn outcome_of(&self, result: Result<&i32, &E>) -> Outcome {
        match result {
            Ok(n) if *n < 0 => Outcome::Failure,
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
    fn retry_of(&self, result: Result<&i32, &E>) -> Retry {
        match result {
            Ok(n) if *n >= 0 => Retry::No,
            _ => Retry::Yes,
        }
    }
}

#[circuit_breaker(classify = Negative, retry = "3x")]
async fn own(n: i32) -> Result<i32, std::io::Error> {
    Ok(n)
}

#[circuit_breaker(classify = from_fn(|r: Result<&i32, &std::io::Error>| match r {
    Ok(_) => Outcome::Success,
    Err(_) => Outcome::Ignored,
}))]
async fn expression(n: i32) -> Result<i32, std::io::Error> {
    Ok(n)
}

fn outcome(_: &std::io::Error) -> Outcome {
    Outcome::Ignored
}

fn transient(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::ConnectionRefused
}

#[circuit_breaker(classify = outcome, retry_if = transient, retry = "3x")]
async fn functions(n: i32) -> Result<i32, std::io::Error> {
    Ok(n)
}

#[circuit_breaker(classify = http, retry_if = transient, retry = "3x")]
async fn http_with_retry_if(n: i32) -> Result<i32, std::io::Error> {
    Ok(n)
}

pub fn main() {
    let client = reqwest::Client::new();
    let _ = (
        response(&client),
        text(&client),
        stock(&client),
        generic(1u8),
    );
    let _ = (
        value(200),
        own(1),
        expression(1),
        functions(1),
        http_with_retry_if(1),
    );
}
