use breaker::circuit_breaker;
use std::future::Future;
use std::pin::Pin;

#[derive(Debug)]
pub struct MyError;

pub struct Connection;

impl Connection {
    fn get(&self) -> u32 {
        1
    }
}

#[circuit_breaker(retry = "3x")]
fn fetch() -> Pin<Box<dyn Future<Output = Result<u32, MyError>> + Send>> {
    let conn = Connection;
    Box::pin(async move { Ok(conn.get()) })
}

fn main() {}
