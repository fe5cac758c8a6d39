use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(policy = "search", config = "tests/fixtures/shared.toml")]
async fn search() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
