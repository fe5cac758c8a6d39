//! The errors of a rate limiter.

use std::time::Duration;

/// The rate limiter had no permit for the call (and none came within the allowed wait): the
/// call was rejected locally and the dependency was not called.
///
/// Displayed as `rate limited: next permit in 40ms`, followed by ` (waited 35ms)` when the
/// call waited for a permit first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "rate limited: next permit in {retry_after:?}{}",
    crate::bulkhead::waited_suffix(*.waited)
)]
pub struct RateLimited {
    /// How long from the rejection until the limiter would grant a permit, if no other call
    /// takes it first: the GCRA's exact answer, never zero.
    pub retry_after: Duration,
    /// How long the call waited before it was rejected (zero when it was not allowed to
    /// wait, or when the permit would have come later than its wait allows).
    pub waited: Duration,
}

/// A rate-limit policy out of range; the message names every wrong value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid rate limit: {}", .problems.join("; "))]
pub struct InvalidRateLimit {
    /// What is wrong, one entry per value, lowercase: `` `rate` must be at least 1, got 0 ``.
    pub problems: Vec<String>,
}
