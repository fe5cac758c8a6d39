use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

// Every mistake of the four layers at once, each under its literal.
#[circuit_breaker(
    rate = "100/s brust 5",
    hedge = "11x after 50ms",
    adaptive = "vegas 1..10",
    throttle = "k 0.5"
)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
