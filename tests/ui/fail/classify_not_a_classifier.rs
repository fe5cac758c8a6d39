use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

/// Not a classifier: it implements nothing.
pub struct Rules;

#[circuit_breaker(classify = Rules)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
