//! The expansion makes the compiler warn about nothing in the user's own code: a body that is
//! a single expression on one line (`unused_braces` once fired on it), with and without retry.
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct Down;

#[circuit_breaker(threshold = 5)]
pub async fn single_expression() -> Result<(), Down> { Ok(()) }

#[circuit_breaker(threshold = 5, retry = "3x")]
pub async fn single_expression_with_retry(x: u32) -> Result<u32, Down> { Ok(x) }

#[circuit_breaker(threshold = 5, timeout = "1s")]
pub async fn statements_and_tail(x: u32) -> Result<u32, Down> {
    let doubled = x * 2;
    Ok(doubled)
}

fn main() {}
