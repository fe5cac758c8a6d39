//! The timeout future.

use super::Elapsed;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::time::{Instant, Sleep};

pin_project! {
    /// A future that runs `inner` until `deadline`; at the deadline it yields
    /// `Err(Elapsed)`, and dropping it drops `inner` (which releases what `inner` holds).
    ///
    /// The inner future is polled before the deadline is checked, so an inner future that is
    /// ready at the deadline wins. The tokio timer is only created (and allocated) when
    /// `inner` first returns `Pending`.
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<F> {
        #[pin]
        inner: F,
        // Boxed and created lazily, so the future stays small on the path where the inner
        // future completes at once (no timer, no allocation).
        sleep: Option<Pin<Box<Sleep>>>,
        deadline: Instant,
        elapsed: Elapsed,
    }
}

impl<F> Timeout<F> {
    /// Runs `inner` until `deadline`; on expiry the output is `Err(elapsed)`.
    pub fn new(inner: F, deadline: Instant, elapsed: Elapsed) -> Self {
        Timeout {
            inner,
            sleep: None,
            deadline,
            elapsed,
        }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    /// # Panics
    /// If `inner` is pending and no tokio runtime with the time driver enabled is current.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.inner.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(*this.deadline)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(*this.elapsed))
    }
}
