//! The errors of an adaptive concurrency limit.

/// Every slot under the adaptive limit was taken: the call was rejected locally and the
/// dependency was not called.
///
/// Displayed as `concurrency limit reached: 12 calls in flight, limit 12`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("concurrency limit reached: {in_flight} calls in flight, limit {limit}")]
pub struct LimitReached {
    /// The limit when the call was refused.
    pub limit: u32,
    /// The calls in flight when it was refused (at least `limit`; more right after the limit
    /// fell).
    pub in_flight: u32,
}

/// An adaptive-limit policy out of range; the message names every wrong value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid adaptive limit: {}", .problems.join("; "))]
pub struct InvalidAdaptiveLimit {
    /// What is wrong, one entry per value, lowercase.
    pub problems: Vec<String>,
}
