//! The errors of adaptive throttling.

use std::fmt;

/// Adaptive throttling rejected the call locally (it drew a number below the rejection
/// probability): the dependency was not called.
///
/// Displayed as `throttled: 60 requests and 10 accepted in the window, 65% rejected locally`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Throttled {
    /// Requests in the window when the call was rejected (the rejected ones included).
    pub requests: u32,
    /// Requests the dependency accepted in the window.
    pub accepts: u32,
    /// The policy's `K`, in thousandths.
    pub k_milli: u32,
}

impl Throttled {
    /// The rejection probability of the rule at that moment:
    /// `max(0, (requests - K × accepts) / (requests + 1))`.
    pub fn probability(&self) -> f64 {
        super::probability(
            self.requests,
            self.accepts,
            f64::from(self.k_milli) / 1000.0,
        )
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "throttled: {} requests and {} accepted in the window, {:.0}% rejected locally",
            self.requests,
            self.accepts,
            self.probability() * 100.0
        )
    }
}

/// A throttling policy out of range; the message names every wrong value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid throttling: {}", .problems.join("; "))]
pub struct InvalidThrottle {
    /// What is wrong, one entry per value, lowercase.
    pub problems: Vec<String>,
}
