//! A whole policy (breaker, retry, timeout, deadline, bulkhead, rate limit, hedging, adaptive
//! limit and throttling, in its declared order) as one tower layer.
//!
//! # Why
//! Stacking [`BreakerLayer`](crate::tower::breaker::BreakerLayer),
//! [`RetryLayer`](crate::tower::retry::RetryLayer) and
//! [`TimeoutLayer`](crate::tower::timeout::TimeoutLayer) by hand works, but the order is then
//! in the code; a [`Policy`](crate::policy::Policy) from a config file or the DSL carries its
//! order as data, with the semantics the [pipeline docs](crate::pipeline) give for each order.
//! [`PolicyLayer`] runs every call of the wrapped service through that
//! [`Pipeline`], so a service and an attribute-guarded function
//! with the same policy behave alike.
//!
//! # How
//! - As for [`RetryService`](crate::tower::retry::RetryService), requests and the service must
//!   be `Clone` (a retry sends the request again, to a clone of the service made ready first);
//!   without a retry layer in the policy each call makes exactly one attempt, with the
//!   service `poll_ready` made ready.
//! - Retries and hedges happen only if the policy is idempotent, as everywhere. A hedge sends
//!   the request again to a clone of the service made ready first, and the losers' response
//!   futures are dropped.
//! - Results are judged by a [`Classifier`] of the service's `Result<Response, Error>`
//!   ([`with_classifier`](PolicyLayer::with_classifier); by default
//!   [`AllErrors`]), responses included: with
//!   [`HttpClassifier`](crate::http::HttpClassifier) a 503 response trips the breaker and is
//!   retried, and when retry gives up on it the caller gets the last response.
//! - Errors are [`crate::Error`]: the inner error, a local rejection (breaker or bulkhead), a
//!   timeout, or a retry that gave up. The response future is boxed and `'static`.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::BreakerPolicy;
//! use breaker::policy::Policy;
//! use breaker::tower::policy::PolicyLayer;
//! use std::time::Duration;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let policy = Policy {
//!     breaker: Some(BreakerPolicy::default()),
//!     timeout: Some(Duration::from_secs(1)),
//!     ..Policy::default()
//! };
//! let svc = PolicyLayer::new(&policy)
//!     .unwrap()
//!     .layer(service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n * 2) }));
//! assert_eq!(svc.oneshot(21).await.unwrap(), 42);
//! # }
//! ```

mod future;
mod keyed;
mod layer;

pub use future::ResponseFuture;
pub use keyed::{KeyedPolicyLayer, KeyedPolicyService};
pub use layer::PolicyLayer;

use crate::classify::Classifier;
use crate::pipeline::{AllErrors, Pipeline};
use std::task::{Context, Poll};
use tower_service::Service;

/// A [`Service`] whose calls run through a [`Pipeline`]; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct PolicyService<S, C = AllErrors> {
    inner: S,
    pipeline: Pipeline,
    classifier: C,
}

impl<S, C> PolicyService<S, C> {
    pub(super) fn from_parts(inner: S, pipeline: Pipeline, classifier: C) -> Self {
        PolicyService {
            inner,
            pipeline,
            classifier,
        }
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
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

impl<S, C, Req> Service<Req> for PolicyService<S, C>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    C: Classifier<S::Response, S::Error> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = crate::Error<S::Error>;
    type Future = ResponseFuture<S::Response, S::Error>;

    /// Forwards to the inner service's `poll_ready`; takes no breaker permit or bulkhead slot
    /// (those are taken per attempt, inside the call).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        start(
            &mut self.inner,
            &self.pipeline,
            &self.classifier,
            req,
            future::Key::default(),
        )
    }
}

/// Starts a call of `req` through `pipeline` with `key`'s layers, on the ready `inner`: the
/// ready service goes with the call and `inner` becomes a fresh clone (tower's idiom).
fn start<S, Req, C>(
    inner: &mut S,
    pipeline: &Pipeline,
    classifier: &C,
    req: Req,
    key: future::Key,
) -> ResponseFuture<S::Response, S::Error>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    C: Classifier<S::Response, S::Error> + Clone + Send + Sync + 'static,
{
    let template = inner.clone();
    let ready = std::mem::replace(inner, template.clone());
    future::call(
        pipeline.clone(),
        classifier.clone(),
        ready,
        template,
        req,
        key,
    )
}
