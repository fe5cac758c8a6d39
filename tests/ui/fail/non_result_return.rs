use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 5)]
async fn fetch() -> u32 {
    1
}

fn main() {}
