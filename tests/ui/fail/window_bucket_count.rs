use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(failure_rate = 50, window = "60s in 0 buckets")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(failure_rate = 50, window = "60s in 10 bukets")]
async fn search() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
