//! The errors of a bulkhead.

use std::time::Duration;

/// Every slot of a bulkhead was taken (and stayed taken for the allowed wait): the call was
/// rejected locally and the dependency was not called.
///
/// Displayed as `bulkhead full: 8 calls in flight (waited 50ms)`, without the part in
/// parentheses when the call did not wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bulkhead full: {max_concurrent} calls in flight{}", waited_suffix(*.waited))]
pub struct BulkheadFull {
    /// The bulkhead's limit.
    pub max_concurrent: u32,
    /// How long the call waited for a slot (zero when the bulkhead rejects at once).
    pub waited: Duration,
}

/// `` (waited 40ms)``, or nothing when the call did not wait (no wait configured, or none
/// that could end in a slot): "waited 0ns" would only say that no wait was configured.
pub(crate) fn waited_suffix(waited: Duration) -> String {
    if waited.is_zero() {
        String::new()
    } else {
        format!(" (waited {waited:?})")
    }
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
