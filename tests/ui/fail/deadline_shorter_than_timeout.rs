use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(timeout = "5s", deadline = "2s")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
