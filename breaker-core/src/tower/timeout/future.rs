use crate::observe::TimeoutMetrics;
use crate::timeout::Timeout;
use crate::Error;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// The response future of a [`TimeoutService`](super::TimeoutService): the inner future
    /// under the pipeline's [`Timeout`], counting a timeout in the metrics as the pipeline does.
    /// `'static` whenever the inner future is.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: Timeout<F>,
        metrics: TimeoutMetrics,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: Timeout<F>, metrics: TimeoutMetrics) -> Self {
        ResponseFuture { inner, metrics }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(match ready!(this.inner.poll(cx)) {
            Ok(result) => result.map_err(Error::Inner),
            Err(elapsed) => {
                this.metrics.elapsed();
                Err(Error::Timeout(elapsed))
            }
        })
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
