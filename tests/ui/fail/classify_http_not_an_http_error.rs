use breaker::circuit_breaker;

/// An error the HTTP rules cannot read: no status, no transport flag.
#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(classify = http)]
async fn fetch() -> Result<String, MyError> {
    Ok(String::new())
}

fn main() {}
