//! The future of one call: the breaker-only path, written by hand ([`BreakerOnly`]), or the
//! general path kept out of line ([`OutOfLine`]), chosen once by [`Pipeline::run`].

use super::attempt::{metrics_of, Held};
use super::runtime::Pipeline;
use crate::breaker::CircuitBreaker;
use crate::classify::Classifier;
use crate::error::Error;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project_lite::pin_project! {
    /// The future of one call ([`Pipeline::run`]): the breaker-only path or the general one.
    #[project = RunProj]
    pub(crate) enum Run<B, G> {
        BreakerOnly {
            #[pin]
            fut: B,
        },
        General {
            #[pin]
            fut: G,
        },
    }
}

impl<B: Future, G: Future<Output = B::Output>> Future for Run<B, G> {
    type Output = B::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<B::Output> {
        match self.project() {
            RunProj::BreakerOnly { fut } => fut.poll(cx),
            RunProj::General { fut } => fut.poll(cx),
        }
    }
}

/// The general path's future, its poll and its drop out of line: the breaker-only path's poll
/// and drop are small enough to be inlined into their caller, and would not be with the
/// general path's beside them in [`Run`].
pub(crate) struct OutOfLine<G> {
    inner: ManuallyDrop<G>,
}

impl<G> OutOfLine<G> {
    pub(super) fn new(inner: G) -> Self {
        OutOfLine {
            inner: ManuallyDrop::new(inner),
        }
    }
}

// The one `unsafe` of the pipeline: a pinned field whose drop is out of line, which neither
// `pin-project-lite` (no `Drop` of one's own) nor an `Option` (a move out of a pinned field)
// gives safely. Checked by the pipeline tests under valgrind's memcheck in CI.
#[allow(unsafe_code)]
impl<G: Future> Future for OutOfLine<G> {
    type Output = G::Output;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G::Output> {
        // SAFETY: `inner` is pinned when `self` is (structural pinning): it is never moved out,
        // and `drop` drops it in place.
        unsafe { self.map_unchecked_mut(|s| &mut *s.inner) }.poll(cx)
    }
}

#[allow(unsafe_code)]
impl<G> Drop for OutOfLine<G> {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: `inner` is dropped once, here, in `drop`, and nothing uses it after (the
        // struct is being dropped); it is dropped in place, as pinning requires.
        unsafe { ManuallyDrop::drop(&mut self.inner) }
    }
}

pin_project_lite::pin_project! {
    /// A call through a pipeline that is only a breaker (see [`Pipeline::run`]): what the
    /// general path does for it (metrics, the rejection, the outcome classified once, a
    /// cancellation or a panic recorded by the permit's guard), written out by hand.
    ///
    /// An `async fn` would keep the permit in its state before polling the operation; here it
    /// stays a local while the operation's first poll runs, and moves into the state only when
    /// that poll returns `Pending`. A panic in `op` or in that first poll drops the local, which
    /// records a failure, as the guard in the state does later.
    ///
    /// Polled again after it returned `Ready` (which the `Future` contract leaves open), it
    /// polls the operation's finished future again after a call that ran (an `async` block
    /// panics; otherwise the missing permit does), and after a rejection asks the breaker
    /// again: a guard
    /// (`op` in an `Option`) cost 15 instructions a call, more than a tenth of the call.
    pub(crate) struct BreakerOnly<'a, F, Fut, C: ?Sized> {
        pub(super) pipeline: &'a Pipeline,
        pub(super) breaker: &'a CircuitBreaker,
        pub(super) class: &'a C,
        pub(super) op: F,
        // `None` until the call is admitted; then the operation's one future.
        #[pin]
        pub(super) fut: Option<Fut>,
        // The permit while the operation is pending; `None` before and after.
        pub(super) held: Option<Held<'a>>,
    }
}

impl<'a, T, E, F, Fut, C> Future for BreakerOnly<'a, F, Fut, C>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    C: Classifier<T, E> + ?Sized,
{
    type Output = Result<T, Error<E>>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let (result, mut held) = match this.fut.as_mut().as_pin_mut() {
            None => {
                let permit = match this.breaker.try_acquire() {
                    Ok(permit) => permit,
                    Err(r) => return Poll::Ready(Err(this.pipeline.rejected(r))),
                };
                let held = Held {
                    permit,
                    metrics: metrics_of(&this.pipeline.metrics),
                };
                // The operation is called only once admitted, as on the general path.
                this.fut.set(Some((this.op)()));
                let fut = this.fut.as_pin_mut().expect("just set");
                match fut.poll(cx) {
                    Poll::Ready(result) => (result, held),
                    Poll::Pending => {
                        *this.held = Some(held);
                        return Poll::Pending;
                    }
                }
            }
            Some(fut) => {
                let result = ready!(fut.poll(cx));
                let held = this
                    .held
                    .take()
                    .expect("`BreakerOnly` polled after completion");
                (result, held)
            }
        };
        held.record(this.class.outcome_of(result.as_ref()));
        Poll::Ready(result.map_err(Error::Inner))
    }
}
