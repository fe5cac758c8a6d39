//! What a retry that leaves something out means. The one table of every layer's defaults is
//! [`crate::policy::defaults`], which lists these.

use super::{Backoff, Jitter, RetryPolicy};
use std::time::Duration;

/// Attempts of a retry that does not say (the first included).
pub const RETRY_ATTEMPTS: u32 = 3;
/// Base delay of `linear` and `exp` when none is given.
pub const BACKOFF_BASE: Duration = Duration::from_millis(100);
/// Factor of `exp` when none is given.
pub const BACKOFF_FACTOR: f64 = 2.0;
/// Cap of `linear` and `exp` when none is given (raised to the base delay if that is larger).
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// The backoff of a retry that names none: `exp(100ms, factor 2, max 10s)`.
pub const BACKOFF: Backoff = Backoff::Exponential {
    base: BACKOFF_BASE,
    factor: BACKOFF_FACTOR,
    max: BACKOFF_MAX,
};
/// A retry that says nothing but that it retries: 3 attempts, [`BACKOFF`], no jitter. This is
/// `RetryPolicy::default()` and what `"3x"` parses to.
pub const RETRY: RetryPolicy = RetryPolicy {
    max_attempts: RETRY_ATTEMPTS,
    backoff: BACKOFF,
    jitter: Jitter::None,
};

/// The cap of a `linear` or `exp` backoff written without `max`.
pub fn backoff_max(base: Duration) -> Duration {
    BACKOFF_MAX.max(base)
}
