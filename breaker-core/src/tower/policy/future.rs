use crate::breaker::CircuitBreaker;
use crate::classify::Classifier;
use crate::pipeline::{KeyLayers, Pipeline};
use crate::ratelimit::RateLimiter;
use crate::Error;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

/// The response future of a [`PolicyService`](super::PolicyService) and so of a
/// [`RetryService`](crate::tower::retry::RetryService): the whole call through the pipeline,
/// every attempt and backoff sleep included. It is boxed (its type is an `async` block's) and
/// `'static`; dropping it cancels the call (a breaker inside it records nothing).
pub struct ResponseFuture<T, E> {
    inner: Pin<Box<dyn Future<Output = Result<T, Error<E>>> + Send>>,
}

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, Error<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<T, E> ResponseFuture<T, E> {
    /// A future ready with `error` at once (a key refused before the pipeline ran).
    pub(super) fn failed(error: Error<E>) -> Self
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        ResponseFuture {
            inner: Box::pin(std::future::ready(Err(error))),
        }
    }
}

/// A key's own breaker and rate limiter for one call, held by its future.
#[derive(Default)]
pub(super) struct Key {
    pub(super) breaker: Option<CircuitBreaker>,
    pub(super) rate: Option<RateLimiter>,
}

/// Runs `req` through `pipeline` on `ready`, a service whose `poll_ready` has returned
/// `Ready(Ok)`, with `key`'s layers in place of the pipeline's. The first attempt uses
/// `ready`; each further attempt a clone of `template`, made ready first. Every attempt sends a
/// clone of `req`.
pub(super) fn call<S, Req, C>(
    pipeline: Pipeline,
    classifier: C,
    ready: S,
    template: S,
    req: Req,
    key: Key,
) -> ResponseFuture<S::Response, S::Error>
where
    S: Service<Req> + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    C: Classifier<S::Response, S::Error> + Send + Sync + 'static,
    S: Clone,
{
    ResponseFuture {
        inner: Box::pin(async move {
            let mut first = Some(ready);
            let layers = KeyLayers {
                breaker: key.breaker.as_ref(),
                rate: key.rate.as_ref(),
            };
            pipeline
                .call_keyed(layers, &classifier, move || {
                    let (svc, is_ready) = match first.take() {
                        Some(svc) => (svc, true),
                        None => (template.clone(), false),
                    };
                    attempt(svc, is_ready, req.clone())
                })
                .await
        }),
    }
}

/// One attempt: readiness (unless known), then the call.
async fn attempt<S: Service<Req>, Req>(
    mut svc: S,
    is_ready: bool,
    req: Req,
) -> Result<S::Response, S::Error> {
    if !is_ready {
        poll_fn(|cx| svc.poll_ready(cx)).await?;
    }
    svc.call(req).await
}
