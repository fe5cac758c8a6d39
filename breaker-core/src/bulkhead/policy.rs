//! The bulkhead's policy as plain data, its range and its default.

use crate::field::{Field, FieldError};
use std::time::Duration;

/// The concurrency limit of a bulkhead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadPolicy {
    /// At most this many calls run at once. Range `1..=1_000_000`.
    pub max_concurrent: u32,
    /// How long a call may wait for a slot before it is rejected; zero (the default) rejects at
    /// once when full.
    pub max_wait: Duration,
}

/// Largest `max_concurrent` of a bulkhead.
pub const MAX_CONCURRENT: u32 = 1_000_000;

/// How long a call waits for a bulkhead slot when the policy does not say: not at all.
pub const BULKHEAD_MAX_WAIT: Duration = Duration::ZERO;

/// Checks a bulkhead: `max_concurrent` in `1..=1_000_000`.
pub(crate) fn check_bulkhead(bulkhead: &BulkheadPolicy, errors: &mut Vec<FieldError>) {
    if !(1..=MAX_CONCURRENT).contains(&bulkhead.max_concurrent) {
        errors.push(FieldError::new(
            Field::MaxConcurrent,
            format!(
                "must be in 1..={MAX_CONCURRENT}, got {}",
                bulkhead.max_concurrent
            ),
        ));
    }
}
