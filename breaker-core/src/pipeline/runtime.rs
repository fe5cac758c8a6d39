//! The pipeline type and its one implementation of a call.

use super::attempt::{metrics_of, Attempt, Held};
use super::ctx::Ctx;
use super::direct::{BreakerOnly, OutOfLine, Run};
use super::keyed::{KeyLayers, Layers};
use super::retry_run::{dependency_outcome, error_outcome, hedge_verdict, RetryRun, Step};
use super::*;
use crate::adaptive::AdaptiveLimiter;
use crate::breaker::CircuitBreaker;
use crate::bulkhead::{Bulkhead, Wait};
use crate::classify::{Classifier, Outcome};
use crate::error::Rejection;
use crate::hedge::{Hedge, Hedged};
use crate::layer::Layer;
use crate::observe::BreakerMetrics;
use crate::ratelimit::RateLimiter;
use crate::record::{Recorded, Recorder};
use crate::retry::RetryPolicy;
use crate::throttle::Throttler;
use crate::timeout::{Elapsed, TimeoutKind};
use rand::rngs::SmallRng;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A resilience pipeline: the configured layers in their order. See the
/// [module docs](super). Cloning is cheap; clones share the breaker, the bulkhead, the
/// retry budget and the jitter source.
#[derive(Clone)]
pub struct Pipeline {
    pub(super) layers: [Layer; 8],
    pub(super) len: usize,
    /// The position of the retry layer in the order.
    pub(super) retry_at: Option<usize>,
    /// The position of the hedge layer in the order; `None` also when the operation is not
    /// declared idempotent (then the layer makes one attempt and does nothing).
    pub(super) hedge_at: Option<usize>,
    pub(super) rate: Option<RateLimiter>,
    pub(super) hedge: Option<Hedge>,
    pub(super) adaptive: Option<AdaptiveLimiter>,
    pub(super) throttle: Option<Throttler>,
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
    /// Where each attempt is recorded, if anywhere ([`PipelineBuilder::recorder`]).
    pub(super) recorder: Option<Recorder>,
    /// Whether the pipeline is one breaker layer and nothing else that acts on a call (no
    /// deadline, no recorder): [`is_breaker_only`](Self::is_breaker_only), decided once.
    pub(super) breaker_only: bool,
}

impl Pipeline {
    /// The name the pipeline's metrics carry: its breaker's name, `""` without a breaker.
    pub(super) fn metrics_name(&self) -> &str {
        self.breaker.as_ref().map_or("", CircuitBreaker::name)
    }

