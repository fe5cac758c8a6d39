use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

pub struct Client;

impl Client {
    #[circuit_breaker(retry = "3x")]
    async fn fetch(self) -> Result<u32, MyError> {
        let _ = self;
        Ok(1)
    }
}

fn main() {}
