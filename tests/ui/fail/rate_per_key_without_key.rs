use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(rate = "100/s burst 10 per key")]
async fn fetch(tenant: &str) -> Result<u32, MyError> {
    let _ = tenant;
    Ok(1)
}

fn main() {}
