use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "inventory", threshold = 5, retry = "3x")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
