//! The runtime of the [`breaker`](https://docs.rs/breaker) crate: the circuit breaker state
//! machine, retry, timeout and bulkhead layers, the policy DSL and config files.
//!
//! Most users depend on the facade crate `breaker`, which re-exports everything here together
//! with the `#[circuit_breaker]` attribute.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod __private;
pub mod annotated;
pub mod breaker;
pub mod bulkhead;
pub mod classify;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
pub mod dsl;
pub mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod layer;
pub mod observe;
pub mod pipeline;
pub mod policy;
pub mod record;
pub mod registry;
pub mod retry;
pub mod scope;
mod sync;
pub mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

pub use breaker::{CircuitBreaker, Permit, Rejected, State};
pub use classify::{Classifier, Outcome};
pub use clock::{Clock, ManualClock};
pub use error::{Error, Rejection};
#[cfg(feature = "tokio")]
pub use pipeline::Pipeline;
