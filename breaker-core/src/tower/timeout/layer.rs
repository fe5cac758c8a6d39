use super::TimeoutService;
use crate::observe::TimeoutMetrics;
use crate::pipeline::BuildError;
use crate::timeout::TimeoutKind;
use std::time::Duration;
use tower_layer::Layer;

/// Wraps services in a [`TimeoutService`]; see the [module docs](super).
#[derive(Clone, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
    metrics: TimeoutMetrics,
}

impl TimeoutLayer {
    /// A layer limiting every call to `timeout`. With the `metrics` feature its timeouts are
    /// counted in [`TIMEOUTS_TOTAL`](crate::observe::TIMEOUTS_TOTAL) under `breaker=""`, as a
    /// pipeline without a breaker counts them; [`name`](Self::name) chooses the label. The
    /// counter is registered now, with the recorder installed now.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] if `timeout` is zero, as for a pipeline's timeout.
    pub fn new(timeout: Duration) -> Result<Self, BuildError> {
        if timeout.is_zero() {
            return Err(BuildError::Invalid {
                field: "timeout",
                reason: "must be non-zero",
            });
        }
        Ok(TimeoutLayer {
            timeout,
            metrics: TimeoutMetrics::new("", TimeoutKind::Attempt),
        })
    }

    /// Counts this layer's timeouts under `breaker=name` (the name of the breaker it guards,
    /// typically), with the recorder installed now.
    pub fn name(self, name: &str) -> Self {
        TimeoutLayer {
            timeout: self.timeout,
            metrics: TimeoutMetrics::new(name, TimeoutKind::Attempt),
        }
    }

    /// The limit of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimeoutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimeoutService::from_parts(inner, self.timeout, self.metrics.clone())
    }
}
