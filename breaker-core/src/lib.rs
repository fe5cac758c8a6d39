//! The runtime of the [`breaker`](https://docs.rs/breaker) crate: the circuit breaker state
//! machine, retry, timeout, bulkhead, rate limit, hedging, adaptive limit and adaptive
//! throttling layers, the policy DSL and config files.
//!
//! Most users depend on the facade crate `breaker`, which re-exports everything here together
//! with the `#[circuit_breaker]` attribute.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
// `unsafe` is allowed only where a module says so (`breaker/striped.rs`, `breaker/totals.rs`,
// the pipeline's out-of-line future), each block with its `// SAFETY:` argument.
#![deny(
    unsafe_code,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[doc(hidden)]
pub mod __private;
pub mod adaptive;
pub mod annotated;
pub mod breaker;
pub mod bulkhead;
pub mod classify;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
pub mod dsl;
pub mod error;
mod field;
pub mod hedge;
#[cfg(feature = "http")]
pub mod http;
pub mod layer;
pub mod observe;
pub mod pipeline;
pub mod policy;
pub mod ratelimit;
pub mod record;
pub mod registry;
pub mod retry;
pub mod scope;
mod sync;
mod syntax;
pub mod throttle;
pub mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

// The types most programs name, reachable from the crate root (`breaker::BreakerPolicy`
// rather than `breaker::breaker::BreakerPolicy`); each module keeps its full list.
pub use breaker::{
    BreakerBuilder, BreakerFactory, BreakerPolicy, CircuitBreaker, OwnedPermit, Permit,
    RejectReason, Rejected, SlidingWindow, Snapshot, State, Transition,
};
#[cfg(feature = "tokio")]
pub use bulkhead::Bulkhead;
pub use bulkhead::BulkheadPolicy;
pub use classify::{Classifier, Outcome};
pub use clock::{Clock, ManualClock};
#[cfg(feature = "config")]
pub use config::PolicyRegistry;
pub use error::{Error, Rejection};
#[cfg(feature = "tokio")]
pub use pipeline::{Pipeline, PipelineBuilder};
pub use policy::Policy;
pub use registry::Registry;
pub use retry::{Backoff, Jitter, RetryPolicy};
