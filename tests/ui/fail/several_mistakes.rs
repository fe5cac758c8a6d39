use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 0, cooldown = "30 parsecs", retry = "3x expo", bogus = 1, order = [retry, retry])]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
