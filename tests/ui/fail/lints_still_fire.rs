#![deny(unused_variables, unused_mut)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;


#[circuit_breaker(threshold = 5, retry = "3x")]
async fn fetch(id: u64) -> Result<u64, MyError> {
    let mut unused = 1;
    Ok(id)
}

fn main() {}
