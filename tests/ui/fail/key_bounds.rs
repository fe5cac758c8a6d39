use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(max_keys = 100, key_idle = "5m")]
async fn without_key(host: &str) -> Result<u32, MyError> {
    let _ = host;
    Ok(1)
}

#[circuit_breaker(key = host, max_keys = 0, key_idle = "0s")]
async fn zero(host: &str) -> Result<u32, MyError> {
    let _ = host;
    Ok(1)
}

#[circuit_breaker(key = host, key_idle = "10 minutes")]
async fn bad_duration(host: &str) -> Result<u32, MyError> {
    let _ = host;
    Ok(1)
}

fn main() {}
