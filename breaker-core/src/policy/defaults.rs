//! What a left-out value means: one table for the DSL, config files, the attribute and the
//! `Default` impls, so `"3x"`, a `[retry]` table with no keys and `RetryPolicy::default()` are
//! the same policy.
//!
//! | value | default |
//! | --- | --- |
//! | retry attempts (`[retry]` without `max_attempts`) | [`RETRY_ATTEMPTS`] = 3 |
//! | backoff (`"3x"`, `[retry]` without `backoff`) | [`BACKOFF`] = `exp(100ms, factor 2, max 10s)` |
//! | `linear` / `exp` without arguments | base [`BACKOFF_BASE`], factor [`BACKOFF_FACTOR`], `step` = the base |
//! | backoff `max` left out | [`backoff_max`]: [`BACKOFF_MAX`], or the base if larger |
//! | jitter | none ([`Jitter::None`]) |
//! | breaker | [`BreakerPolicy::default`](crate::breaker::BreakerPolicy::default) |
//! | `cooldown_max` left out | [`cooldown_max`]: the cooldown, or 10 × the cooldown when it grows |
//! | `min_calls` left out | [`default_min_calls`]: a count window's size, [`TIME_WINDOW_MIN_CALLS`] for a time window |
//! | bulkhead wait | [`BULKHEAD_MAX_WAIT`] = zero (reject at once when full) |
//! | `idempotent` | `false` (the attribute: `true` when `retry` is written) |
//! | `order` | [`Layer::DEFAULT_ORDER`](crate::layer::Layer::DEFAULT_ORDER) restricted to the configured layers |

use crate::breaker::SlidingWindow;
use crate::retry::{Backoff, Jitter, RetryPolicy};
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
/// How long a call waits for a bulkhead slot when the policy does not say: not at all.
pub const BULKHEAD_MAX_WAIT: Duration = Duration::ZERO;

/// The cap of a `linear` or `exp` backoff written without `max`.
pub fn backoff_max(base: Duration) -> Duration {
    BACKOFF_MAX.max(base)
}

/// The cap of a breaker's cooldown written without one: the cooldown itself when it does not
/// grow (`multiplier` 1), else 10 × the cooldown.
pub fn cooldown_max(cooldown: Duration, multiplier: f64) -> Duration {
    if multiplier == 1.0 {
        cooldown
    } else {
        cooldown.saturating_mul(10)
    }
}

/// `min_calls` of a time window when none is given. (A count window's default is its size: the
/// rate is judged once the window is full.)
pub const TIME_WINDOW_MIN_CALLS: u32 = 10;

/// The `min_calls` a window gets when none is given: the size of a count window,
/// [`TIME_WINDOW_MIN_CALLS`] for a time window.
pub fn default_min_calls(window: SlidingWindow) -> u32 {
    match window {
        SlidingWindow::Count(n) => n,
        SlidingWindow::Time { .. } => TIME_WINDOW_MIN_CALLS,
    }
}
