//! A timeout as tower middleware, with the pipeline's timeout future and error.
//!
//! # Why
//! The same limit as a [`Pipeline`](crate::pipeline::Pipeline)'s timeout layer, reporting the
//! same [`Error::Timeout`](crate::Error::Timeout) (`attempt timed out after 1s`), so a stack
//! that puts a [`BreakerLayer`](crate::tower::breaker::BreakerLayer) outside it sees a timeout
//! as an error of the call, and a [`RetryLayer`](crate::tower::retry::RetryLayer) outside it
//! retries timed-out attempts.
//!
//! # How
//! [`TimeoutLayer`] wraps a service in a [`TimeoutService`].
//!
//! - The limit starts when `call` is called (not in `poll_ready`: waiting for readiness is
//!   not limited, as in tower's `Timeout`).
//! - At the limit the inner response future is **dropped** (so what it holds is released) and
//!   the call resolves to [`Error::Timeout`](crate::Error::Timeout) with
//!   [`TimeoutKind::Attempt`]. An inner future ready at
//!   the limit wins. The timer is created only if the inner future is not ready on its first
//!   poll.
//! - Other errors are [`Error::Inner`](crate::Error::Inner). The response future is not
//!   boxed.
//! - With the `metrics` feature, each timeout is counted in
//!   [`TIMEOUTS_TOTAL`](crate::observe::TIMEOUTS_TOTAL) (`kind="attempt"`), as a pipeline
//!   counts its own, under the name given to [`TimeoutLayer::name`] (`""` by default).
//!
//! # Panics
//! A call that is still pending after its first poll needs a tokio runtime with the time
//! driver enabled.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::tower::timeout::TimeoutLayer;
//! use breaker::Error;
//! use std::time::Duration;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let layer = TimeoutLayer::new(Duration::from_secs(1)).unwrap();
//! let svc = layer.layer(service_fn(|d: u64| async move {
//!     tokio::time::sleep(Duration::from_secs(d)).await;
//!     Ok::<_, std::io::Error>(d)
//! }));
//! assert_eq!(svc.clone().oneshot(0).await.unwrap(), 0);
//! assert!(matches!(svc.oneshot(5).await, Err(Error::Timeout(_))));
//! # }
//! ```

mod future;
mod layer;

pub use future::ResponseFuture;
pub use layer::TimeoutLayer;

use crate::observe::TimeoutMetrics;
use crate::timeout::{Elapsed, Timeout, TimeoutKind};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tower_service::Service;

/// A [`Service`] whose calls are limited in time; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct TimeoutService<S> {
    inner: S,
    timeout: Duration,
    metrics: TimeoutMetrics,
}

impl<S> TimeoutService<S> {
    pub(super) fn from_parts(inner: S, timeout: Duration, metrics: TimeoutMetrics) -> Self {
        TimeoutService {
            inner,
            timeout,
            metrics,
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

impl<S, Req> Service<Req> for TimeoutService<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = crate::Error<S::Error>;
    type Future = ResponseFuture<S::Future>;

    /// Forwards to the inner service's `poll_ready` (not limited).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let now = Instant::now();
        // A limit too far to represent never elapses in practice: 30 years, as tokio does.
        let deadline = now
            .checked_add(self.timeout)
            .unwrap_or_else(|| now + Duration::from_secs(86400 * 365 * 30));
        let elapsed = Elapsed {
            kind: TimeoutKind::Attempt,
            after: self.timeout,
        };
        ResponseFuture::new(
            Timeout::new(self.inner.call(req), deadline, elapsed),
            self.metrics.clone(),
        )
    }
}
