//! [tower](https://docs.rs/tower) middleware built from this crate's policies (feature `tower`).
//!
//! One module per policy, laid out like tower's own (`mod.rs` the service, `layer.rs`,
//! `future.rs`):
//!
//! - [`breaker`]: [`BreakerLayer`](breaker::BreakerLayer) /
//!   [`BreakerService`](breaker::BreakerService), a circuit breaker around any `Service`.
//! - [`retry`]: [`RetryLayer`](retry::RetryLayer) / [`RetryService`](retry::RetryService),
//!   built from a [`RetryPolicy`](crate::retry::RetryPolicy) (requests must be `Clone`).
//! - [`timeout`]: [`TimeoutLayer`](timeout::TimeoutLayer) /
//!   [`TimeoutService`](timeout::TimeoutService), built from a `Duration`.
//! - [`policy`]: [`PolicyLayer`](policy::PolicyLayer) / [`PolicyService`](policy::PolicyService),
//!   a whole [`Policy`](crate::policy::Policy) (every layer, in its order) as one layer.
//!
//! `retry`, `timeout` and `policy` run on the pipeline's own code (the same backoff, timeout
//! future and errors) and need the `tokio` feature too; their errors are [`crate::Error`].

pub mod breaker;
#[cfg(feature = "tokio")]
pub mod policy;
#[cfg(feature = "tokio")]
pub mod retry;
#[cfg(feature = "tokio")]
pub mod timeout;
