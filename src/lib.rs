//! placeholder
pub use breaker_core::*;
pub use breaker_macros::circuit_breaker;
