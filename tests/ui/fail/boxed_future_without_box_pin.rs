use breaker::circuit_breaker;
use std::future::Future;
use std::pin::Pin;

#[derive(Debug)]
pub struct MyError;

#[circuit_breaker(retry = "3x")]
fn fetch(id: u32) -> Pin<Box<dyn Future<Output = Result<u32, MyError>> + Send>> {
    let fut = async move { Ok(id) };
    Box::pin(fut)
}

fn main() {}
