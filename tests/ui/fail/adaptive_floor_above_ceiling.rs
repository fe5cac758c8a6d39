use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(adaptive = "aimd 50..10")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
