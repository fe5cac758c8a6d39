use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(cooldown = "10s", threshold = 3, cooldown = "20s")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
