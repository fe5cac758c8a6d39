use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "inventry", config = "tests/fixtures/breaker.toml")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
