use breaker::circuit_breaker;
use std::pin::Pin;

#[derive(Debug)]
pub struct MyError;

pub struct Client {
    calls: u32,
}

impl Client {
    #[circuit_breaker(retry = "3x")]
    async fn fetch(&mut self) -> Result<u32, MyError> {
        self.calls += 1;
        Ok(self.calls)
    }

    #[circuit_breaker(retry = "3x")]
    async fn poll_once(self: Pin<&mut Self>) -> Result<u32, MyError> {
        Ok(self.calls)
    }
}

fn main() {}
