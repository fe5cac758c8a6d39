use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(key = hots)]
async fn fetch(host: &str, path: &str) -> Result<u32, MyError> {
    let _ = (host, path);
    Ok(1)
}

fn main() {}
