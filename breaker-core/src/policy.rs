//! The whole policy of one resilience pipeline, as plain data.
//!
//! A [`Policy`] is what a DSL string set, a named policy in a config file, and the arguments of
//! `#[circuit_breaker(..)]` all turn into. Every layer is optional; the `order` says how the
//! configured layers nest, outermost first.

use crate::breaker::{BreakerPolicy, FieldError, ValidationError};
use crate::layer::Layer;
use crate::retry::{Backoff, RetryPolicy};
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
    /// when a retry policy is set, unless this is `true` (case BR-35); so
    /// [`validate`](Self::validate) refuses a retry of more than one attempt without it
    /// (config files and `policy = ".."` go through it), where it would do nothing.
    pub idempotent: bool,
}

/// Largest `max_attempts` of a retry policy.
pub const MAX_ATTEMPTS: u32 = 100;
/// Largest `max_concurrent` of a bulkhead.
pub const MAX_CONCURRENT: u32 = 1_000_000;

/// Checks a retry policy: `max_attempts` in `1..=100`; exponential backoff needs a non-zero
/// base, a factor in `1.0..=100.0` and `max >= base`; linear backoff needs `max >= base`.
pub(crate) fn check_retry(retry: &RetryPolicy, errors: &mut Vec<FieldError>) {
    let mut push =
        |field: &'static str, message: String| errors.push(FieldError { field, message });
    if retry.max_attempts == 0 || retry.max_attempts > MAX_ATTEMPTS {
        push(
            "max_attempts",
            format!(
                "must be in 1..={MAX_ATTEMPTS} (attempts in total, the first included), got {}",
                retry.max_attempts
            ),
        );
    }
    match retry.backoff {
        Backoff::Fixed { .. } => {}
        Backoff::Linear { base, max, .. } => {
            if max < base {
                push(
                    "backoff",
                    format!("max ({max:?}) must be >= the base delay ({base:?})"),
                );
            }
        }
        Backoff::Exponential { base, factor, max } => {
            if base.is_zero() {
                push(
                    "backoff",
                    "exponential base delay must be non-zero (0 times any factor stays 0)".into(),
                );
            }
            if !(1.0..=100.0).contains(&factor) {
                push(
                    "backoff",
                    format!("factor must be in 1.0..=100.0, got {factor}"),
                );
            }
            if max < base {
                push(
                    "backoff",
                    format!("max ({max:?}) must be >= the base delay ({base:?})"),
                );
            }
        }
    }
}

/// Checks a bulkhead: `max_concurrent` in `1..=1_000_000`.
pub(crate) fn check_bulkhead(bulkhead: &BulkheadPolicy, errors: &mut Vec<FieldError>) {
    if bulkhead.max_concurrent == 0 || bulkhead.max_concurrent > MAX_CONCURRENT {
        errors.push(FieldError {
            field: "max_concurrent",
            message: format!(
                "must be in 1..={MAX_CONCURRENT}, got {}",
                bulkhead.max_concurrent
            ),
        });
    }
}

/// The message for a layer named twice in an order; shared by the DSL parser.
pub(crate) fn duplicate_layer(layer: Layer) -> String {
    format!("layer `{layer}` appears twice; each layer may appear at most once")
}

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
    /// The rules, each reported under the field name used in config files (the names are
    /// unique across layers):
    /// - the breaker: everything [`BreakerPolicy::validate`] checks;
    /// - retry (`max_attempts`, `backoff`): 1..=100 attempts; an exponential backoff has a
    ///   non-zero base, a factor in `1.0..=100.0` and `max >= base`; linear has `max >= base`;
    /// - `timeout` and `deadline` are non-zero, and `timeout <= deadline` (inclusive: an attempt
    ///   may use the whole deadline);
    /// - bulkhead (`max_concurrent`): 1..=1_000_000;
    /// - `order`: names each layer at most once, names only configured layers, and names every
    ///   configured layer.
    ///
    /// # Errors
    /// A [`ValidationError`] listing every invalid field.
    ///
    /// # Examples
    /// ```
    /// use breaker_core::policy::Policy;
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
        let mut errors = Vec::new();
        if let Some(breaker) = &self.breaker {
            if let Err(e) = breaker.validate() {
                errors.extend(e.errors);
            }
        }
        if let Some(retry) = &self.retry {
            check_retry(retry, &mut errors);
            // Only idempotent operations are retried (case BR-35): a retry policy on a
            // policy not declared idempotent would silently make one attempt.
            if retry.max_attempts > 1 && !self.idempotent {
                errors.push(FieldError {
                    field: "max_attempts",
                    message: format!(
                        "{} attempts, but only operations declared idempotent are retried and \
                         this policy is not; add `idempotent = true`, or `retry = \"none\"`",
                        retry.max_attempts
                    ),
                });
            }
        }
        let mut push =
            |field: &'static str, message: String| errors.push(FieldError { field, message });
        if self.timeout == Some(Duration::ZERO) {
            push("timeout", "must be non-zero, got 0s".into());
        }
        if self.deadline == Some(Duration::ZERO) {
            push("deadline", "must be non-zero, got 0s".into());
        }
        if let (Some(timeout), Some(deadline)) = (self.timeout, self.deadline) {
            if timeout > deadline {
                push(
                    "timeout",
                    format!(
                        "attempt timeout ({}) must be <= deadline ({})",
                        humantime::format_duration(timeout),
                        humantime::format_duration(deadline)
                    ),
                );
            }
        }
        if let Some(bulkhead) = &self.bulkhead {
            check_bulkhead(bulkhead, &mut errors);
        }
        if let Some(order) = &self.order {
            let configured = self.configured_layers();
            let mut seen = Vec::new();
            for &layer in order {
                if seen.contains(&layer) {
                    errors.push(FieldError {
                        field: "order",
                        message: duplicate_layer(layer),
                    });
                    continue;
                }
                seen.push(layer);
                if !configured.contains(&layer) {
                    errors.push(FieldError {
                        field: "order",
                        message: format!(
                            "layer `{layer}` is in the order but not configured; configure \
                             `{layer}` or remove it from the order"
                        ),
                    });
                }
            }
            for layer in configured {
                if !seen.contains(&layer) {
                    errors.push(FieldError {
                        field: "order",
                        message: format!(
                            "layer `{layer}` is configured but missing from the order; add it"
                        ),
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { errors })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(p: &Policy) -> Vec<(&'static str, String)> {
        p.validate()
            .err()
            .map(|e| e.errors.into_iter().map(|e| (e.field, e.message)).collect())
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
                ("order", duplicate_layer(Layer::Retry)),
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
