use crate::breaker::{OwnedPermit, Rejected};
use crate::classify::Classifier;
use crate::error::Rejection;
use crate::observe::{BreakerMetrics, Metered};
use crate::Error;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// The permit of an admitted call and the counters its outcome goes to: the pipeline's guard,
/// with an owned permit.
type Guard = Metered<Option<OwnedPermit>, BreakerMetrics>;

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

impl<F, C> ResponseFuture<F, C> {
    pub(super) fn admitted(
        future: F,
        permit: OwnedPermit,
        classifier: C,
        metrics: BreakerMetrics,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Called { future },
            guard: Some(Metered {
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
    C: Classifier<T, E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Called { future } => {
                let result = ready!(future.poll(cx));
                if let (Some(mut guard), Some(classifier)) =
                    (this.guard.take(), this.classifier.as_ref())
                {
                    guard.record(classifier.outcome_of(result.as_ref()));
                }
                Poll::Ready(result.map_err(Error::Inner))
            }
            KindProj::Rejected { rejected } => {
                let rejected = rejected
                    .take()
                    .expect("ResponseFuture polled after completion");
                Poll::Ready(Err(Error::Rejected(Rejection::Breaker(rejected))))
            }
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
