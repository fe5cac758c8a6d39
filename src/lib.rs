//! placeholder
pub use breaker_core::*;
