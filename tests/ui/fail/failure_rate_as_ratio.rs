use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// A ratio (Polly's `FailureRatio = 0.5`) is refused: as a percent it would trip at 0.5 %.
#[circuit_breaker(failure_rate = 0.5)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(failure_rate = "half")]
async fn fetch_text() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
