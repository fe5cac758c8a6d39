//! The whole policy of one resilience pipeline, as plain data, its one validator and its
//! defaults.
//!
//! A [`Policy`] is what a DSL string set, a named policy in a config file, and the arguments of
//! `#[circuit_breaker(..)]` all turn into. Every layer is optional; the `order` says how the
//! configured layers nest, outermost first.
//!
//! - [`Policy::validate`] is the one validator. Every way of building a pipeline runs it: config
//!   files, `policy = ".."`, [`Pipeline::from_policy`](crate::pipeline::Pipeline::from_policy),
//!   [`PipelineBuilder::build`](crate::pipeline::PipelineBuilder::build), the DSL parsers and
//!   the attribute at compile time. Its errors are structured ([`FieldError`]: a [`Field`], the
//!   [`Rule`] broken, a message); each of those callers only shows them its own way: at the
//!   tokens of a DSL string, at the key of a config file, at the option of the attribute, as a
//!   [`BuildError`](crate::pipeline::BuildError).
//! - [`defaults`] is the one table of what a left-out value means.

pub mod defaults;
mod validate;

pub use crate::bulkhead::{BulkheadPolicy, MAX_CONCURRENT};
pub use crate::field::{Field, FieldError, Rule, ValidationError};
pub use validate::scope_errors;
pub(crate) use validate::{check_retry, policy_errors};

use crate::adaptive::AdaptiveLimitPolicy;
use crate::breaker::BreakerPolicy;
use crate::hedge::HedgePolicy;
use crate::layer::Layer;
use crate::ratelimit::RateLimitPolicy;
use crate::retry::RetryPolicy;
use crate::throttle::ThrottlePolicy;
use std::time::Duration;

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
    /// Rate limit, if any ([`crate::ratelimit`]).
    pub rate_limit: Option<RateLimitPolicy>,
    /// Hedging, if any ([`crate::hedge`]). Like a retry of more than one attempt, it needs
    /// `idempotent`.
    pub hedge: Option<HedgePolicy>,
    /// Adaptive concurrency limit, if any ([`crate::adaptive`]).
    pub adaptive: Option<AdaptiveLimitPolicy>,
    /// Client-side adaptive throttling, if any ([`crate::throttle`]).
    pub throttle: Option<ThrottlePolicy>,
    /// The nesting of the configured layers, outermost first; `None` means
    /// [`Layer::DEFAULT_ORDER`] restricted to the configured layers.
    pub order: Option<Vec<Layer>>,
    /// Whether the operation is idempotent. Non-idempotent operations are attempted once even
    /// when a retry policy is set, unless this is `true` (case BR-35); so
    /// [`validate`](Self::validate) refuses a retry of more than one attempt without it
    /// (config files and `policy = ".."` go through it), where it would do nothing.
    pub idempotent: bool,
    /// Where the breaker's state lives: this process (`local`, the default), or the fleet
    /// through a shared store (`shared`, `quorum(k)`; the `breaker-redis` crate). A shared
    /// scope needs a `breaker`, and its rate rules a time window of at most
    /// [`MAX_SHARED_BUCKETS`](crate::scope::MAX_SHARED_BUCKETS) buckets (a count window, "the
    /// last n calls", has no order across replicas); [`validate`](Self::validate) says so.
    pub scope: crate::scope::Scope,
}

/// Largest `max_attempts` of a retry policy.
pub const MAX_ATTEMPTS: u32 = 100;

impl Policy {
    /// The layers this policy configures, in [`Layer::DEFAULT_ORDER`].
    pub fn configured_layers(&self) -> Vec<Layer> {
        Layer::DEFAULT_ORDER
            .into_iter()
            .filter(|l| match l {
                Layer::Timeout => self.timeout.is_some(),
                Layer::Retry => self.retry.is_some(),
                Layer::Breaker => self.breaker.is_some(),
                Layer::Bulkhead => self.bulkhead.is_some(),
                Layer::RateLimit => self.rate_limit.is_some(),
                Layer::Hedge => self.hedge.is_some(),
                Layer::Adaptive => self.adaptive.is_some(),
                Layer::Throttle => self.throttle.is_some(),
            })
            .collect()
    }

    /// The effective nesting, outermost first: `order` if set, else [`Layer::DEFAULT_ORDER`]
    /// restricted to the configured layers.
    pub fn effective_order(&self) -> Vec<Layer> {
        self.order
            .clone()
            .unwrap_or_else(|| self.configured_layers())
    }

