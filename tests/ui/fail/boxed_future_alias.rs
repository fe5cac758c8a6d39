use breaker::circuit_breaker;
use std::future::Future;
use std::pin::Pin;

#[derive(Debug)]
pub struct MyError;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[circuit_breaker(retry = "3x")]
fn fetch(id: u32) -> BoxFuture<'static, Result<u32, MyError>> {
    Box::pin(async move { Ok(id) })
}

fn main() {}
