use super::TimeoutService;
use crate::pipeline::BuildError;
use std::time::Duration;
use tower_layer::Layer;

/// Wraps services in a [`TimeoutService`]; see the [module docs](super).
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
}

impl TimeoutLayer {
    /// A layer limiting every call to `timeout`.
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
        Ok(TimeoutLayer { timeout })
    }

    /// The limit of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimeoutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimeoutService::from_parts(inner, self.timeout)
    }
}
