use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// A rate rule over a count window ("the last 100 calls") has no order across the replicas of
// a fleet: refused under a shared scope, at the window, naming the fix.
#[circuit_breaker(failure_rate = 50, window = 100, scope = "shared")]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
