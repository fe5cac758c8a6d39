//! Pipelines that follow a registry's reloads: [`LivePipeline`].
//!
//! # Why
//! A [`Pipeline`] is a value: its retry, timeouts and bulkhead are fixed when it is built. A
//! pipeline of a named policy must still follow the config: after a reload, new calls run
//! under the new retry, timeout, deadline and bulkhead, while calls in flight finish under the
//! ones they started with, and the breaker (the registry's, updated in place) keeps its state.
//! So the registry keeps, per pipeline it handed out, one slot holding the current pipeline;
//! a reload builds the new pipeline and swaps it in, and a call reads the slot once, when it
//! starts (one `ArcSwap` load).

use crate::clock::Clock;
use crate::pipeline::{ErrorClassifier, Pipeline, PipelineBuilder};
use crate::policy::Policy;
use crate::{CircuitBreaker, Error};
use arc_swap::ArcSwap;
use std::future::Future;
use std::sync::Arc;

/// The slot of one [`LivePipeline`]: the current pipeline, and who uses it (for errors).
pub(super) struct Slot {
    pub(super) current: ArcSwap<Pipeline>,
    /// Where its calls are recorded (an annotated function's `record = path`), carried over
    /// to every pipeline a reload builds.
    pub(super) recorder: std::sync::Mutex<Option<crate::record::Recorder>>,
    /// Who uses the pipeline, for the error of a reload that drops its policy: an annotated
    /// function's name, or `None` for a pipeline taken with `PolicyRegistry::pipeline`.
    pub(super) user: Option<String>,
}

/// The pipeline of `policy` with the registry's `breaker`, and `bulkhead` when the bulkhead
/// policy is unchanged (so a reload that changes another layer keeps the calls counted in it).
pub(super) fn build(
    policy: &Policy,
    name: &str,
    breaker: Option<CircuitBreaker>,
    previous: Option<&Pipeline>,
    recorder: Option<crate::record::Recorder>,
    clock: Option<&Clock>,
) -> Pipeline {
    let mut builder = PipelineBuilder::from_policy(policy).name(name);
    if let Some(clock) = clock {
        builder = builder.clock(clock.clone());
    }
    if let Some(recorder) = recorder {
        builder = builder.recorder(recorder);
    }
    if let Some(breaker) = breaker {
        builder = builder.breaker(breaker);
    }
    // A layer whose policy a reload leaves as it was keeps its state: the calls in its
    // bulkhead, the rate limiter's permits, the adaptive limit reached, throttling's counts,
    // hedging's recent latencies.
    if let Some(previous) = previous {
        if let Some(b) = previous
            .bulkhead()
            .filter(|b| Some(b.policy()) == policy.bulkhead)
        {
            builder = builder.bulkhead(b.clone());
        }
        if let Some(r) = previous
            .rate_limiter()
            .filter(|r| Some(r.policy()) == policy.rate_limit)
        {
            builder = builder.rate_limiter(r.clone());
        }
        if let Some(h) = previous
            .hedge()
            .filter(|h| Some(h.policy()) == policy.hedge)
        {
            builder = builder.hedge_with(h.clone());
        }
        if let Some(a) = previous
            .adaptive_limiter()
            .filter(|a| Some(a.policy()) == policy.adaptive)
        {
            builder = builder.adaptive_limiter(a.clone());
        }
        if let Some(t) = previous
            .throttler()
            .filter(|t| Some(t.policy()) == policy.throttle)
        {
            builder = builder.throttler(t.clone());
        }
    }
    builder
        .build()
        .expect("loaded policies are validated, with the same validator")
}

