use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 5)]
async fn fetch() -> Result<u32, MyError> {
    Ok("not a number")
}

fn main() {}
