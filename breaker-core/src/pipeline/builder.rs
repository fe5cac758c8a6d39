//! Building a [`Pipeline`] by hand or from a [`Policy`].

use super::{FallbackOn, Pipeline};
use crate::adaptive::{AdaptiveLimitPolicy, AdaptiveLimiter, InvalidAdaptiveLimit};
use crate::breaker::{BreakerPolicy, CircuitBreaker, ValidationError};
use crate::bulkhead::{Bulkhead, BulkheadPolicy, InvalidBulkhead};
use crate::clock::Clock;
use crate::hedge::{Hedge, HedgePolicy, InvalidHedge};
use crate::layer::{Layer, OrderError};
use crate::observe::{self, BreakerMetrics};
use crate::policy::{policy_errors, Field, FieldError, Policy, Rule};
use crate::ratelimit::{InvalidRateLimit, RateLimitPolicy, RateLimiter};
use crate::record::Recorder;
use crate::retry::{RetryBudget, RetryPolicy};
use crate::throttle::{InvalidThrottle, ThrottlePolicy, Throttler};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a pipeline could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A layer appears more than once in the order.
    #[error("layer `{0}` appears more than once in the order")]
    DuplicateLayer(Layer),
    /// A name in the order is not a layer.
    #[error("unknown layer `{0}`; expected one of {layers}", layers = Layer::names_in_default_order())]
    UnknownLayer(String),
    /// The order names a layer that has no configuration.
    #[error("layer `{0}` is in the order but not configured")]
    NotConfigured(Layer),
    /// A configured layer is missing from an explicit order.
    #[error("layer `{0}` is configured but missing from the order")]
    MissingFromOrder(Layer),
    /// The breaker policy is invalid. The message names every wrong field (so the policy's
    /// error is in the message, not repeated as the `source()`).
    #[error("invalid breaker policy: {}", field_errors(.0))]
    Breaker(ValidationError),
    /// The bulkhead policy is invalid.
    #[error("invalid bulkhead policy: {0}")]
    Bulkhead(InvalidBulkhead),
    /// The retry policy is invalid (more than 100 attempts, a shrinking exponential backoff,
    /// ...), or it retries in a [`Policy`] not declared idempotent (case BR-35). The message
    /// names every wrong field.
    #[error("invalid retry policy: {}", field_errors(.0))]
    Retry(ValidationError),
    /// Any other invalid value of the policy.
    #[error(transparent)]
    Policy(ValidationError),
    /// An order that cannot work (`hedge` outside `retry`).
    #[error("invalid order: {0}")]
    Order(OrderError),
    /// The rate-limit policy is invalid.
    #[error(transparent)]
    RateLimit(InvalidRateLimit),
    /// The hedging policy is invalid.
    #[error(transparent)]
    Hedge(InvalidHedge),
    /// The adaptive-limit policy is invalid (a floor above the ceiling, ...).
    #[error(transparent)]
    Adaptive(InvalidAdaptiveLimit),
    /// The throttling policy is invalid.
    #[error(transparent)]
    Throttle(InvalidThrottle),
    /// A zero attempt count, a zero timeout or deadline, or a deadline shorter than the
    /// timeout.
    #[error("invalid `{field}`: {reason}")]
    Invalid {
        /// The field, such as `timeout` or `retry.max_attempts`.
        field: &'static str,
        /// What is wrong, lowercase.
        reason: &'static str,
    },
}

/// `` `field`: message; `field`: message ``.
fn field_errors(e: &ValidationError) -> String {
    let fields: Vec<String> = e.errors.iter().map(ToString::to_string).collect();
    fields.join("; ")
}

