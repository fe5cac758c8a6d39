use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(cooldown = "30 secs", timeout = "1.5s")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
