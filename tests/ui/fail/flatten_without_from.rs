use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 5, flatten)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
