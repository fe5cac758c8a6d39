use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(retry = "3x", idempotent = false)]
async fn create_order() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
