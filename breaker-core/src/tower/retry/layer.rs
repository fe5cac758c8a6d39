use super::RetryService;
use crate::pipeline::{AllErrors, BuildError, Pipeline};
use crate::retry::{RetryBudget, RetryPolicy};
use tower_layer::Layer;

/// Wraps services in a [`RetryService`]; see the [module docs](super).
#[derive(Clone, Debug)]
pub struct RetryLayer<C = AllErrors> {
    pipeline: Pipeline,
    classifier: C,
}

impl RetryLayer {
    /// A layer retrying with `policy`: every error is transient ([`AllErrors`]) until
    /// [`with_classifier`](Self::with_classifier) says otherwise. Requests are treated as
    /// idempotent: adding this layer is the declaration that they may be sent again.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] if `policy.max_attempts` is 0.
    pub fn new(policy: RetryPolicy) -> Result<Self, BuildError> {
        Self::build(policy, None, None)
    }

    /// Like [`new`](Self::new), with a retry budget shared by every service of this layer (and
    /// by anything else given a clone of `budget`), and optionally a seed for the jitter.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_budget(
        policy: RetryPolicy,
        budget: RetryBudget,
        seed: Option<u64>,
    ) -> Result<Self, BuildError> {
        Self::build(policy, Some(budget), seed)
    }

    fn build(
        policy: RetryPolicy,
        budget: Option<RetryBudget>,
        seed: Option<u64>,
    ) -> Result<Self, BuildError> {
        let mut builder = Pipeline::builder().retry(policy).idempotent(true);
        if let Some(b) = budget {
            builder = builder.retry_budget(b);
        }
        if let Some(s) = seed {
            builder = builder.seed(s);
        }
        Ok(RetryLayer {
            pipeline: builder.build()?,
            classifier: AllErrors,
        })
    }
}

impl<C> RetryLayer<C> {
    /// Uses `classifier` to decide which results, responses and errors, are transient and to
    /// read `Retry-After` hints (see [`Classifier`](crate::classify::Classifier)).
    pub fn with_classifier<C2>(self, classifier: C2) -> RetryLayer<C2> {
        RetryLayer {
            pipeline: self.pipeline,
            classifier,
        }
    }

    /// The pipeline (a retry layer only) the services run calls through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
}

impl<S, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = RetryService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService::from_parts(inner, self.pipeline.clone(), self.classifier.clone())
    }
}
