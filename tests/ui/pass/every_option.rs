#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug, Clone, PartialEq)]
pub struct MyError;

fn classify(e: &MyError) -> breaker::Outcome {
    let _ = e;
    breaker::Outcome::Failure
}

fn is_transient(_: &MyError) -> bool {
    true
}

async fn cached(_: breaker::Error<MyError>) -> Result<u32, breaker::Error<MyError>> {
    Ok(0)
}

#[circuit_breaker(
    failure_rate = 50,
    window = 20,
    min_calls = 10,
    cooldown = "10s",
    half_open_probes = 2,
    retry = "3x exp jitter",
    retry_if = is_transient,
    idempotent,
    timeout = "1s",
    deadline = "5s",
    concurrency = 8,
    rate = "1000/s burst 10",
    hedge = "1x after 200ms",
    adaptive = "aimd 1..100 from 10",
    throttle = "k 2 over 1m",
    order = [bulkhead, retry, breaker, hedge, throttle, rate, adaptive, timeout],
    fallback = cached,
    classify = classify,
    name = "inventory",
)]
async fn fetch(id: u32) -> Result<u32, MyError> {
    Ok(id)
}

#[circuit_breaker(failure_rate = 25.5, window = "60s")]
async fn timed(id: u32) -> Result<u32, MyError> {
    Ok(id)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(fetch(3).await.unwrap(), 3);
        assert_eq!(timed(4).await.unwrap(), 4);
        assert!(breaker::annotated::breaker("inventory").is_some());
    });
}
