use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(rate = "0/s")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
