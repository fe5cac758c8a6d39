//! The timeout future, and the lazily armed timer it shares with the pipeline's attempts.

use super::Elapsed;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::time::{Instant, Sleep};

/// The timer of a limit, armed only when the future it guards first returns `Pending`: a
/// future that completes on its first poll never touches tokio's timer wheel, allocates
/// nothing, and (for the pipeline's lazy limits) does not even read the clock. The one timer
/// of [`Timeout`] and of the pipeline's attempts.
#[derive(Debug, Default)]
pub(crate) struct LazySleep(
    // Boxed: keeps the timer out of every future that embeds one.
    Option<Pin<Box<Sleep>>>,
);

impl LazySleep {
    /// A timer not yet armed.
    pub(crate) const fn new() -> Self {
        LazySleep(None)
    }

    /// Polls the timer, arming it first at the instant `at` returns. `None` is no limit: the
    /// timer stays unarmed (and `at` is asked again at the next poll) and this is `Pending`.
    ///
    /// # Panics
    /// When it arms the timer outside a tokio runtime with the time driver enabled.
    #[inline]
    pub(crate) fn poll_at(
        &mut self,
        cx: &mut Context<'_>,
        at: impl FnOnce() -> Option<Instant>,
    ) -> Poll<()> {
        let sleep = match &mut self.0 {
            Some(sleep) => sleep,
            None => match at() {
                Some(at) => self.0.insert(Box::pin(tokio::time::sleep_until(at))),
                None => return Poll::Pending,
            },
        };
        sleep.as_mut().poll(cx)
    }
}

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
        sleep: LazySleep,
        deadline: Instant,
        elapsed: Elapsed,
    }
}

impl<F> Timeout<F> {
    /// Runs `inner` until `deadline`; on expiry the output is `Err(elapsed)`.
    pub fn new(inner: F, deadline: Instant, elapsed: Elapsed) -> Self {
        Timeout {
            inner,
            sleep: LazySleep::new(),
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
        let deadline = *this.deadline;
        ready!(this.sleep.poll_at(cx, || Some(deadline)));
        Poll::Ready(Err(*this.elapsed))
    }
}
