//! [tower](https://docs.rs/tower) middleware built from this crate's policies (feature `tower`).
//!
//! One module per policy, laid out like tower's own (`mod.rs` the service, `layer.rs`,
//! `future.rs`):
//!
//! - [`breaker`]: [`BreakerLayer`] /
//!   [`BreakerService`], a circuit breaker around any `Service`.
//! - [`retry`]: [`RetryLayer`] / [`RetryService`],
//!   built from a [`RetryPolicy`](crate::retry::RetryPolicy) (requests must be `Clone`).
//! - [`timeout`]: [`TimeoutLayer`] /
//!   [`TimeoutService`], built from a `Duration`.
//! - [`policy`]: [`PolicyLayer`] / [`PolicyService`],
//!   a whole [`Policy`](crate::policy::Policy) (every layer, in its order) as one layer: the
//!   rate limit, hedging, adaptive limit and throttling layers come as a `Policy` with only
//!   that layer (`Policy { rate_limit: Some(..), ..Policy::default() }`) or with the rest.
//!
//! Every layer's errors are [`crate::Error`], and every layer judges results with the one
//! [`Classifier`](crate::classify::Classifier) trait of the pipeline and the attribute
//! (`with_classifier`): [`HttpClassifier`](crate::http::HttpClassifier) gives the standard HTTP
//! rules for responses (`Ok(503)` is a failure, the caller still gets it) and errors. A layer
//! outside another of this crate's sees that layer's `Error<E>`: `HttpClassifier` and
//! [`Nested`](crate::classify::Nested) judge it by its inner error and never retry a
//! rejection. `retry`, `timeout` and `policy` run on the pipeline's own code (the same backoff,
//! timeout future and permit guard) and need the `tokio` feature too; `policy` is the service
//! that `retry` is built on, never the other way round.

pub mod breaker;
#[cfg(feature = "tokio")]
pub mod policy;
#[cfg(feature = "tokio")]
pub mod retry;
#[cfg(feature = "tokio")]
pub mod timeout;

// Each layer and service from `tower` itself (`breaker::tower::BreakerLayer`), as tower
// re-exports its own middleware.
pub use self::breaker::{BreakerLayer, BreakerService};
#[cfg(feature = "tokio")]
pub use self::policy::{KeyedPolicyLayer, KeyedPolicyService, PolicyLayer, PolicyService};
#[cfg(feature = "tokio")]
pub use self::retry::{RetryLayer, RetryService};
#[cfg(feature = "tokio")]
pub use self::timeout::{TimeoutLayer, TimeoutService};
