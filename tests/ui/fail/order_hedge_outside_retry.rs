use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// Each hedge would run a retry loop of its own: the order cannot work.
#[circuit_breaker(retry = "3x", hedge = "1x after 50ms", order = [hedge, retry, breaker])]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
