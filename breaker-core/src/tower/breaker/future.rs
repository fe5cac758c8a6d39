use super::BreakerError;
use crate::breaker::{OwnedPermit, Rejected};
use crate::classify::{Classify, Outcome};
use crate::observe::BreakerMetrics;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// The response future of a [`BreakerService`](super::BreakerService). It is `'static`
    /// whenever the inner future is: it owns its breaker permit.
    ///
    /// Dropping it before it completes records a cancellation (neutral).
    pub struct ResponseFuture<F, C> {
        #[pin]
        kind: Kind<F>,
        guard: Option<Guard>,
        classifier: Option<C>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Called { #[pin] future: F },
        Rejected { rejected: Option<Rejected> },
    }
}

/// The permit and the metrics of an admitted call. Dropped without an outcome, it counts a
/// cancellation (or a failure while panicking, as the permit itself records).
struct Guard {
    permit: Option<OwnedPermit>,
    metrics: BreakerMetrics,
}

impl Guard {
    fn finish(mut self, outcome: Outcome) {
        if let Some(p) = self.permit.take() {
            p.record(outcome);
        }
        self.metrics.outcome(outcome);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.permit.take().is_some() {
            if std::thread::panicking() {
                self.metrics.outcome(Outcome::Failure);
            } else {
                self.metrics.cancelled();
            }
        }
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(super) fn admitted(
        future: F,
        permit: OwnedPermit,
        classifier: C,
        metrics: BreakerMetrics,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Called { future },
            guard: Some(Guard {
                permit: Some(permit),
                metrics,
            }),
            classifier: Some(classifier),
        }
    }

    pub(super) fn rejected(rejected: Rejected) -> Self {
        ResponseFuture {
            kind: Kind::Rejected {
                rejected: Some(rejected),
            },
            guard: None,
            classifier: None,
        }
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    C: Classify<T, E>,
{
    type Output = Result<T, BreakerError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Called { future } => {
                let result = ready!(future.poll(cx));
                if let (Some(guard), Some(classifier)) =
                    (this.guard.take(), this.classifier.as_ref())
                {
                    guard.finish(classifier.classify(&result));
                }
                Poll::Ready(result.map_err(BreakerError::Inner))
            }
            KindProj::Rejected { rejected } => Poll::Ready(Err(BreakerError::Rejected(
                rejected
                    .take()
                    .expect("ResponseFuture polled after completion"),
            ))),
        }
    }
}

impl<F, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("admitted", &self.guard.is_some())
            .finish_non_exhaustive()
    }
}
