//! Retry as tower middleware, with the pipeline's backoff, jitter and retry budget.
//!
//! # Why
//! tower's own `Retry` leaves the schedule to a hand-written `Policy`. This one is the same
//! retry layer as a [`Pipeline`]'s (the same [`RetryPolicy`](crate::retry::RetryPolicy), the
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
//! - **Which errors are retried**: with the default [`AllErrors`], every error of the inner
//!   service (its `poll_ready` or its response) is transient; choose with
//!   [`RetryLayer::with_classifier`]. Errors are returned as [`crate::Error`]:
//!   [`Error::Inner`](crate::Error::Inner) when no retry was wanted, and
//!   [`Error::GaveUp`](crate::Error::GaveUp) (attempts made, reason, last error) when the
//!   attempts ran out or the budget refused.
//! - **`poll_ready`** forwards to the inner service. The response future is boxed and `'static`.
//!
//! ```
//! use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
//! use breaker_core::tower::retry::RetryLayer;
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

mod future;
mod layer;

pub use future::ResponseFuture;
pub use layer::RetryLayer;

pub(crate) use future::call;

use crate::pipeline::{AllErrors, ErrorClassifier, Pipeline};
use std::task::{Context, Poll};
use tower_service::Service;

/// A [`Service`] whose calls are retried; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct RetryService<S, C = AllErrors> {
    inner: S,
    pipeline: Pipeline,
    classifier: C,
}

impl<S, C> RetryService<S, C> {
    pub(super) fn from_parts(inner: S, pipeline: Pipeline, classifier: C) -> Self {
        RetryService {
            inner,
            pipeline,
            classifier,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req> Service<Req> for RetryService<S, C>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    C: ErrorClassifier<S::Error> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = crate::Error<S::Error>;
    type Future = ResponseFuture<S::Response, S::Error>;

    /// Forwards to the inner service's `poll_ready`.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The ready service goes with the call; `self` keeps a fresh clone (tower's idiom).
        let template = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, template.clone());
        call(
            self.pipeline.clone(),
            self.classifier.clone(),
            ready,
            template,
            req,
        )
    }
}
