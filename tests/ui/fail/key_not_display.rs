use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

pub struct Host;

#[circuit_breaker(key = host)]
async fn fetch(host: &Host) -> Result<u32, MyError> {
    let _ = host;
    Ok(1)
}

fn main() {}
