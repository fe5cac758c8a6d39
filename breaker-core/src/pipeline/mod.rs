//! A pipeline: retry, circuit breaker, timeout and bulkhead stacked around an async call in a
//! declared order, with an optional fallback outside them all.
//!
//! # Why the order matters
//! The same four layers mean different things in different nestings. Resilience4j's Spring
//! default put retry outside the breaker, so one logical call of 3 attempts counted as 3
//! breaker failures, and retries kept hitting an open breaker (case BR-42). Here the order is
//! always explicit data, checked when the pipeline is built: a layer named twice, an unknown
//! layer, a layer in the order but not configured, or a configured layer left out of an
//! explicit order are [`BuildError`]s.
//!
//! # The default order: `bulkhead > retry > breaker > timeout` (outermost first)
//! - **bulkhead outermost**: the concurrency limit counts *logical* calls. A call holds one
//!   slot across all its attempts and backoff sleeps, so retries cannot multiply the load the
//!   bulkhead admits, and a full bulkhead rejects before any work is done.
//! - **retry outside breaker**: the breaker sees every attempt, so it learns about an outage at
//!   the rate attempts fail and trips early; an open breaker's rejection is never retried, so
//!   retry stops at once instead of hammering it (BR-42 (a)).
//! - **timeout innermost**: each attempt gets its own limit, and a timed-out attempt is a
//!   breaker failure and is retried like any transient error.
//!
//! # What each layer sees, in any order
//! A layer sees the result of everything nested inside it.
//!
//! - **Retry outside the breaker** (`retry > breaker`): one outcome per *attempt*. With
//!   `consecutive_failures = 5` and 3 attempts per call, the breaker trips at the 5th attempt,
//!   during the 2nd call; that call's 6th attempt is rejected and returned as
//!   [`Error::Rejected`]. 4 calls make 5 invocations of the operation.
//! - **Breaker outside retry** (`breaker > retry`): one outcome per *logical call*, the
//!   result of the whole retry loop (an [`Error::GaveUp`] is a failure if its last error is).
//!   4 calls of 3 failed attempts make 12 invocations and 4 failures, and the breaker (5 in a
//!   row) stays closed. The breaker holds its permit for the whole loop, backoff included:
//!   mind a slow-call rule and the half-open probe limit.
//! - **Timeout inside retry**: a limit per attempt. **Timeout outside retry**: one limit for all
//!   attempts and sleeps; retry never starts a sleep that would end past it.
//! - **Timeout and breaker**: a timeout raised by the pipeline is a breaker failure whether the
//!   timeout layer is inside or outside the breaker: limits are enforced on the attempt itself,
//!   inside every permit, so the breaker records the failure before its permit is released.
//!   When the caller drops the call's future, nothing is recorded (a cancellation).
//! - **Bulkhead inside retry**: each attempt takes and returns a slot; a full bulkhead is a
//!   rejection and is not retried. **Bulkhead inside the breaker**: a full bulkhead is not a
//!   failure of the dependency; the breaker records it as ignored.
//! - **Total deadline** ([`PipelineBuilder::deadline`]): not a layer of the order; it starts
//!   when the call starts and covers everything, bulkhead wait included.
//! - **Fallback**: always outermost, outside the deadline too. It runs on a local rejection,
//!   on a timeout, and on an error the classifier calls a breaker failure, never on one it
//!   calls ignored (case BR-45); see [`FallbackOn`].
//!
//! # Retry rules
//! - "3x" is 3 attempts in total. Attempts beyond the first happen only if the operation is
//!   declared [idempotent](PipelineBuilder::idempotent) (case BR-35).
//! - Retried: errors the classifier calls [transient](ErrorClassifier::is_transient), and the
//!   timeout layer's timeouts. Never retried, and returned unchanged: non-transient errors,
//!   local rejections (breaker or bulkhead), the total deadline.
//! - A retry that wanted to go on but could not returns [`Error::GaveUp`] with the attempts
//!   made, the last error and a [`GiveUpReason`]: attempts exhausted, the next sleep would end
//!   past the deadline ("retry budget exhausted", case BR-32), a server `Retry-After` longer
//!   than the time left ("required delay exceeds remaining budget", case BR-34), or throttled
//!   by a [`RetryBudget`].
//! - A server's `Retry-After` hint replaces the backoff delay (no jitter). It is honoured even
//!   when it exceeds the backoff's cap, as long as it fits before the deadline; without a
//!   deadline it is always honoured.
//!
//! # Metrics
//! With the `metrics` feature a pipeline counts, under the name of its breaker (see
//! [`crate::observe`]): each call the breaker admitted, by outcome (a call dropped by its
//! caller counts as cancelled), each rejection by reason, each retry and each timeout. A
//! breaker the pipeline builds from a policy also counts its transitions and state.
//!
//! # Calling
//! [`Pipeline::call`] takes a closure that returns a *fresh* future per attempt. Nothing on the
//! success path is boxed or allocated: the layers are interpreted by one `async fn`, so a call
//! is one future whose size is known at compile time, and the timer of a timeout is armed only
//! if the attempt does not complete in its first poll (timers and waits are boxed on that slow
//! path, so they do not grow every call's future).
//!
//! ```
//! use breaker_core::breaker::BreakerPolicy;
//! use breaker_core::pipeline::Pipeline;
//! use breaker_core::retry::RetryPolicy;
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let pipeline = Pipeline::builder()
//!     .breaker_policy(BreakerPolicy::default())
//!     .retry(RetryPolicy::default())
//!     .idempotent(true)
//!     .timeout(Duration::from_secs(1))
//!     .build()
//!     .unwrap();
//! let value: Result<u32, breaker_core::Error<std::io::Error>> =
//!     pipeline.call(|| async { Ok(42) }).await;
//! assert_eq!(value.unwrap(), 42);
//! # }
//! ```

