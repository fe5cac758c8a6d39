use super::PolicyService;
use crate::pipeline::{AllErrors, BuildError, Pipeline};
use crate::policy::Policy;
use tower_layer::Layer;

/// Wraps services in a [`PolicyService`]: a whole [`Pipeline`] as one layer; see the
/// [module docs](super).
#[derive(Clone, Debug)]
pub struct PolicyLayer<C = AllErrors> {
    pipeline: Pipeline,
    classifier: C,
}

impl PolicyLayer {
    /// The pipeline of `policy` (its breaker, retry, timeout, deadline, bulkhead, order and
    /// idempotency), with the system clock for its breaker. Every service of the layer shares
    /// the one breaker, bulkhead and retry budget.
    ///
    /// # Errors
    /// As [`Pipeline::from_policy`]; and [`BuildError::RateLimit`] for a rate limit `per key`,
    /// which needs the request's key: use [`KeyedPolicyLayer`](super::KeyedPolicyLayer).
    pub fn new(policy: &Policy) -> Result<Self, BuildError> {
        if policy.rate_limit.is_some_and(|r| r.per_key) {
            return Err(BuildError::RateLimit(crate::ratelimit::InvalidRateLimit {
                problems: vec![
                    "`per key`: a `PolicyLayer` has one rate limit for every request; use a \
                     `KeyedPolicyLayer` with `RateLimiters` to limit each key"
                        .to_owned(),
                ],
            }));
        }
        Ok(Self::from_pipeline(Pipeline::from_policy(policy)?))
    }

    /// A layer running calls through `pipeline` (built by hand, or shared with other callers).
    pub fn from_pipeline(pipeline: Pipeline) -> Self {
        PolicyLayer {
            pipeline,
            classifier: AllErrors,
        }
    }
}

impl<C> PolicyLayer<C> {
    /// Uses `classifier` to judge the inner service's results, responses and errors (breaker
    /// outcome, transience, `Retry-After`; see [`Classifier`](crate::classify::Classifier)).
    pub fn with_classifier<C2>(self, classifier: C2) -> PolicyLayer<C2> {
        PolicyLayer {
            pipeline: self.pipeline,
            classifier,
        }
    }

    /// The pipeline the services run calls through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
}

impl<S, C: Clone> Layer<S> for PolicyLayer<C> {
    type Service = PolicyService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        PolicyService::from_parts(inner, self.pipeline.clone(), self.classifier.clone())
    }
}
