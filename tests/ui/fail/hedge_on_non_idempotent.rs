use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// Hedging runs the function more than once at a time: not for one declared non-idempotent.
#[circuit_breaker(hedge = "1x after 50ms", idempotent = false)]
async fn create_order() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
