use crate::breaker::Rejected;
use std::error::Error;
use std::fmt;

/// The error of a [`BreakerService`](super::BreakerService): a local rejection, or the inner
/// service's own error, kept apart so a caller can choose a fallback for the first.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerError<E> {
    /// The breaker rejected the call; the inner service was not called.
    Rejected(Rejected),
    /// The inner service (its `poll_ready` or its response future) failed.
    Inner(E),
}

impl<E> BreakerError<E> {
    /// Whether the breaker rejected the call.
    pub fn is_rejected(&self) -> bool {
        matches!(self, BreakerError::Rejected(_))
    }

    /// The inner error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            BreakerError::Inner(e) => Some(e),
            BreakerError::Rejected(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for BreakerError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerError::Rejected(r) => fmt::Display::fmt(r, f),
            BreakerError::Inner(_) => f.write_str("the guarded service failed"),
        }
    }
}

impl<E: Error + 'static> Error for BreakerError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BreakerError::Rejected(r) => Some(r),
            BreakerError::Inner(e) => Some(e),
        }
    }
}