#[cfg(feature = "tokio")]
mod builder;
mod classify;
#[cfg(feature = "tokio")]
mod ctx;

#[cfg(feature = "tokio")]
pub use builder::{BuildError, PipelineBuilder};
pub use classify::{classifier, AllErrors, ErrorClassifier, FnClassifier, NoHint};

#[cfg(feature = "tokio")]
pub use runtime::Pipeline;

#[cfg(feature = "tokio")]
use crate::retry::{GiveUpReason, RetryBudget};
#[cfg(feature = "tokio")]
use crate::Error;

/// Which errors a fallback is called for. In no case is it called for an error the classifier
/// marks [`Outcome::Ignored`](crate::classify::Outcome::Ignored) or
/// [`Outcome::Success`](crate::classify::Outcome::Success).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FallbackOn {
    /// Only local rejections (an open breaker, a full bulkhead).
    Rejection,
    /// Local rejections, timeouts, and errors classified as breaker failures (also when the
    /// retry layer gave up on them). The default.
    #[default]
    RejectionOrFailure,
}

#[cfg(feature = "tokio")]
mod runtime {
    use super::ctx::{Ctx, Limit};
    use super::*;
    use crate::breaker::{CircuitBreaker, Permit};
    use crate::bulkhead::{Bulkhead, Wait};
    use crate::classify::Outcome;
    use crate::error::Rejection;
    use crate::layer::Layer;
    use crate::observe::BreakerMetrics;
    use crate::retry::{Delays, RetryPolicy};
    use crate::timeout::{Elapsed, TimeoutKind};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{ready, Context, Poll};
    use std::time::Duration;
    use tokio::time::{Instant, Sleep};

