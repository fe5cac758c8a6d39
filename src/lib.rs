//! placeholder
pub use breaker_core::*;
#[doc = include_str!("circuit_breaker.md")]
pub use breaker_macros::circuit_breaker;
