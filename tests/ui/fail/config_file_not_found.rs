use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "inventory", config = "tests/fixtures/missing.toml")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
