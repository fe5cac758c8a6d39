//! One attempt under the earliest enclosing limit, and the breaker permit a call holds.

use super::ctx::Ctx;
use super::*;
use crate::breaker::Permit;
use crate::observe::{BreakerMetrics, Metered};
use crate::timeout::LazySleep;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// A breaker permit held by a call, with the counters its outcome goes to (the guard the tower
/// breaker uses too). Dropped unrecorded (the caller dropped the call's future, or the
/// operation panicked), the permit records a cancellation or a failure, and so do the
/// metrics.
pub(super) type Held<'p> = Metered<Permit<'p>, MetricsOf<'p>>;

/// What a held permit keeps of the pipeline's counters: a reference with the `metrics`
/// feature; without it the counters are zero-sized, so the permit keeps a copy and every
/// call's future carries no reference it would never read.
#[cfg(feature = "metrics")]
pub(super) type MetricsOf<'p> = &'p BreakerMetrics;
#[cfg(not(feature = "metrics"))]
pub(super) type MetricsOf<'p> = BreakerMetrics;

/// `metrics` as a held permit keeps it (see [`MetricsOf`]).
#[inline(always)]
pub(super) fn metrics_of(metrics: &BreakerMetrics) -> MetricsOf<'_> {
    #[cfg(feature = "metrics")]
    return metrics;
    #[cfg(not(feature = "metrics"))]
    return metrics.clone();
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
        // The timeout future's own lazy timer: nothing until the first `Pending`.
        pub(super) sleep: LazySleep,
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
        let (ctx, timeout) = (this.ctx, this.pipeline.timeout);
        ready!(this.sleep.poll_at(cx, || {
            **ctx = ctx.anchor(timeout);
            ctx.limit().map(|l| l.at)
        }));
        match ctx.limit() {
            Some(l) => Poll::Ready(Err(Error::Timeout(this.pipeline.elapsed(l.kind)))),
            None => unreachable!("a timer is armed only under a limit"),
        }
    }
}