    /// A resilience pipeline: the configured layers in their order. See the
    /// [module docs](super). Cloning is cheap; clones share the breaker, the bulkhead, the
    /// retry budget and the jitter source.
    #[derive(Clone)]
    pub struct Pipeline {
        pub(super) layers: [Layer; 4],
        pub(super) len: usize,
        /// The position of the retry layer in the order.
        pub(super) retry_at: Option<usize>,
        pub(super) breaker: Option<CircuitBreaker>,
        pub(super) retry: Option<RetryPolicy>,
        pub(super) budget: Option<RetryBudget>,
        pub(super) timeout: Option<Duration>,
        pub(super) deadline: Option<Duration>,
        pub(super) bulkhead: Option<Bulkhead>,
        pub(super) idempotent: bool,
        pub(super) fallback_on: FallbackOn,
        pub(super) rng: Arc<Mutex<SmallRng>>,
        /// The call and rejection counters of the breaker's name (counting nothing without
        /// a breaker or without the `metrics` feature).
        pub(super) metrics: BreakerMetrics,
    }

    /// A breaker permit held by a call, with the counters its outcome goes to.
    struct Held<'p> {
        permit: Permit<'p>,
        metrics: &'p BreakerMetrics,
    }

    impl Held<'_> {
        /// Records `outcome` in the breaker and the metrics, unless already recorded.
        #[inline(always)]
        fn record(&mut self, outcome: Outcome) {
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
        struct Attempt<'p, 'c, F> {
            #[pin]
            inner: F,
            pipeline: &'p Pipeline,
            // Borrowed, not copied: a copy of a context just written costs more than the
            // rest of a fast call.
            ctx: &'c mut Ctx,
            // Boxed: keeps the timer out of every call's future.
            sleep: Option<Pin<Box<Sleep>>>,
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

    /// What the breaker records for a result seen at its level.
    fn error_outcome<E, C: ErrorClassifier<E> + ?Sized>(e: &Error<E>, class: &C) -> Outcome {
        match e {
            Error::Inner(e) => class.outcome(e),
            Error::Timeout(_) => Outcome::Failure,
            Error::GaveUp { last, .. } => error_outcome(last, class),
            // A bulkhead nested inside the breaker: not the dependency's fault.
            Error::Rejected(_) => Outcome::Ignored,
        }
    }

    enum Step<T, E> {
        Done(Result<T, Error<E>>),
        Sleep(Duration),
    }

    /// The state of one call's retry loop.
    struct RetryRun<'p> {
        pipeline: &'p Pipeline,
        policy: &'p RetryPolicy,
        max: u32,
        attempts: u32,
        /// Boxed and created at the first retry: most calls never need it.
        delays: Option<Box<Delays<SmallRng>>>,
    }

    impl<'p> RetryRun<'p> {
        #[inline]
        fn new(pipeline: &'p Pipeline) -> Self {
            let policy = pipeline.retry.as_ref().unwrap_or(&RetryPolicy::NONE);
            let max = if pipeline.idempotent {
                policy.max_attempts.max(1)
            } else {
                1
            };
            RetryRun {
                pipeline,
                policy,
                max,
                attempts: 0,
                delays: None,
            }
        }

        fn next_delay(&mut self) -> Duration {
            let (policy, rng) = (&self.policy, &self.pipeline.rng);
            self.delays
                .get_or_insert_with(|| {
                    let seed = rng.lock().unwrap_or_else(|p| p.into_inner()).gen::<u64>();
                    Box::new(policy.delays(SmallRng::seed_from_u64(seed)))
                })
                .next()
                .unwrap_or(Duration::ZERO)
        }

        /// Notes a successful attempt.
        #[inline]
        fn succeeded(&self) {
            if let Some(b) = &self.pipeline.budget {
                b.deposit();
            }
        }

        /// Decides what follows an attempt's error. `limit` is the earliest limit enclosing
        /// the retry layer.
        #[cold]
        fn after_error<T, E, C: ErrorClassifier<E> + ?Sized>(
            &mut self,
            error: Error<E>,
            class: &C,
            limit: Option<Limit>,
        ) -> Step<T, E> {
            self.attempts += 1;
            let budget = self.pipeline.budget.as_ref();
            let (transient, hint) = match &error {
                Error::Inner(e) => (class.is_transient(e), class.retry_after(e)),
                // The timeout layer's own limit, unless it is the limit enclosing the retry
                // loop (a timeout layer outside retry) and so has already passed for it too.
                Error::Timeout(t) => (
                    t.kind == TimeoutKind::Attempt
                        && !limit.is_some_and(|l| Instant::now() >= l.at),
                    None,
                ),
                _ => (false, None),
            };
            if !transient {
                return Step::Done(Err(error));
            }
            if let Some(b) = budget {
                b.withdraw();
            }
            if self.max <= 1 {
                return Step::Done(Err(error));
            }
            let attempts = self.attempts;
            let gave_up = |reason| {
                Step::Done(Err(Error::GaveUp {
                    attempts,
                    reason,
                    last: Box::new(error),
                }))
            };
            if self.attempts >= self.max {
                return gave_up(GiveUpReason::AttemptsExhausted);
            }
            if budget.is_some_and(|b| !b.can_retry()) {
                return gave_up(GiveUpReason::Throttled);
            }
            let delay = match hint {
                Some(h) => h,
                None => self.next_delay(),
            };
            if let Some(l) = limit {
                let remaining = l.at.saturating_duration_since(Instant::now());
                if delay > remaining {
                    return gave_up(match hint {
                        Some(required) => GiveUpReason::RetryAfterExceedsBudget {
                            required,
                            remaining,
                        },
                        None => GiveUpReason::DeadlineExhausted {
                            next_delay: delay,
                            remaining,
                        },
                    });
                }
            }
            crate::observe::retry(self.pipeline.metrics_name());
            Step::Sleep(delay)
        }
    }

    /// A run of non-retry layers (`$range` of the order, outermost first) around `$core`,
    /// as one block whose value is the run's result.
    ///
    /// Breaker, bulkhead and timeout only act before and after what they wrap, so a run of
    /// them is straight-line code, not one nested future per layer: entering the run takes each
    /// layer's permit or limit in the declared order, leaving it releases them. A whole call is
    /// then one `async fn` (the layers outside retry, the retry loop, the layers inside it),
    /// which keeps its future small and its result from being moved from layer to layer. A
    /// layer that refuses releases what the layers outside it took, and a breaker outside it
    /// records the refusal as it would have seen it nested: a bulkhead rejection is ignored, a
    /// deadline reached while waiting for a slot is a failure.
    ///
    /// With `lazy`, the run encloses a single attempt and the timeout layer's limit is anchored
    /// only when needed (see `Ctx::lazy`); without it, at the layer.
    macro_rules! segment {
        ($self:ident, $breaker:ident, $range:expr, $ctx:ident, $class:ident, lazy = $lazy:expr, $core:expr) => {
            'segment: {
                let mut permit = None;
                let mut _slot = None;
                let mut $ctx = $ctx;
                for &layer in &$self.layers[$range] {
                    let refused: Error<E> = match layer {
                        Layer::Timeout => {
                            if let Some(t) = $self.timeout {
                                $ctx = if $lazy {
                                    $ctx.lazy()
                                } else {
                                    $ctx.tighten(t, TimeoutKind::Attempt)
                                };
                            }
                            continue;
                        }
                        Layer::Breaker => {
                            let Some(breaker) = $breaker else {
                                continue;
                            };
                            match breaker.try_acquire() {
                                Ok(p) => {
                                    permit = Some(Held {
                                        permit: p,
                                        metrics: &$self.metrics,
                                    });
                                    continue;
                                }
                                Err(r) => {
                                    $self.metrics.rejected(r.reason());
                                    Error::Rejected(Rejection::Breaker(r))
                                }
                            }
                        }
                        Layer::Bulkhead => {
                            let Some(bulkhead) = &$self.bulkhead else {
                                continue;
                            };
                            let slot = match bulkhead.try_acquire() {
                                Ok(slot) => Ok(slot),
                                // Boxed: the waiting path must not grow every call's future.
                                Err(_) => {
                                    $ctx = $ctx.anchor($self.timeout);
                                    Box::pin(bulkhead.acquire_until($ctx.limit().map(|l| l.at)))
                                        .await
                                }
                            };
                            match slot {
                                Ok(slot) => {
                                    _slot = Some(slot);
                                    continue;
                                }
                                Err(Wait::Full(full)) => Error::Rejected(Rejection::Bulkhead(full)),
                                Err(Wait::Deadline) => match $ctx.limit() {
                                    Some(l) => Error::Timeout($self.elapsed(l.kind)),
                                    None => unreachable!("waits end early only at a limit"),
                                },
                            }
                        }
                        Layer::Retry => unreachable!("retry is never inside a segment"),
                    };
                    if let Some(mut p) = permit.take() {
                        p.record(error_outcome(&refused, $class));
                    }
                    break 'segment Err(refused);
                }
                let result = $core;
                if let Some(p) = &mut permit {
                    p.record(match &result {
                        Ok(_) => Outcome::Success,
                        Err(e) => error_outcome(e, $class),
                    });
                }
                result
            }
        };
    }

    impl Pipeline {
        /// The name the pipeline's metrics carry: its breaker's name, `""` without a breaker.
        fn metrics_name(&self) -> &str {
            self.breaker.as_ref().map_or("", CircuitBreaker::name)
        }

        /// The error of the limit of `kind`, which has just passed (counted in the
        /// [`TIMEOUTS_TOTAL`](crate::observe::TIMEOUTS_TOTAL) metric).
        fn elapsed(&self, kind: TimeoutKind) -> Elapsed {
            crate::observe::timeout(self.metrics_name(), kind);
            let after = match kind {
                TimeoutKind::Attempt => self.timeout,
                TimeoutKind::Deadline => self.deadline,
            };
            Elapsed {
                kind,
                after: after.unwrap_or_default(),
            }
        }

        /// Starts building a pipeline with no layers.
        pub fn builder() -> PipelineBuilder {
            PipelineBuilder::default()
        }

        /// The pipeline of `policy`, with the system clock for its breaker.
        ///
        /// # Errors
        /// As [`PipelineBuilder::build`].
        pub fn from_policy(policy: &crate::policy::Policy) -> Result<Pipeline, BuildError> {
            PipelineBuilder::from_policy(policy).build()
        }

        /// The layers, outermost first.
        pub fn order(&self) -> &[Layer] {
            &self.layers[..self.len]
        }

        /// The circuit breaker, if configured.
        pub fn breaker(&self) -> Option<&CircuitBreaker> {
            self.breaker.as_ref()
        }

        /// This pipeline with `breaker` in place of its own, in the same position of the
        /// order; everything else (bulkhead, retry budget, jitter source) is shared with
        /// `self`. Cheap (reference-count increments, no allocation); to run one pipeline
        /// with a breaker per key, [`call_with_breaker`](Self::call_with_breaker) is cheaper
        /// still (it clones nothing). A pipeline without a breaker layer stays without one.
        /// Calls and rejections are still counted under the name of `self`'s breaker (a
        /// registry's breakers share their factory's name).
        pub fn with_breaker(&self, breaker: CircuitBreaker) -> Pipeline {
            // Field by field: `..self.clone()` would clone `self.breaker` only to drop it.
            Pipeline {
                layers: self.layers,
                len: self.len,
                retry_at: self.retry_at,
                breaker: self.breaker.is_some().then_some(breaker),
                retry: self.retry,
                budget: self.budget.clone(),
                timeout: self.timeout,
                deadline: self.deadline,
                bulkhead: self.bulkhead.clone(),
                idempotent: self.idempotent,
                fallback_on: self.fallback_on,
                rng: Arc::clone(&self.rng),
                metrics: self.metrics.clone(),
            }
        }

        /// The bulkhead, if configured.
        pub fn bulkhead(&self) -> Option<&Bulkhead> {
            self.bulkhead.as_ref()
        }

        /// The retry budget, if configured.
        pub fn retry_budget(&self) -> Option<&RetryBudget> {
            self.budget.as_ref()
        }

        /// Runs `op` through the pipeline, judging errors with [`AllErrors`] (every error a
        /// breaker failure and transient). `op` is called once per attempt and must return a
        /// fresh future each time.
        ///
        /// # Errors
        /// See [`Error`]: the operation's error, a local rejection, a timeout, or a retry that
        /// gave up.
        ///
        /// # Panics
        /// If it must sleep or wait (a backoff, a pending attempt under a timeout, a bulkhead
        /// wait) outside a tokio runtime with the time driver enabled. A panic inside `op`
        /// propagates; a breaker permit it held records a failure.
        pub fn call<'a, T: 'a, E: 'a, F, Fut>(
            &'a self,
            op: F,
        ) -> impl Future<Output = Result<T, Error<E>>> + 'a
        where
            F: FnMut() -> Fut + 'a,
            Fut: Future<Output = Result<T, E>> + 'a,
        {
            // Not an `async fn` wrapping the call: that would nest one future in another and
            // move the result through both.
            self.run(self.breaker.as_ref(), &AllErrors, op)
        }

        /// Runs `op` through the pipeline, judging its errors with `classifier`.
        ///
        /// # Errors
        /// As [`call`](Self::call).
        ///
        /// # Panics
        /// As [`call`](Self::call).
        pub fn call_with<'a, T: 'a, E: 'a, F, Fut, C>(
            &'a self,
            classifier: &'a C,
            op: F,
        ) -> impl Future<Output = Result<T, Error<E>>> + 'a
        where
            F: FnMut() -> Fut + 'a,
            Fut: Future<Output = Result<T, E>> + 'a,
            C: ErrorClassifier<E> + ?Sized,
        {
            self.run(self.breaker.as_ref(), classifier, op)
        }

        /// Like [`call_with`](Self::call_with), with `breaker` in place of the pipeline's own
        /// in the same position of the order: what
        /// [`with_breaker(breaker).call_with(..)`](Self::with_breaker) does, without cloning
        /// the pipeline. The way to run one pipeline with a breaker per key, the breaker taken
        /// from a [`Registry`](crate::registry::Registry) per call. A pipeline without a
        /// breaker layer ignores `breaker`. Calls and rejections are counted under the name
        /// of the pipeline's own breaker.
        ///
        /// # Errors
        /// As [`call`](Self::call).
        ///
        /// # Panics
        /// As [`call`](Self::call).
        pub fn call_with_breaker<'a, T: 'a, E: 'a, F, Fut, C>(
            &'a self,
            breaker: &'a CircuitBreaker,
            classifier: &'a C,
            op: F,
        ) -> impl Future<Output = Result<T, Error<E>>> + 'a
        where
            F: FnMut() -> Fut + 'a,
            Fut: Future<Output = Result<T, E>> + 'a,
            C: ErrorClassifier<E> + ?Sized,
        {
            self.run(self.layer_breaker(breaker), classifier, op)
        }

        /// `breaker` as the breaker layer's breaker, or `None` for a pipeline without a breaker
        /// layer (which ignores a key's breaker).
        pub(crate) fn layer_breaker<'a>(
            &self,
            breaker: &'a CircuitBreaker,
        ) -> Option<&'a CircuitBreaker> {
            self.breaker.is_some().then_some(breaker)
        }

        /// The one implementation of a call, with `breaker` as the breaker layer's breaker.
        pub(crate) async fn run<T, E, F, Fut, C>(
            &self,
            breaker: Option<&CircuitBreaker>,
            classifier: &C,
            mut op: F,
        ) -> Result<T, Error<E>>
        where
            F: FnMut() -> Fut,
            Fut: Future<Output = Result<T, E>>,
            C: ErrorClassifier<E> + ?Sized,
        {
            let ctx = match self.deadline {
                Some(d) => Ctx::default().tighten(d, TimeoutKind::Deadline),
                None => Ctx::default(),
            };
            // The layers outside retry, the retry loop, the layers inside it. Without retry,
            // the outer run is empty and the loop makes one attempt.
            let (outer, inner) = match self.retry_at {
                Some(i) => (i, i + 1),
                None => (0, 0),
            };
            let class = classifier;
            segment!(self, breaker, ..outer, ctx, class, lazy = false, {
                let mut run = RetryRun::new(self);
                loop {
                    let result =
                        segment!(self, breaker, inner..self.len, ctx, class, lazy = true, {
                            Attempt {
                                inner: op(),
                                pipeline: self,
                                ctx: &mut ctx,
                                sleep: None,
                            }
                            .await
                        });
                    if self.retry_at.is_none() {
                        break result;
                    }
                    // The success path leaves the result where it is: moving it through a
                    // decision value would copy it.
                    let error = match result {
                        Ok(v) => {
                            run.succeeded();
                            break Ok(v);
                        }
                        Err(e) => e,
                    };
                    match run.after_error(error, class, ctx.limit()) {
                        Step::Done(result) => break result,
                        Step::Sleep(d) if d.is_zero() => {}
                        // Boxed: keeps the timer out of every call's future.
                        Step::Sleep(d) => Box::pin(tokio::time::sleep(d)).await,
                    }
                }
            })
        }

        /// Like [`call_with`](Self::call_with), and on an error chosen by
        /// [`FallbackOn`] (never one classified as ignored) returns `fallback(error)` instead.
        /// The fallback runs outside every layer and every limit.
        ///
        /// # Errors
        /// The pipeline's error when the fallback does not apply; otherwise the fallback's.
        ///
        /// # Panics
        /// As [`call`](Self::call).
        pub async fn call_with_fallback<T, E, F, Fut, C, G, GFut>(
            &self,
            classifier: &C,
            op: F,
            fallback: G,
        ) -> Result<T, Error<E>>
        where
            F: FnMut() -> Fut,
            Fut: Future<Output = Result<T, E>>,
            C: ErrorClassifier<E> + ?Sized,
            G: FnOnce(Error<E>) -> GFut,
            GFut: Future<Output = Result<T, Error<E>>>,
        {
            match self.call_with(classifier, op).await {
                Err(e) if self.wants_fallback(&e, classifier) => fallback(e).await,
                result => result,
            }
        }

        /// Whether [`call_with_fallback`](Self::call_with_fallback) hands `error` to the
        /// fallback.
        pub fn wants_fallback<E, C: ErrorClassifier<E> + ?Sized>(
            &self,
            error: &Error<E>,
            classifier: &C,
        ) -> bool {
            let failures = self.fallback_on == FallbackOn::RejectionOrFailure;
            match error {
                Error::Rejected(_) => true,
                Error::Timeout(_) => failures,
                Error::Inner(e) => failures && classifier.outcome(e) == Outcome::Failure,
                Error::GaveUp { last, .. } => self.wants_fallback(last, classifier),
            }
        }
    }

    impl fmt::Debug for Pipeline {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Pipeline")
                .field("order", &self.order())
                .field("breaker", &self.breaker)
                .field("retry", &self.retry)
                .field("retry_budget", &self.budget)
                .field("timeout", &self.timeout)
                .field("deadline", &self.deadline)
                .field("bulkhead", &self.bulkhead)
                .field("idempotent", &self.idempotent)
                .field("fallback_on", &self.fallback_on)
                .finish()
        }
    }
}
