use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 5)]
fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
