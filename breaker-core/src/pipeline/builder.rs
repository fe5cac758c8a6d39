//! Building a [`Pipeline`] by hand or from a [`Policy`].

use super::{FallbackOn, Pipeline};
use crate::breaker::{BreakerPolicy, CircuitBreaker, ValidationError};
use crate::bulkhead::{Bulkhead, BulkheadPolicy, InvalidBulkhead};
use crate::clock::Clock;
use crate::layer::Layer;
use crate::observe::{self, BreakerMetrics};
use crate::policy::Policy;
use crate::record::Recorder;
use crate::retry::{RetryBudget, RetryPolicy};
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
    #[error("unknown layer `{0}`; expected one of `bulkhead`, `retry`, `breaker`, `timeout`")]
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
    /// Another value is out of range.
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

enum BreakerSource {
    Policy(BreakerPolicy),
    Handle(CircuitBreaker),
}

enum BulkheadSource {
    Policy(BulkheadPolicy),
    Handle(Bulkhead),
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
    retry: Option<RetryPolicy>,
    budget: Option<RetryBudget>,
    timeout: Option<Duration>,
    deadline: Option<Duration>,
    bulkhead: Option<BulkheadSource>,
    order: Option<Vec<Layer>>,
    unknown: Option<String>,
    idempotent: bool,
    seed: Option<u64>,
    fallback_on: FallbackOn,
    recorder: Option<Recorder>,
}

impl PipelineBuilder {
    /// A builder with every layer of `policy` (its breaker, retry, timeout, deadline, bulkhead,
    /// order and idempotency). Further calls may add to or override them.
    pub fn from_policy(policy: &Policy) -> Self {
        PipelineBuilder {
            breaker: policy.breaker.clone().map(BreakerSource::Policy),
            retry: policy.retry,
            timeout: policy.timeout,
            deadline: policy.deadline,
            bulkhead: policy.bulkhead.map(BulkheadSource::Policy),
            order: policy.order.clone(),
            idempotent: policy.idempotent,
            ..PipelineBuilder::default()
        }
    }

    /// A circuit breaker built from `policy` at [`build`](Self::build), with the builder's
    /// [`clock`](Self::clock). With the `metrics` feature its transitions and state are
    /// counted ([`observe::instrument`], [`observe::track`]).
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
    /// retried; others are attempted once (case BR-35).
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

    /// Whether the operation is idempotent (default `false`): only then does the retry layer
    /// make more than one attempt.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
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

    /// Validates the configuration and the order, and builds the pipeline.
    ///
    /// # Errors
    /// [`BuildError`]: a layer twice in the order, an unknown layer name, a layer in the order
    /// but not configured or configured but not in an explicit order, an invalid breaker or
    /// bulkhead policy, a zero timeout or deadline, a deadline shorter than the timeout, or
    /// `max_attempts` of 0.
    pub fn build(self) -> Result<Pipeline, BuildError> {
        if let Some(name) = self.unknown {
            return Err(BuildError::UnknownLayer(name));
        }
        let configured = |l: Layer| match l {
            Layer::Breaker => self.breaker.is_some(),
            Layer::Retry => self.retry.is_some(),
            Layer::Timeout => self.timeout.is_some(),
            Layer::Bulkhead => self.bulkhead.is_some(),
        };
        let order: Vec<Layer> = match &self.order {
            Some(order) => {
                for (i, l) in order.iter().enumerate() {
                    if order[..i].contains(l) {
                        return Err(BuildError::DuplicateLayer(*l));
                    }
                    if !configured(*l) {
                        return Err(BuildError::NotConfigured(*l));
                    }
                }
                if let Some(l) = Layer::DEFAULT_ORDER
                    .into_iter()
                    .find(|l| configured(*l) && !order.contains(l))
                {
                    return Err(BuildError::MissingFromOrder(l));
                }
                order.clone()
            }
            None => Layer::DEFAULT_ORDER
                .into_iter()
                .filter(|l| configured(*l))
                .collect(),
        };
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(BuildError::Invalid {
                field: "timeout",
                reason: "must be non-zero",
            });
        }
        if self.deadline.is_some_and(|t| t.is_zero()) {
            return Err(BuildError::Invalid {
                field: "deadline",
                reason: "must be non-zero",
            });
        }
        if let (Some(t), Some(d)) = (self.timeout, self.deadline) {
            if d < t {
                return Err(BuildError::Invalid {
                    field: "deadline",
                    reason: "must be at least the timeout",
                });
            }
        }
        if self.retry.is_some_and(|r| r.max_attempts == 0) {
            return Err(BuildError::Invalid {
                field: "retry.max_attempts",
                reason: "must be at least 1",
            });
        }
        let breaker = match self.breaker {
            None => None,
            Some(BreakerSource::Handle(b)) => Some(b),
            Some(BreakerSource::Policy(p)) => {
                let b = observe::instrument(
                    CircuitBreaker::builder(p)
                        .name(self.name.unwrap_or_default())
                        .clock(self.clock.unwrap_or_default()),
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
        let mut layers = [Layer::Breaker; 4];
        layers[..order.len()].copy_from_slice(&order);
        Ok(Pipeline {
            layers,
            len: order.len(),
            retry_at: order.iter().position(|l| *l == Layer::Retry),
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
        })
    }
}