impl BuildError {
    /// The builder's rendering of the validator's errors (never empty) for `policy`: an
    /// order problem first, then a zero or inconsistent limit, then the errors of one layer.
    fn from_errors(mut errors: Vec<FieldError>, policy: &Policy) -> BuildError {
        if let Some(problem) = errors.iter().find_map(FieldError::order) {
            return match problem {
                OrderError::Twice { layer, .. } => BuildError::DuplicateLayer(layer),
                OrderError::NotConfigured { layer, .. } => BuildError::NotConfigured(layer),
                OrderError::Missing { layer } => BuildError::MissingFromOrder(layer),
                other => BuildError::Order(other),
            };
        }
        let limit = |e: &FieldError| match (e.rule, e.field) {
            (Rule::NonZero, Field::MaxAttempts) => Some((e.field.path(), "must be at least 1")),
            (Rule::NonZero, _) => Some((e.field.path(), "must be non-zero")),
            (Rule::TimeoutWithinDeadline, _) => Some(("deadline", "must be at least the timeout")),
            _ => None,
        };
        if let Some((field, reason)) = errors.iter().find_map(limit) {
            return BuildError::Invalid { field, reason };
        }
        // The rate limit, hedging, adaptive limit and throttling: their one field's problems.
        let first = errors[0].field;
        let problems = || {
            errors
                .iter()
                .filter(|e| e.field == first)
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
        };
        match first {
            Field::RateLimit => {
                return BuildError::RateLimit(InvalidRateLimit {
                    problems: problems(),
                })
            }
            Field::Hedge if errors[0].rule != Rule::Idempotent => {
                return BuildError::Hedge(InvalidHedge {
                    problems: problems(),
                })
            }
            Field::Adaptive => {
                return BuildError::Adaptive(InvalidAdaptiveLimit {
                    problems: problems(),
                })
            }
            Field::Throttle => {
                return BuildError::Throttle(InvalidThrottle {
                    problems: problems(),
                })
            }
            _ => {}
        }
        let layer = errors[0].field.layer();
        errors.retain(|e| e.field.layer() == layer);
        match layer {
            Some(Layer::Breaker) => BuildError::Breaker(ValidationError { errors }),
            Some(Layer::Retry) => BuildError::Retry(ValidationError { errors }),
            Some(Layer::Bulkhead) => BuildError::Bulkhead(InvalidBulkhead {
                max_concurrent: policy.bulkhead.map_or(0, |b| b.max_concurrent),
            }),
            Some(
                Layer::Timeout
                | Layer::RateLimit
                | Layer::Hedge
                | Layer::Adaptive
                | Layer::Throttle,
            )
            | None => BuildError::Policy(ValidationError { errors }),
        }
    }
}

enum BreakerSource {
    Policy(BreakerPolicy),
    Handle(CircuitBreaker),
}

enum BulkheadSource {
    Policy(BulkheadPolicy),
    Handle(Bulkhead),
}

/// A layer given as a policy (built at `build`) or as a handle (shared with others).
enum Source<P, H> {
    Policy(P),
    Handle(H),
}

impl<P: Copy, H> Source<P, H> {
    fn policy(&self, of: impl Fn(&H) -> P) -> P {
        match self {
            Source::Policy(p) => *p,
            Source::Handle(h) => of(h),
        }
    }

    fn build<E>(self, new: impl FnOnce(P) -> Result<H, E>) -> Result<H, E> {
        match self {
            Source::Policy(p) => new(p),
            Source::Handle(h) => Ok(h),
        }
    }
}

/// Builds a [`Pipeline`]; start with [`Pipeline::builder`] or [`PipelineBuilder::from_policy`].
///
/// Every layer is optional; the ones configured are stacked in the order given to
/// [`order`](Self::order), outermost first, or in [`Layer::DEFAULT_ORDER`] restricted to them.
/// See the [pipeline docs](super) for what each order means.
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Default)]
pub struct PipelineBuilder {
    breaker: Option<BreakerSource>,
    name: Option<String>,
    clock: Option<Clock>,
    totals: bool,
    retry: Option<RetryPolicy>,
    budget: Option<RetryBudget>,
    timeout: Option<Duration>,
    deadline: Option<Duration>,
    bulkhead: Option<BulkheadSource>,
    rate: Option<Source<RateLimitPolicy, RateLimiter>>,
    hedge: Option<Source<HedgePolicy, Hedge>>,
    adaptive: Option<Source<AdaptiveLimitPolicy, AdaptiveLimiter>>,
    throttle: Option<Source<ThrottlePolicy, Throttler>>,
    order: Option<Vec<Layer>>,
    unknown: Option<String>,
    idempotent: bool,
    /// Whether `idempotent` came with a whole [`Policy`] and was not restated: then the
    /// error of a retry or hedge that could never run again speaks of the policy's keys, not
    /// of the builder's methods.
    whole_policy: bool,
    seed: Option<u64>,
    fallback_on: FallbackOn,
    recorder: Option<Recorder>,
}

impl PipelineBuilder {
    /// A builder with every layer of `policy` (its breaker, retry, timeout, deadline, bulkhead,
    /// order and idempotency). Further calls may add to or override them.
    ///
    /// [`build`](Self::build) then checks everything [`Policy::validate`] checks, including
    /// that a retry of more than one attempt, or a hedge, is declared idempotent (case BR-35).
    pub fn from_policy(policy: &Policy) -> Self {
        PipelineBuilder {
            breaker: policy.breaker.clone().map(BreakerSource::Policy),
            retry: policy.retry,
            timeout: policy.timeout,
            deadline: policy.deadline,
            bulkhead: policy.bulkhead.map(BulkheadSource::Policy),
            rate: policy.rate_limit.map(Source::Policy),
            hedge: policy.hedge.map(Source::Policy),
            adaptive: policy.adaptive.map(Source::Policy),
            throttle: policy.throttle.map(Source::Policy),
            order: policy.order.clone(),
            idempotent: policy.idempotent,
            whole_policy: true,
            ..PipelineBuilder::default()
        }
    }

