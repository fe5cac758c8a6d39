//! A circuit breaker as tower middleware.
//!
//! # Why
//! A tower stack (an axum router, a tonic channel, a reqwest-like client) already has one place
//! where every request passes: a layer there protects every route or every call of a client
//! without touching handler code.
//!
//! # How
//! [`BreakerLayer`] wraps a service in a [`BreakerService`]. Every clone of the layer and of
//! the service shares the one [`CircuitBreaker`] it was made with, so probe limits and counts
//! apply across clones (case BR-03).
//!
//! - **`poll_ready`** only forwards to the inner service: it reserves **no** breaker permit and
//!   does not look at the breaker. A permit held by an idle, ready service would block a
//!   half-open breaker's probe slot for as long as the service sat idle.
//! - **`call`** asks the breaker with
//!   [`try_acquire_owned`](CircuitBreaker::try_acquire_owned). If it is rejected, the inner
//!   service is **not** called and the returned future resolves at once to
//!   [`Error::Rejected`](crate::Error::Rejected); the readiness obtained by `poll_ready` stays with the inner
//!   service for the next call. If admitted, the owned permit travels in the `'static`
//!   [`ResponseFuture`].
//! - **Errors** are the pipeline's [`crate::Error`], as for every layer of this crate: the
//!   inner service's error (its `poll_ready` or its response future) is
//!   [`Error::Inner`](crate::Error::Inner), displayed as itself; a refusal is
//!   [`Error::Rejected`](crate::Error::Rejected).
//! - **Classification.** When the inner future completes, the classifier (a
//!   [`Classifier`], by default
//!   [`AllErrors`]: `Ok` = success, `Err` = failure) turns its
//!   result into an [`Outcome`](crate::Outcome) recorded on the permit, with the permit guard
//!   of the pipeline. An HTTP client's `Ok` responses are results too:
//!   [`HttpClassifier`](crate::http::HttpClassifier) calls a 5xx, 408 or 429 response a failure
//!   and another 4xx ignored, and the caller still gets the response.
//! - **Cancellation.** Dropping the response future before it completes drops the permit:
//!   a cancellation, neutral, the half-open slot is released (case BR-13). A panic inside the
//!   inner future records a failure.
//! - **Metrics.** With the `metrics` feature, calls by outcome (including `cancelled`) and
//!   rejections by reason are counted under the breaker's name (see [`crate::observe`]).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::{BreakerPolicy, CircuitBreaker};
//! use breaker::error::Rejection;
//! use breaker::tower::breaker::BreakerLayer;
//! use breaker::Error;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let breaker = CircuitBreaker::builder(BreakerPolicy {
//!     consecutive_failures: Some(1),
//!     ..BreakerPolicy::default()
//! })
//! .name("echo")
//! .build()
//! .unwrap();
//! let layer = BreakerLayer::new(breaker);
//! let svc = layer.layer(service_fn(|n: u32| async move {
//!     if n == 0 { Err("zero") } else { Ok(n) }
//! }));
//!
//! assert_eq!(svc.clone().oneshot(1).await.unwrap(), 1);
//! assert!(matches!(svc.clone().oneshot(0).await, Err(Error::Inner("zero"))));
//! // One failure opened the breaker: the next call is rejected without calling the service.
//! assert!(matches!(
//!     svc.oneshot(2).await,
//!     Err(Error::Rejected(Rejection::Breaker(_)))
//! ));
//! # }
//! ```

mod future;
mod layer;

pub use future::ResponseFuture;
pub use layer::BreakerLayer;

use crate::breaker::CircuitBreaker;
use crate::classify::Classifier;
use crate::observe::BreakerMetrics;
use crate::pipeline::AllErrors;
use std::task::{Context, Poll};
use tower_service::Service;

/// A [`Service`] guarded by a circuit breaker; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct BreakerService<S, C = AllErrors> {
    inner: S,
    breaker: CircuitBreaker,
    classifier: C,
    metrics: BreakerMetrics,
}

impl<S> BreakerService<S> {
    /// Guards `inner` with `breaker`, classifying `Ok` as success and `Err` as failure.
    pub fn new(inner: S, breaker: CircuitBreaker) -> Self {
        let metrics = BreakerMetrics::new(breaker.name());
        BreakerService {
            inner,
            breaker,
            classifier: AllErrors,
            metrics,
        }
    }
}

impl<S, C> BreakerService<S, C> {
    /// Uses `classifier` to turn each result, responses included, into an outcome (see
    /// [`BreakerLayer::with_classifier`]).
    pub fn with_classifier<C2>(self, classifier: C2) -> BreakerService<S, C2> {
        BreakerService {
            inner: self.inner,
            breaker: self.breaker,
            classifier,
            metrics: self.metrics,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
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

impl<S, C, Req> Service<Req> for BreakerService<S, C>
where
    S: Service<Req>,
    C: Classifier<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = crate::Error<S::Error>;
    type Future = ResponseFuture<S::Future, C>;

    /// Forwards to the inner service's `poll_ready`; reserves no breaker permit.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.breaker.try_acquire_owned() {
            Ok(permit) => ResponseFuture::admitted(
                self.inner.call(req),
                permit,
                self.classifier.clone(),
                self.metrics.clone(),
            ),
            Err(rejected) => {
                self.metrics.rejected(rejected.reason());
                ResponseFuture::rejected(rejected)
            }
        }
    }
}
