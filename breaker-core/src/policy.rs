//! The whole policy of one resilience pipeline, as plain data.
//!
//! A [`Policy`] is what a DSL string set, a named policy in a config file, and the arguments of
//! `#[circuit_breaker(..)]` all turn into. Every layer is optional; the `order` says how the
//! configured layers nest, outermost first.

use crate::breaker::BreakerPolicy;
use crate::layer::Layer;
use crate::retry::RetryPolicy;
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

/// The policy of a whole pipeline. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Policy {
    /// The circuit breaker, if any.
    pub breaker: Option<BreakerPolicy>,
    /// Retry, if any.
    pub retry: Option<RetryPolicy>,
    /// Per-attempt timeout, if any. Must be non-zero.
    pub timeout: Option<Duration>,
    /// Total deadline over all attempts and backoff sleeps, if any. Must be non-zero and at
    /// least `timeout`.
    pub deadline: Option<Duration>,
    /// Bulkhead, if any.
    pub bulkhead: Option<BulkheadPolicy>,
    /// The nesting of the configured layers, outermost first; `None` means
    /// [`Layer::DEFAULT_ORDER`] restricted to the configured layers.
    pub order: Option<Vec<Layer>>,
    /// Whether the operation is idempotent. Non-idempotent operations are attempted once even
    /// when a retry policy is set, unless this is `true` (case BR-35).
    pub idempotent: bool,
}
