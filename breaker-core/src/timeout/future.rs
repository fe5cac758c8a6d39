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
    /// ready at the deadline wins. The tokio timer is only registered when `inner` first
    /// returns `Pending`.
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Option<Sleep>,
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
        let mut this = self.project();
        if let Poll::Ready(v) = this.inner.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if this.sleep.is_none() {
            this.sleep
                .set(Some(tokio::time::sleep_until(*this.deadline)));
        }
        let sleep = this.sleep.as_pin_mut().expect("set above");
        ready!(sleep.poll(cx));
        Poll::Ready(Err(*this.elapsed))
    }
}
