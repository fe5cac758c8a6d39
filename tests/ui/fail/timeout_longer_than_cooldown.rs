use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// A probe slower than the cooldown would be taken over and its result ignored: refused.
#[circuit_breaker(threshold = 5, cooldown = "1s", timeout = "5s")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
