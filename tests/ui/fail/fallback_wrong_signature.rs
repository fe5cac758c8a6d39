use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

async fn cached(_id: u64) -> u32 {
    0
}

#[circuit_breaker(fallback = cached)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