    /// A circuit breaker built from `policy` at [`build`](Self::build), with the builder's
    /// [`clock`](Self::clock), [`name`](Self::name) and [`totals`](Self::totals). With the `metrics`
    /// feature its transitions and state are counted ([`observe::instrument`],
    /// [`observe::track`]).
    pub fn breaker_policy(mut self, policy: BreakerPolicy) -> Self {
        self.breaker = Some(BreakerSource::Policy(policy));
        self
    }

    /// An existing circuit breaker (for example one shared with other pipelines, or one from a
    /// registry). Its own clock and listeners are kept: for transition metrics, build it
    /// through [`observe::instrument`]. The pipeline counts calls and rejections under its
    /// name either way.
    pub fn breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = Some(BreakerSource::Handle(breaker));
        self
    }

    /// Whether a breaker built from a policy keeps lifetime totals (default off, as for every
    /// breaker; read them with `Pipeline::breaker()` then `snapshot().totals`). See
    /// [`BreakerBuilder::totals`](crate::breaker::BreakerBuilder::totals) for what they cost.
    pub fn totals(mut self, on: bool) -> Self {
        self.totals = on;
        self
    }

    /// The clock of a breaker built from a policy (default [`Clock::system`]; use
    /// [`Clock::tokio`] on a paused test runtime). Retry sleeps and timeouts always use tokio's
    /// timer.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The name of a breaker built from a policy (default: empty), shown in its events, its
    /// errors and the pipeline's metrics. A breaker given with [`breaker`](Self::breaker)
    /// keeps its own.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Retry with `policy`. Only operations declared [`idempotent`](Self::idempotent) are
    /// retried (case BR-35): [`build`](Self::build) refuses a retry of more than one attempt
    /// unless `.idempotent(true)` is called, as a config file refuses one without
    /// `idempotent = true` and the attribute one with `idempotent = false`.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// A retry budget (gRPC-style token bucket) shared by the calls of this pipeline, and of
    /// any other pipeline given a clone of it. Without one, retries are bounded only by the
    /// attempt count and the deadline.
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Whether the operation is idempotent (default `false`, as in a [`Policy`]). Retry
    /// (more than one attempt) and hedging send a call more than once, so
    /// [`build`](Self::build) refuses either on a pipeline not declared idempotent: a retry or
    /// hedge that could never run again would silently do nothing (case BR-35).
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self.whole_policy = false;
        self
    }

    /// The timeout layer: its limit, non-zero.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The total deadline of a call (attempts, backoff sleeps and bulkhead wait), non-zero and
    /// at least the timeout. It is not a layer of the order: it always covers the whole call.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// A bulkhead built from `policy` at [`build`](Self::build).
    pub fn bulkhead_policy(mut self, policy: BulkheadPolicy) -> Self {
        self.bulkhead = Some(BulkheadSource::Policy(policy));
        self
    }

    /// An existing bulkhead, for example one shared by several pipelines.
    pub fn bulkhead(mut self, bulkhead: Bulkhead) -> Self {
        self.bulkhead = Some(BulkheadSource::Handle(bulkhead));
        self
    }

    /// A rate limiter built from `policy` at [`build`](Self::build), on the builder's
    /// [`clock`](Self::clock) (the `rate` layer; [`crate::ratelimit`]).
    pub fn rate_limit(mut self, policy: RateLimitPolicy) -> Self {
        self.rate = Some(Source::Policy(policy));
        self
    }

    /// An existing rate limiter, for example one shared by several pipelines.
    pub fn rate_limiter(mut self, limiter: RateLimiter) -> Self {
        self.rate = Some(Source::Handle(limiter));
        self
    }

    /// Hedging with `policy` (the `hedge` layer; [`crate::hedge`]). Only operations declared
    /// [`idempotent`](Self::idempotent) are hedged, as only they are retried (case BR-35):
    /// [`build`](Self::build) refuses a hedge without `.idempotent(true)`.
    pub fn hedge(mut self, policy: HedgePolicy) -> Self {
        self.hedge = Some(Source::Policy(policy));
        self
    }

    /// An existing hedge (sharing its record of recent latencies with other pipelines).
    pub fn hedge_with(mut self, hedge: Hedge) -> Self {
        self.hedge = Some(Source::Handle(hedge));
        self
    }

    /// An adaptive concurrency limit built from `policy` at [`build`](Self::build), timing
    /// calls on the builder's [`clock`](Self::clock) (the `adaptive` layer;
    /// [`crate::adaptive`]).
    pub fn adaptive_limit(mut self, policy: AdaptiveLimitPolicy) -> Self {
        self.adaptive = Some(Source::Policy(policy));
        self
    }

    /// An existing adaptive limiter, for example one shared by several pipelines.
    pub fn adaptive_limiter(mut self, limiter: AdaptiveLimiter) -> Self {
        self.adaptive = Some(Source::Handle(limiter));
        self
    }

    /// Client-side adaptive throttling built from `policy` at [`build`](Self::build), its
    /// window on the builder's [`clock`](Self::clock) and its draws seeded by
    /// [`seed`](Self::seed) when given (the `throttle` layer; [`crate::throttle`]).
    pub fn throttle(mut self, policy: ThrottlePolicy) -> Self {
        self.throttle = Some(Source::Policy(policy));
        self
    }

    /// An existing throttler, for example one shared by every pipeline calling one
    /// dependency.
    pub fn throttler(mut self, throttler: Throttler) -> Self {
        self.throttle = Some(Source::Handle(throttler));
        self
    }

    /// The nesting of the layers, outermost first. Every configured layer must appear exactly
    /// once, and no other.
    pub fn order(mut self, order: impl IntoIterator<Item = Layer>) -> Self {
        self.order = Some(order.into_iter().collect());
        self.unknown = None;
        self
    }

    /// Like [`order`](Self::order), by layer names (`bulkhead`, `retry`, `breaker`,
    /// `timeout`); an unknown name is reported by [`build`](Self::build).
    pub fn order_names<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut order = Vec::new();
        self.unknown = None;
        for name in names {
            match Layer::from_name(name) {
                Some(l) => order.push(l),
                None => {
                    self.unknown.get_or_insert_with(|| name.to_owned());
                }
            }
        }
        self.order = Some(order);
        self
    }

    /// Seeds the jitter's random source, for reproducible delays in tests. Without a seed it
    /// is seeded from the operating system.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Which errors [`Pipeline::call_with_fallback`] hands to the fallback (default
    /// [`FallbackOn::RejectionOrFailure`]).
    pub fn fallback_on(mut self, on: FallbackOn) -> Self {
        self.fallback_on = on;
        self
    }

    /// Records every attempt of every call in `recorder` (one JSON Lines line each, for
    /// `breaker simulate`): its start, its duration and how it ended (a success, a failure or
    /// ignored error as the classifier judges it, a timeout, a local rejection, a
    /// cancellation). A call refused before any attempt (by a layer outside retry) is
    /// recorded as one rejected attempt; retries are recorded with their attempt number.
    /// Off by default; see [`crate::record`] for the cost (one non-blocking hand-off per
    /// attempt).
    pub fn recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// The policy the builder's layers describe, for the validator.
    fn policy(&self) -> Policy {
        Policy {
            breaker: self.breaker.as_ref().map(|b| match b {
                BreakerSource::Policy(p) => p.clone(),
                BreakerSource::Handle(h) => (*h.policy()).clone(),
            }),
            retry: self.retry,
            timeout: self.timeout,
            deadline: self.deadline,
            bulkhead: self.bulkhead.as_ref().map(|b| match b {
                BulkheadSource::Policy(p) => *p,
                BulkheadSource::Handle(h) => h.policy(),
            }),
            rate_limit: self.rate.as_ref().map(|r| r.policy(RateLimiter::policy)),
            hedge: self.hedge.as_ref().map(|h| h.policy(Hedge::policy)),
            adaptive: self
                .adaptive
                .as_ref()
                .map(|a| a.policy(AdaptiveLimiter::policy)),
            throttle: self.throttle.as_ref().map(|t| t.policy(Throttler::policy)),
            order: self.order.clone(),
            idempotent: self.idempotent,
            scope: crate::scope::Scope::Local,
        }
    }

    /// Validates the configuration and the order with the validator of
    /// [`Policy::validate`], and builds the pipeline.
    ///
    /// # Errors
    /// [`BuildError`]: an unknown layer name, a layer twice in the order, a layer in the order
    /// but not configured or configured but not in an explicit order, an invalid breaker,
    /// retry or bulkhead policy, a zero timeout or deadline, a deadline shorter than the
    /// timeout; a retry of more than one attempt ([`BuildError::Retry`]) or a hedge
    /// ([`BuildError::Policy`]) on a pipeline not declared [`idempotent`](Self::idempotent),
    /// as [`Policy::validate`] refuses them in a config file.
    pub fn build(self) -> Result<Pipeline, BuildError> {
        if let Some(name) = self.unknown {
            return Err(BuildError::UnknownLayer(name));
        }
        let policy = self.policy();
        let mut errors = policy_errors(&policy);
        if !self.whole_policy {
            // The same rule as a config file's, in the builder's words.
            for e in errors.iter_mut().filter(|e| e.rule == Rule::Idempotent) {
                e.message = builder_idempotency_hint(e.field, policy.retry);
            }
        }
        if !errors.is_empty() {
            return Err(BuildError::from_errors(errors, &policy));
        }
        let order = policy.effective_order();
        let clock = self.clock.unwrap_or_default();
        let name = self.name.unwrap_or_default();
        let rate = self
            .rate
            .map(|r| r.build(|p| RateLimiter::with_clock(p, clock.clone())))
            .transpose()
            .map_err(BuildError::RateLimit)?;
        let hedge = self
            .hedge
            .map(|h| h.build(|p| Hedge::new(p).map(|h| h.name(name.clone()))))
            .transpose()
            .map_err(BuildError::Hedge)?;
        let adaptive = self
            .adaptive
            .map(|a| {
                a.build(|p| {
                    AdaptiveLimiter::with_clock(p, clock.clone()).map(|a| a.name(name.clone()))
                })
            })
            .transpose()
            .map_err(BuildError::Adaptive)?;
        let seed = self.seed;
        let throttle = self
            .throttle
            .map(|t| {
                t.build(|p| {
                    Throttler::with_clock(p, clock.clone()).map(|t| match seed {
                        Some(s) => t.seeded(s),
                        None => t,
                    })
                })
            })
            .transpose()
            .map_err(BuildError::Throttle)?;
        let breaker = match self.breaker {
            None => None,
            Some(BreakerSource::Handle(b)) => Some(b),
            Some(BreakerSource::Policy(p)) => {
                let b = observe::instrument(
                    CircuitBreaker::builder(p)
                        .name(name)
                        .clock(clock)
                        .totals(self.totals),
                )
                .build()
                .map_err(BuildError::Breaker)?;
                observe::track(&b);
                Some(b)
            }
        };
        let bulkhead = match self.bulkhead {
            None => None,
            Some(BulkheadSource::Handle(b)) => Some(b),
            Some(BulkheadSource::Policy(p)) => {
                Some(Bulkhead::new(p).map_err(BuildError::Bulkhead)?)
            }
        };
        let rng = match self.seed {
            Some(s) => SmallRng::seed_from_u64(s),
            None => SmallRng::from_entropy(),
        };
        let metrics = match &breaker {
            Some(b) => BreakerMetrics::new(b.name()),
            None => BreakerMetrics::noop(),
        };
        let mut layers = [Layer::Breaker; 8];
        layers[..order.len()].copy_from_slice(&order);
        let mut pipeline = Pipeline {
            layers,
            len: order.len(),
            retry_at: order.iter().position(|l| *l == Layer::Retry),
            hedge_at: order
                .iter()
                .position(|l| *l == Layer::Hedge)
                .filter(|_| self.idempotent),
            rate,
            hedge,
            adaptive,
            throttle,
            breaker,
            retry: self.retry,
            budget: self.budget,
            timeout: self.timeout,
            deadline: self.deadline,
            bulkhead,
            idempotent: self.idempotent,
            fallback_on: self.fallback_on,
            rng: Arc::new(Mutex::new(rng)),
            metrics,
            recorder: self.recorder,
            breaker_only: false,
        };
        pipeline.breaker_only = pipeline.is_breaker_only();
        Ok(pipeline)
    }
}

impl std::fmt::Debug for PipelineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineBuilder")
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .field("deadline", &self.deadline)
            .field("order", &self.order)
            .finish_non_exhaustive()
    }
}

/// The builder's message for a retry or hedge on a pipeline not declared idempotent (the
/// validator's speaks of config keys).
fn builder_idempotency_hint(field: Field, retry: Option<RetryPolicy>) -> String {
    match field {
        Field::Hedge => "hedging sends a call more than once, but only operations declared \
                         idempotent are hedged and this pipeline is not; call \
                         `.idempotent(true)` on the builder, or remove the hedge"
            .to_owned(),
        _ => format!(
            "{} attempts, but only operations declared idempotent are retried and this \
             pipeline is not; call `.idempotent(true)` on the builder, or remove the retry",
            retry.map_or(1, |r| r.max_attempts)
        ),
    }
}