    /// The error of the limit of `kind`, which has just passed (counted in the
    /// [`TIMEOUTS_TOTAL`](crate::observe::TIMEOUTS_TOTAL) metric).
    pub(super) fn elapsed(&self, kind: TimeoutKind) -> Elapsed {
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
    /// A [`Policy`](crate::policy::Policy) carries no name, so this breaker has none (its
    /// metrics are labelled `breaker=""`): name it with
    /// `PipelineBuilder::from_policy(&policy).name("payments")`, or take a policy's pipeline
    /// from its config file with [`Policies::pipeline`](crate::config::Policies::pipeline),
    /// which names it after the policy.
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
            hedge_at: self.hedge_at,
            rate: self.rate.clone(),
            hedge: self.hedge.clone(),
            adaptive: self.adaptive.clone(),
            throttle: self.throttle.clone(),
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
            recorder: self.recorder.clone(),
            breaker_only: self.breaker_only,
        }
    }

    /// Records this pipeline's calls in `recorder` from now on (see
    /// [`PipelineBuilder::recorder`]); for the attribute's `record = path`.
    pub(crate) fn set_recorder(&mut self, recorder: Recorder) {
        self.recorder = Some(recorder);
        self.breaker_only = self.is_breaker_only();
    }

    /// The bulkhead, if configured.
    pub fn bulkhead(&self) -> Option<&Bulkhead> {
        self.bulkhead.as_ref()
    }

    /// The rate limiter, if configured.
    pub fn rate_limiter(&self) -> Option<&RateLimiter> {
        self.rate.as_ref()
    }

    /// The hedge, if configured.
    pub fn hedge(&self) -> Option<&Hedge> {
        self.hedge.as_ref()
    }

    /// The adaptive concurrency limiter, if configured.
    pub fn adaptive_limiter(&self) -> Option<&AdaptiveLimiter> {
        self.adaptive.as_ref()
    }

    /// The throttler, if configured.
    pub fn throttler(&self) -> Option<&Throttler> {
        self.throttle.as_ref()
    }

    /// The retry budget, if configured.
    pub fn retry_budget(&self) -> Option<&RetryBudget> {
        self.budget.as_ref()
    }

    /// The retry policy, if configured.
    pub fn retry_policy(&self) -> Option<&RetryPolicy> {
        self.retry.as_ref()
    }

    /// The per-attempt timeout, if configured.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The total deadline over all attempts, if configured.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// Whether the operation is declared idempotent.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The policy this pipeline runs: each configured layer's policy, its order and
    /// `idempotent` (the scope is not kept by a pipeline: [`Scope::Local`](crate::scope::Scope)).
    /// For a pipeline built from a [`Policy`](crate::policy::Policy) it is that policy, with
    /// the order written out.
    pub fn policy(&self) -> crate::policy::Policy {
        crate::policy::Policy {
            breaker: self.breaker.as_ref().map(|b| (*b.policy()).clone()),
            retry: self.retry,
            timeout: self.timeout,
            deadline: self.deadline,
            bulkhead: self.bulkhead.as_ref().map(Bulkhead::policy),
            rate_limit: self.rate.as_ref().map(RateLimiter::policy),
            hedge: self.hedge.as_ref().map(Hedge::policy),
            adaptive: self.adaptive.as_ref().map(AdaptiveLimiter::policy),
            throttle: self.throttle.as_ref().map(Throttler::policy),
            order: Some(self.order().to_vec()),
            idempotent: self.idempotent,
            ..crate::policy::Policy::default()
        }
    }

    /// Runs `op` through the pipeline, judging results with [`AllErrors`] (every `Ok` a
    /// success, every error a breaker failure and transient). `op` is called once per attempt
    /// and must return a fresh future each time.
    ///
    /// # Errors
    /// See [`Error`]: the operation's error, a local rejection, a timeout, or a retry that
    /// gave up.
    ///
    /// # Panics
    /// If it must sleep or wait (a backoff, a pending attempt under a timeout, a bulkhead
    /// wait) outside a tokio runtime with the time driver enabled, or if the pipeline's rate
    /// limit is `per key` (a call without a key's limiter: use
    /// [`call_keyed`](Self::call_keyed)). A panic inside `op` propagates; a breaker permit it
    /// held records a failure.
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
        self.run(Layers::Own, &AllErrors, op)
    }

    /// Runs `op` through the pipeline, judging its results with `classifier`: its `Ok` values
    /// and errors for the breaker and the retry layer (see [`crate::classify`]; an `Ok` it calls
    /// a failure is still returned as `Ok`, and when retry gives up on one, the last attempt's
    /// `Ok` value is returned).
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
        C: Classifier<T, E> + ?Sized,
    {
        self.run(Layers::Own, classifier, op)
    }

    /// The one implementation of a call, with `layers` as its breaker and rate limiter.
    ///
    /// The breaker alone (the most common pipeline: no limit, no retry loop, nothing recorded)
    /// takes a direct path, the permit around one attempt ([`BreakerOnly`]): the same steps as
    /// the general path takes for it, without its context, loop and attempt wrapper. The choice
    /// is made here, outside both futures, so neither carries the other's state, and the general
    /// path's poll and drop stay out of line ([`OutOfLine`]), so the direct path's inline into
    /// the caller: a breaker-only call costs about 120 instructions where it cost about 180
    /// with an `async fn` for it (`BREAKER_IR=async/new/consecutive`, benches/breaker.rs).
    #[inline]
    pub(crate) fn run<'a, T: 'a, E: 'a, F, Fut, C>(
        &'a self,
        layers: Layers<'a>,
        classifier: &'a C,
        op: F,
    ) -> Run<
        impl Future<Output = Result<T, Error<E>>> + 'a,
        impl Future<Output = Result<T, Error<E>>> + 'a,
    >
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
        C: Classifier<T, E> + ?Sized,
    {
        // The pipeline's own layers are found only on the general path: a breaker-only call
        // reads its breaker alone (the rate layer's checks before this choice cost it 11
        // instructions).
        let breaker = match &layers {
            Layers::Own => self.breaker.as_ref(),
            Layers::Key(keyed) => keyed.breaker,
        };
        match breaker {
            Some(breaker) if self.breaker_only => Run::BreakerOnly {
                fut: BreakerOnly {
                    pipeline: self,
                    breaker,
                    class: classifier,
                    op,
                    fut: None,
                    held: None,
                },
            },
            _ => Run::General {
                fut: OutOfLine::new(self.run_general(
                    match layers {
                        Layers::Own => self.own_layers(),
                        Layers::Key(keyed) => keyed,
                    },
                    classifier,
                    op,
                )),
            },
        }
    }

    /// The general path of [`run`](Self::run): the layers outside retry, the retry loop, the
    /// layers inside it.
    async fn run_general<T, E, F, Fut, C>(
        &self,
        keyed: KeyLayers<'_>,
        classifier: &C,
        mut op: F,
    ) -> Result<T, Error<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Classifier<T, E> + ?Sized,
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
        let result = segment!(self, keyed, ..outer, ctx, class, lazy = false, {
            let mut run = RetryRun::new(self);
            loop {
                // Recording is off unless a recorder is set: then one clock read here, one
                // at the end and one hand-off (an attempt dropped unfinished is recorded as
                // cancelled when `run` is dropped).
                run.begin_attempt();
                let result = match self.hedge_at {
                    None => segment!(self, keyed, inner..self.len, ctx, class, lazy = true, {
                        Attempt {
                            inner: op(),
                            pipeline: self,
                            ctx: &mut ctx,
                            sleep: crate::timeout::LazySleep::new(),
                        }
                        .await
                    }),
                    // The layers between retry and hedge act once per hedged group; each
                    // hedge runs the layers inside the hedge layer.
                    Some(h) => segment!(self, keyed, inner..h, ctx, class, lazy = false, {
                        self.hedged(keyed, h + 1, ctx, class, &Mutex::new(&mut op))
                            .await
                    }),
                };
                run.end_attempt(|| recorded(&result, class));
                if self.retry_at.is_none() {
                    break result;
                }
                // The success path leaves the result where it is: moving it through a
                // decision value would copy it.
                let step = match result {
                    Ok(v) => {
                        let retry = class.retry_of(Ok(&v));
                        if !retry.is_transient() {
                            run.succeeded();
                            break Ok(v);
                        }
                        // A transient `Ok` (cold): retried like an error, or returned.
                        run.after_ok(v, retry, ctx.limit())
                    }
                    Err(e) => run.after_error(e, class, ctx.limit()),
                };
                match step {
                    Step::Done(result) => break result,
                    Step::Sleep(d) if d.is_zero() => {}
                    // Boxed: keeps the timer out of every call's future.
                    Step::Sleep(d) => Box::pin(tokio::time::sleep(d)).await,
                }
            }
        });
        result
    }

    /// One hedged group: attempts of the layers from `from` to the innermost, started by the
    /// hedge layer's policy, under the limits of `ctx` (no hedge starts at or after the
    /// earliest of them). The operation is shared by the attempts through a lock held only
    /// while it makes an attempt's future (a `Mutex`, not a `RefCell`, so that the call's
    /// future stays `Send`).
    fn hedged<'s, T, E, F, Fut, C>(
        &'s self,
        keyed: KeyLayers<'s>,
        from: usize,
        ctx: Ctx,
        class: &'s C,
        op: &'s Mutex<&'s mut F>,
    ) -> impl Future<Output = Result<T, Error<E>>> + 's
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>> + 's,
        C: Classifier<T, E> + ?Sized,
        T: 's,
        E: 's,
    {
        let hedge = self.hedge.as_ref().expect("a hedge layer has a hedge");
        let limit = ctx.limit().map(|l| l.at);
        Hedged::new(
            hedge.inner(),
            move |_attempt| async move {
                segment!(self, keyed, from..self.len, ctx, class, lazy = true, {
                    let attempt = (op.lock().unwrap_or_else(|p| p.into_inner()))();
                    Attempt {
                        inner: attempt,
                        pipeline: self,
                        ctx: &mut ctx,
                        sleep: crate::timeout::LazySleep::new(),
                    }
                    .await
                })
            },
            move |r: &Result<T, Error<E>>| hedge_verdict(r, class),
            limit,
        )
    }

    /// Whether the pipeline is one breaker layer and nothing else that acts on a call (no
    /// deadline, no recorder); kept in `breaker_only`, since every call asks.
    pub(super) fn is_breaker_only(&self) -> bool {
        self.len == 1
            && self.layers[0] == Layer::Breaker
            && self.deadline.is_none()
            && self.recorder.is_none()
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
        C: Classifier<T, E> + ?Sized,
        G: FnOnce(Error<E>) -> GFut,
        GFut: Future<Output = Result<T, Error<E>>>,
    {
        match self.call_with(classifier, op).await {
            Err(e) if self.wants_fallback_of::<T, E, C>(&e, classifier) => fallback(e).await,
            result => result,
        }
    }

    /// Whether [`call_with_fallback`](Self::call_with_fallback) hands `error` to the
    /// fallback, judged by an error classifier. A classifier of results judges errors as its
    /// errors-only form does ([`HttpErrors`](crate::http::HttpErrors) for
    /// [`HttpClassifier`](crate::http::HttpClassifier)); `call_with_fallback` takes any.
    pub fn wants_fallback<E, C: ErrorClassifier<E> + ?Sized>(
        &self,
        error: &Error<E>,
        classifier: &C,
    ) -> bool {
        self.wants_fallback_of::<(), E, C>(error, classifier)
    }

    /// [`wants_fallback`](Self::wants_fallback) for a classifier of `Result<T, E>`. A fallback
    /// is never called for an `Ok`, so only the classifier's verdict on errors counts.
    pub(crate) fn wants_fallback_of<T, E, C: Classifier<T, E> + ?Sized>(
        &self,
        error: &Error<E>,
        classifier: &C,
    ) -> bool {
        let failures = self.fallback_on == FallbackOn::RejectionOrFailure;
        match error {
            Error::Rejected(_) => true,
            Error::Timeout(_) => failures,
            Error::Inner(e) => failures && classifier.outcome_of(Err(e)) == Outcome::Failure,
            Error::GaveUp { last, .. } => self.wants_fallback_of::<T, E, C>(last, classifier),
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
            .field("rate", &self.rate)
            .field("hedge", &self.hedge)
            .field("adaptive", &self.adaptive)
            .field("throttle", &self.throttle)
            .field("idempotent", &self.idempotent)
            .field("fallback_on", &self.fallback_on)
            .field("recorder", &self.recorder)
            .finish()
    }
}

impl Pipeline {
    /// A rejection by the rate limit, adaptive limit or throttling layer, counted, as a call's
    /// error.
    #[cold]
    #[inline(never)]
    pub(super) fn refused<E>(&self, r: Rejection) -> Error<E> {
        crate::observe::layer_rejected(self.metrics_name(), r.layer().name());
        Error::Rejected(r)
    }

    /// A rejection by the breaker layer, counted, as a call's error (both paths; cold: the
    /// hot rejection is the breaker's own, before any pipeline).
    #[cold]
    #[inline(never)]
    pub(super) fn rejected<E>(&self, r: crate::breaker::Rejected) -> Error<E> {
        self.metrics.rejected(r.reason());
        Error::Rejected(Rejection::Breaker(r))
    }

    /// Records a call that a layer outside retry refused before any attempt (with a recorder;
    /// attempts are recorded by the retry loop).
    #[cold]
    pub(super) fn record_refusal<T, E, C: Classifier<T, E> + ?Sized>(
        &self,
        refused: &Error<E>,
        class: &C,
    ) {
        if let Some(r) = &self.recorder {
            r.record_attempt(
                r.start(),
                recorded_error::<T, E, C>(refused, class),
                None,
                1,
            );
        }
    }
}

/// How a call's (or an attempt's) result is recorded.
fn recorded<T, E, C: Classifier<T, E> + ?Sized>(
    result: &Result<T, Error<E>>,
    class: &C,
) -> Recorded {
    match result {
        // An `Ok` the classifier calls a failure (a 503 response) is recorded as one.
        Ok(v) => Recorded::from(class.outcome_of(Ok(v))),
        Err(e) => recorded_error::<T, E, C>(e, class),
    }
}

fn recorded_error<T, E, C: Classifier<T, E> + ?Sized>(e: &Error<E>, class: &C) -> Recorded {
    match e {
        Error::Inner(e) => Recorded::from(class.outcome_of(Err(e))),
        Error::Timeout(_) => Recorded::Timeout,
        Error::Rejected(_) => Recorded::Rejected,
        Error::GaveUp { last, .. } => recorded_error::<T, E, C>(last, class),
    }
}
