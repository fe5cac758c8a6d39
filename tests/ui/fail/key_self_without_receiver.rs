use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(key = self.base)]
async fn fetch(id: u32) -> Result<u32, MyError> {
    Ok(id)
}

fn main() {}
