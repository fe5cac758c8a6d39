use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(scope = "sharde")]
async fn misspelled() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(scope = "quorum(0)")]
async fn zero_quorum() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(scope = "shared")]
async fn shared() -> Result<u32, MyError> {
    Ok(1)
}

#[circuit_breaker(scope = "local")]
async fn local() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
