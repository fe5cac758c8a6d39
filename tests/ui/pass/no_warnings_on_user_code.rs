//! The expansion makes the compiler warn about nothing in the user's own code: a body that is
//! a single expression on one line (`unused_braces` once fired on it), with and without retry.
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct Down;

#[circuit_breaker(threshold = 5)]
pub async fn single_expression() -> Result<(), Down> {
    Ok(())
}

#[circuit_breaker(threshold = 5, retry = "3x")]
pub async fn single_expression_with_retry(x: u32) -> Result<u32, Down> {
    Ok(x)
}

#[circuit_breaker(threshold = 5, timeout = "1s")]
pub async fn statements_and_tail(x: u32) -> Result<u32, Down> {
    let doubled = x * 2;
    Ok(doubled)
}

pub fn main() {}

// `_`-prefixed arguments that retry copies for each attempt: no `used_underscore_binding`
// or `no_effect_underscore_binding` (clippy pedantic, tests/ui/clippy.rs) on the copies.
#[circuit_breaker(threshold = 5, retry = "3x")]
pub async fn underscore_arguments(_unused: u32, mut _also: String, x: u32) -> Result<u32, Down> {
    Ok(x)
}

#[circuit_breaker(threshold = 5)]
pub async fn underscore_arguments_once(_unused: u32, x: u32) -> Result<u32, Down> {
    Ok(x)
}

// An argument used only as the key is used.
#[circuit_breaker(threshold = 5, retry = "3x", key = tenant)]
pub async fn key_only_with_retry(tenant: &str, x: u32) -> Result<u32, Down> {
    Ok(x)
}

#[circuit_breaker(threshold = 5, key = tenant)]
pub async fn key_only(tenant: String, x: u32) -> Result<u32, Down> {
    Ok(x)
}
