//! The errors of a bulkhead.

use std::time::Duration;

/// Every slot of a bulkhead was taken (and stayed taken for the allowed wait): the call was
/// rejected locally and the dependency was not called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bulkhead full: {max_concurrent} calls in flight (waited {waited:?})")]
pub struct BulkheadFull {
    /// The bulkhead's limit.
    pub max_concurrent: u32,
    /// How long the call waited for a slot (zero when the bulkhead rejects at once).
    pub waited: Duration,
}

/// A bulkhead policy whose limit is out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bulkhead `max_concurrent` ({max_concurrent}) must be in 1..={}",
    super::MAX_CONCURRENT
)]
pub struct InvalidBulkhead {
    /// The rejected value.
    pub max_concurrent: u32,
}
