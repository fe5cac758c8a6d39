//! Why a retry loop stopped before the operation succeeded.

use std::fmt;
use std::time::Duration;

/// Why the retry layer gave up, carried by [`Error::GaveUp`](crate::Error::GaveUp) together
/// with the number of attempts made and the last attempt's error.
///
/// Errors that the retry layer never retries (an error the classifier calls not transient, a
/// local rejection, the total deadline, any error of a non-idempotent operation) are returned
/// unchanged and never wrapped in `GaveUp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// Every allowed attempt was made (`max_attempts` of the [`RetryPolicy`](super::RetryPolicy)).
    AttemptsExhausted,
    /// The next backoff sleep would have ended past the deadline (the total deadline, or a
    /// timeout layer placed outside retry), so no sleep was started (case BR-32).
    DeadlineExhausted {
        /// The delay that did not fit.
        next_delay: Duration,
        /// The time left before the deadline when the decision was made.
        remaining: Duration,
    },
    /// The server asked to wait longer (a `Retry-After` hint) than the time left before the
    /// deadline, so the call failed at once instead of waiting for nothing (case BR-34).
    RetryAfterExceedsBudget {
        /// The delay the server asked for.
        required: Duration,
        /// The time left before the deadline.
        remaining: Duration,
    },
    /// The [`RetryBudget`](super::RetryBudget) token bucket is at or below half full: retries
    /// are throttled because too many recent attempts failed.
    Throttled,
}

impl GiveUpReason {
    /// A lowercase, snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            GiveUpReason::AttemptsExhausted => "attempts_exhausted",
            GiveUpReason::DeadlineExhausted { .. } => "deadline_exhausted",
            GiveUpReason::RetryAfterExceedsBudget { .. } => "retry_after_exceeds_budget",
            GiveUpReason::Throttled => "throttled",
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GiveUpReason::AttemptsExhausted => f.write_str("attempts exhausted"),
            GiveUpReason::DeadlineExhausted {
                next_delay,
                remaining,
            } => write!(
                f,
                "retry budget exhausted: the next delay of {next_delay:?} would end past the \
                 deadline ({remaining:?} left)"
            ),
            GiveUpReason::RetryAfterExceedsBudget {
                required,
                remaining,
            } => write!(
                f,
                "required delay exceeds remaining budget: the server asked to wait \
                 {required:?}, {remaining:?} left"
            ),
            GiveUpReason::Throttled => {
                f.write_str("retries throttled: the retry token bucket is at or below half full")
            }
        }
    }
}
