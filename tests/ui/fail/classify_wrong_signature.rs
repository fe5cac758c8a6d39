use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

fn classify(_: &String) -> breaker::Outcome {
    breaker::Outcome::Failure
}

#[circuit_breaker(classify = classify)]
async fn fetch() -> Result<u32, MyError> {
    Ok(1)
}

fn main() {}
