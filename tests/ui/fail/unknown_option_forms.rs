use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(retries = "3x exp")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(timeout_secs = "2s", keys = 10)]
async fn search() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(rate_limit = "5/s", hedging = "after 5ms", concurrency_limit = 4)]
async fn quote() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(foo = 1)]
async fn list() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
