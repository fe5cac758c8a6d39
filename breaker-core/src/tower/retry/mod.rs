//! Retry as tower middleware, with the pipeline's backoff, jitter and retry budget.
//!
//! # Why
//! tower's own `Retry` leaves the schedule to a hand-written `Policy`. This one is the same
//! retry layer as a [`Pipeline`](crate::pipeline::Pipeline)'s (the same [`RetryPolicy`](crate::retry::RetryPolicy), the
//! same capped and jittered delays, the same [`RetryBudget`](crate::retry::RetryBudget) and
//! `Retry-After` handling; there is no second
//! implementation of backoff), so a service and an attribute-guarded function configured
//! alike behave alike.
//!
//! # How
//! [`RetryLayer`] wraps a service in a [`RetryService`].
//!
//! - **Requests must be `Clone`**: every attempt sends its own clone of the request, because
//!   `Service::call` consumes it. For HTTP, that means a request type whose body can be
//!   cloned (a buffered body), not a stream. The service must be `Clone` too: the first
//!   attempt uses the service that `poll_ready` made ready, each retry a clone of it, made
//!   ready before it is called.
//! - **Idempotency**: adding the layer declares the requests idempotent; every attempt the
//!   policy allows is made. Keep non-idempotent requests out of it.
//! - **Which results are retried**: with the default [`AllErrors`], every error of the inner
//!   service (its `poll_ready` or its response) is transient and every response final;
//!   choose with [`RetryLayer::with_classifier`] (a
//!   [`Classifier`](crate::classify::Classifier) of responses and errors:
//!   [`HttpClassifier`](crate::http::HttpClassifier) retries 5xx, 408 and 429 responses after
//!   their `Retry-After`, and when it gives up the caller gets the last response).
//! - **Around a layer of this crate** (a `BreakerLayer`, a `TimeoutLayer`), the inner error is
//!   that layer's [`crate::Error`]: `HttpClassifier` judges it by its inner error, and
//!   [`Nested`](crate::classify::Nested) adapts any classifier to it; both never retry a
//!   breaker's rejection. `AllErrors` would retry it. Errors are returned as [`crate::Error`]:
//!   [`Error::Inner`](crate::Error::Inner) when no retry was wanted, and
//!   [`Error::GaveUp`](crate::Error::GaveUp) (attempts made, reason, last error) when the
//!   attempts ran out or the budget refused.
//! - **`poll_ready`** forwards to the inner service. The response future is boxed and `'static`.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::retry::{Backoff, Jitter, RetryPolicy};
//! use breaker::tower::retry::RetryLayer;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let calls = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&calls);
//! let layer = RetryLayer::new(RetryPolicy {
//!     max_attempts: 3,
//!     backoff: Backoff::Fixed { delay: Duration::ZERO },
//!     jitter: Jitter::None,
//! })
//! .unwrap();
//! let svc = layer.layer(service_fn(move |n: u32| {
//!     // Fails twice, then answers.
//!     let call = counter.fetch_add(1, Ordering::SeqCst);
//!     async move { if call < 2 { Err("busy") } else { Ok(n) } }
//! }));
//! assert_eq!(svc.oneshot(7).await.unwrap(), 7);
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! # }
//! ```

mod layer;

pub use super::policy::ResponseFuture;
pub use layer::RetryLayer;

use crate::pipeline::AllErrors;

/// A [`Service`](tower_service::Service) whose calls are retried; see the
/// [module docs](self). It is a [`PolicyService`](super::policy::PolicyService) whose pipeline
/// has the retry layer alone: one service type, one way to run a call through a pipeline.
pub type RetryService<S, C = AllErrors> = super::policy::PolicyService<S, C>;
