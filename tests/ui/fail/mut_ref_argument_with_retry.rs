use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(retry = "3x")]
async fn fetch(buf: &mut Vec<u8>) -> Result<u32, MyError> {
    buf.push(1);
    Ok(1)
}

fn main() {}