    /// Checks every layer and the rules between them, and returns all violations at once.
    ///
    /// The rules, each reported under its [`Field`] (named as in config files; the names are
    /// unique across layers) with the [`Rule`] it breaks:
    /// - the breaker: everything [`BreakerPolicy::validate`] checks;
    /// - retry (`max_attempts`, `backoff`): 1..=100 attempts; an exponential backoff has a
    ///   non-zero base, a factor in `1.0..=100.0` and `max >= base`; linear has `max >= base`;
    /// - `timeout` and `deadline` are non-zero, and `timeout <= deadline` (inclusive: an attempt
    ///   may use the whole deadline);
    /// - bulkhead (`max_concurrent`): 1..=1_000_000;
    /// - `order`: names each layer at most once, names only configured layers, and names every
    ///   configured layer ([`check_order`](crate::layer::check_order));
    /// - a retry of more than one attempt needs `idempotent` (case BR-35).
    ///
    /// # Errors
    /// A [`ValidationError`] listing every invalid field.
    ///
    /// # Examples
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::policy::Policy;
    /// use std::time::Duration;
    /// let policy = Policy {
    ///     timeout: Some(Duration::from_secs(5)),
    ///     deadline: Some(Duration::from_secs(2)),
    ///     ..Policy::default()
    /// };
    /// assert_eq!(
    ///     policy.validate().unwrap_err().to_string(),
    ///     "invalid policy: `timeout`: attempt timeout (5s) must be <= deadline (2s)"
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), ValidationError> {
        ValidationError::check(validate::policy_errors(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Backoff;

    fn fields(p: &Policy) -> Vec<(&'static str, String)> {
        p.validate()
            .err()
            .map(|e| {
                e.errors
                    .into_iter()
                    .map(|e| (e.field.key(), e.message))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn empty_policy_is_valid() {
        assert_eq!(Policy::default().validate(), Ok(()));
    }

    #[test]
    fn timeout_equal_to_deadline_is_accepted() {
        let p = Policy {
            timeout: Some(Duration::from_secs(2)),
            deadline: Some(Duration::from_secs(2)),
            ..Policy::default()
        };
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn order_rules() {
        let p = Policy {
            retry: Some(RetryPolicy::NONE),
            timeout: Some(Duration::from_secs(1)),
            bulkhead: Some(BulkheadPolicy {
                max_concurrent: 1,
                max_wait: Duration::ZERO,
            }),
            order: Some(vec![Layer::Retry, Layer::Breaker, Layer::Retry]),
            ..Policy::default()
        };
        assert_eq!(
            fields(&p),
            [
                (
                    "order",
                    "layer `breaker` is in the order but not configured; configure `breaker` \
                     or remove it from the order"
                        .to_owned()
                ),
                (
                    "order",
                    "layer `retry` appears twice; each layer may appear at most once".to_owned()
                ),
                (
                    "order",
                    "layer `bulkhead` is configured but missing from the order; add it".to_owned()
                ),
                (
                    "order",
                    "layer `timeout` is configured but missing from the order; add it".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn zero_durations_and_bad_retry_are_reported_together() {
        let p = Policy {
            retry: Some(RetryPolicy {
                max_attempts: 101,
                backoff: Backoff::Exponential {
                    base: Duration::ZERO,
                    factor: 0.5,
                    max: Duration::ZERO,
                },
                jitter: crate::retry::Jitter::None,
            }),
            timeout: Some(Duration::ZERO),
            deadline: Some(Duration::ZERO),
            idempotent: true,
            ..Policy::default()
        };
        let got: Vec<_> = fields(&p).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            got,
            ["max_attempts", "backoff", "backoff", "timeout", "deadline"]
        );
    }

    /// BR-35 in a policy: a retry that could never retry (not idempotent) is an error, not a
    /// silent single attempt; a single-attempt retry needs no idempotency.
    #[test]
    fn retry_without_idempotency_is_refused() {
        let retry = |max_attempts| {
            Some(RetryPolicy {
                max_attempts,
                ..RetryPolicy::default()
            })
        };
        let p = Policy {
            retry: retry(3),
            ..Policy::default()
        };
        assert_eq!(
            fields(&p),
            [(
                "max_attempts",
                "3 attempts, but only operations declared idempotent are retried and this \
                 policy is not; add `idempotent = true`, or `retry = \"none\"`"
                    .to_owned()
            )]
        );
        for ok in [
            Policy {
                retry: retry(3),
                idempotent: true,
                ..Policy::default()
            },
            Policy {
                retry: retry(1),
                ..Policy::default()
            },
        ] {
            assert_eq!(fields(&ok), []);
        }
    }
}
