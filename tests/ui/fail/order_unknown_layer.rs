use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(retry = "3x", order = [retry, breakr])]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
