//! What a left-out value means: one table for the DSL, config files, the attribute and the
//! `Default` impls, so `"3x"`, a `[retry]` table with no keys and `RetryPolicy::default()` are
//! the same policy. Each layer keeps its own defaults beside its policy type (`retry`,
//! `breaker`, `bulkhead`); this module lists them all.
//!
//! | value | default |
//! | --- | --- |
//! | retry attempts (`[retry]` without `max_attempts`) | [`RETRY_ATTEMPTS`] = 3 |
//! | backoff (`"3x"`, `[retry]` without `backoff`) | [`BACKOFF`] = `exp(100ms, factor 2, max 10s)` |
//! | `linear` / `exp` without arguments | base [`BACKOFF_BASE`], factor [`BACKOFF_FACTOR`], `step` = the base |
//! | backoff `max` left out | [`backoff_max`]: [`BACKOFF_MAX`], or the base if larger |
//! | jitter | none ([`Jitter::None`](crate::retry::Jitter::None)) |
//! | breaker | [`BreakerPolicy::default`](crate::breaker::BreakerPolicy::default) |
//! | `cooldown_max` left out | [`cooldown_max`]: the cooldown, or 10 × the cooldown when it grows |
//! | `min_calls` left out | [`default_min_calls`]: a count window's size, [`TIME_WINDOW_MIN_CALLS`] for a time window |
//! | bulkhead wait | [`BULKHEAD_MAX_WAIT`] = zero (reject at once when full) |
//! | `idempotent` | `false` (the attribute: `true` when `retry` is written) |
//! | `order` | [`Layer::DEFAULT_ORDER`](crate::layer::Layer::DEFAULT_ORDER) restricted to the configured layers |

pub use crate::breaker::defaults::{cooldown_max, default_min_calls, TIME_WINDOW_MIN_CALLS};
pub use crate::bulkhead::policy::BULKHEAD_MAX_WAIT;
pub use crate::retry::defaults::{
    backoff_max, BACKOFF, BACKOFF_BASE, BACKOFF_FACTOR, BACKOFF_MAX, RETRY, RETRY_ATTEMPTS,
};
