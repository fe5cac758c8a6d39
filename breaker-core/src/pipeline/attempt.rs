//! One attempt under the earliest enclosing limit, and the breaker permit a call holds.

use super::ctx::Ctx;
use super::*;
use crate::breaker::Permit;
use crate::classify::Outcome;
use crate::observe::BreakerMetrics;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::time::Sleep;

/// A breaker permit held by a call, with the counters its outcome goes to.
pub(super) struct Held<'p> {
    pub(super) permit: Permit<'p>,
    pub(super) metrics: &'p BreakerMetrics,
}

impl Held<'_> {
    /// Records `outcome` in the breaker and the metrics, unless already recorded.
    #[inline(always)]
    pub(super) fn record(&mut self, outcome: Outcome) {
        if self.permit.record_in_place(outcome) {
            self.metrics.outcome(outcome);
        }
    }
}

/// Dropped unrecorded (the caller dropped the call's future, or the operation panicked):
/// the permit records a cancellation or a failure, and so do the metrics.
#[cfg(feature = "metrics")]
impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.permit.is_done() {
            if std::thread::panicking() {
                self.metrics.outcome(Outcome::Failure);
            } else {
                self.metrics.cancelled();
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// One invocation of the operation under the earliest enclosing limit.
    ///
    /// The operation is polled before the limit is checked, so a result ready at the limit
    /// wins. The timer (and a lazy limit's clock read) is set up only when the operation
    /// first returns `Pending`.
    pub(super) struct Attempt<'p, 'c, F> {
        #[pin]
        pub(super) inner: F,
        pub(super) pipeline: &'p Pipeline,
        // Borrowed, not copied: a copy of a context just written costs more than the
        // rest of a fast call.
        pub(super) ctx: &'c mut Ctx,
        // Boxed: keeps the timer out of every call's future.
        pub(super) sleep: Option<Pin<Box<Sleep>>>,
    }
}

impl<T, E, F: Future<Output = Result<T, E>>> Future for Attempt<'_, '_, F> {
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(r) = this.inner.poll(cx) {
            return Poll::Ready(r.map_err(Error::Inner));
        }
        let sleep = match this.sleep {
            Some(sleep) => sleep,
            None => {
                **this.ctx = this.ctx.anchor(this.pipeline.timeout);
                let Some(l) = this.ctx.limit() else {
                    return Poll::Pending;
                };
                this.sleep.insert(Box::pin(tokio::time::sleep_until(l.at)))
            }
        };
        ready!(sleep.as_mut().poll(cx));
        match this.ctx.limit() {
            Some(l) => Poll::Ready(Err(Error::Timeout(this.pipeline.elapsed(l.kind)))),
            None => unreachable!("a timer is armed only under a limit"),
        }
    }
}
