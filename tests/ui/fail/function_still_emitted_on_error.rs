use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(threshold = 0)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

async fn caller() -> Result<u32, MyError> {
    // Only the attribute's error is reported: `fetch` still exists, unwrapped.
    fetch().await
}

fn main() {
    let _ = caller();
}