/// A named policy's pipeline that follows reloads of its [`PolicyRegistry`]; from
/// [`PolicyRegistry::pipeline`]. Cloning is cheap; clones share the slot.
///
/// Each call runs under the pipeline current when it starts ([`current`](Self::current)):
/// after a reload new calls use the policy's new retry, timeout, deadline and bulkhead, calls
/// in flight finish under the old ones, and the breaker is the registry's breaker of the
/// policy, which a reload updates in place, keeping its state. A bulkhead whose policy changed
/// is a new one: calls in flight hold slots of the old one until they finish.
///
/// [`PolicyRegistry`]: super::PolicyRegistry
/// [`PolicyRegistry::pipeline`]: super::PolicyRegistry::pipeline
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::config::{Format, Loader, PolicyRegistry};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = PolicyRegistry::load(Loader::text(
///     "[policies.inventory]\ntimeout = \"2s\"\n",
///     Format::Toml,
/// ))
/// .unwrap();
/// let inventory = registry.pipeline("inventory").unwrap();
/// let stock: Result<u32, breaker::Error<std::io::Error>> =
///     inventory.call(|| async { Ok(7) }).await;
/// assert_eq!(stock.unwrap(), 7);
/// # }
/// ```
#[derive(Clone)]
pub struct LivePipeline {
    pub(super) slot: Arc<Slot>,
}

impl LivePipeline {
    /// The pipeline new calls run under now.
    pub fn current(&self) -> Arc<Pipeline> {
        self.slot.current.load_full()
    }

    /// Records the calls of this pipeline, and of every pipeline a reload puts in its place,
    /// in `recorder` (an annotated function's `record = path`).
    pub(crate) fn set_recorder(&self, recorder: crate::record::Recorder) {
        let mut slot = self.slot.recorder.lock().unwrap_or_else(|e| e.into_inner());
        *slot = Some(recorder.clone());
        let mut pipeline = (*self.current()).clone();
        pipeline.set_recorder(recorder);
        self.slot.current.store(Arc::new(pipeline));
    }

    /// Runs `op` under the current pipeline; see [`Pipeline::call`].
    ///
    /// # Errors
    /// As [`Pipeline::call`].
    ///
    /// # Panics
    /// As [`Pipeline::call`].
    pub fn call<'a, T: 'a, E: 'a, F, Fut>(
        &self,
        op: F,
    ) -> impl Future<Output = Result<T, Error<E>>> + 'a
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
    {
        let pipeline = self.current();
        async move { pipeline.call(op).await }
    }

    /// Runs `op` under the current pipeline, judging its errors with `classifier`; see
    /// [`Pipeline::call_with`].
    ///
    /// # Errors
    /// As [`Pipeline::call`].
    ///
    /// # Panics
    /// As [`Pipeline::call`].
    pub fn call_with<'a, T: 'a, E: 'a, F, Fut, C>(
        &self,
        classifier: &'a C,
        op: F,
    ) -> impl Future<Output = Result<T, Error<E>>> + 'a
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
        C: ErrorClassifier<E> + ?Sized,
    {
        let pipeline = self.current();
        async move { pipeline.call_with(classifier, op).await }
    }

    /// Runs `op` under the current pipeline with a key's own layers (its breaker, its rate
    /// limiter) in place of the pipeline's; see [`Pipeline::call_keyed`]. The way to call a
    /// policy whose rate limit is `per key`, with the key's limiter from a
    /// [`RateLimiters`](crate::ratelimit::RateLimiters).
    ///
    /// # Errors
    /// As [`Pipeline::call`].
    ///
    /// # Panics
    /// As [`Pipeline::call_keyed`].
    pub fn call_keyed<'a, T: 'a, E: 'a, F, Fut, C>(
        &self,
        key: crate::pipeline::KeyLayers<'a>,
        classifier: &'a C,
        op: F,
    ) -> impl Future<Output = Result<T, Error<E>>> + 'a
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
        C: crate::classify::Classifier<T, E> + ?Sized,
    {
        let pipeline = self.current();
        async move { pipeline.call_keyed(key, classifier, op).await }
    }
}

impl std::fmt::Debug for LivePipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LivePipeline")
            .field(&self.current())
            .finish()
    }
}
