//! The one validator of a policy, and its structured errors.
//!
//! Every way of building a pipeline applies these rules: [`Policy::validate`] (config files,
//! `policy = ".."`, [`Pipeline::from_policy`](crate::pipeline::Pipeline::from_policy)), the
//! builder, the DSL parsers and the attribute. They differ only in how they show a
//! [`FieldError`]: the DSL at the tokens that set the field, a config file at the key, the
//! attribute at the option (see [`Field`]), the builder as a [`BuildError`] variant.
//!
//! [`BuildError`]: crate::pipeline::BuildError

use super::field::Field;
use super::{BulkheadPolicy, Policy, MAX_ATTEMPTS, MAX_CONCURRENT};
use crate::breaker::BreakerPolicy;
use crate::layer::{check_order, OrderError};
use crate::retry::{Backoff, RetryPolicy};
use crate::scope::Scope;
use std::fmt;
use std::time::Duration;

/// Which rule a [`FieldError`] reports, for callers that word an error themselves (the
/// builder's [`BuildError`](crate::pipeline::BuildError) variants, the attribute's hints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The value is outside its range or does not fit the other values of its layer; the
    /// message says which.
    Range,
    /// Zero where at least 1 or a non-zero duration is required (`max_attempts`, `timeout`,
    /// `deadline`).
    NonZero,
    /// `timeout` is longer than `deadline` (reported at `timeout`).
    TimeoutWithinDeadline,
    /// A retry of more than one attempt in a policy not declared idempotent (case BR-35;
    /// reported at `max_attempts`).
    Idempotent,
    /// A rule of the layer order (reported at `order`).
    Order(OrderError),
}

/// One invalid value of a policy: which field, which rule, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldError {
    /// The field.
    pub field: Field,
    /// The rule it breaks.
    pub rule: Rule,
    /// What is wrong and what is expected, lowercase.
    pub message: String,
    /// The other fields the rule reads besides `field`; empty when it judges the value of
    /// `field` alone. A config file reports an error of a value inherited from `[default]`
    /// once, at `default`, if the rule reads that value alone, and per policy otherwise (a
    /// policy may set the other fields).
    pub reads: &'static [Field],
}

impl FieldError {
    /// A [`Rule::Range`] error.
    pub fn new(field: Field, message: impl Into<String>) -> FieldError {
        FieldError::of(field, Rule::Range, message)
    }

    /// An error under `rule`.
    pub fn of(field: Field, rule: Rule, message: impl Into<String>) -> FieldError {
        FieldError {
            field,
            rule,
            message: message.into(),
            reads: &[],
        }
    }

    /// This error, of a rule that also reads `fields` (see [`FieldError::reads`]).
    pub fn reading(mut self, fields: &'static [Field]) -> FieldError {
        self.reads = fields;
        self
    }

    /// The order problem, for a [`Rule::Order`] error.
    pub fn order(&self) -> Option<OrderError> {
        match self.rule {
            Rule::Order(o) => Some(o),
            _ => None,
        }
    }
}

impl fmt::Display for FieldError {
    /// `` `field`: message ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

/// Every invalid value found in a policy, in field order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid policy: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
pub struct ValidationError {
    /// The individual errors; never empty.
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    /// `Ok` when `errors` is empty.
    pub(crate) fn check(errors: Vec<FieldError>) -> Result<(), ValidationError> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { errors })
        }
    }
}

/// Checks a retry policy: `max_attempts` in `1..=100`; exponential backoff needs a non-zero
/// base, a factor in `1.0..=100.0` and `max >= base`; linear backoff needs `max >= base`.
pub(crate) fn check_retry(retry: &RetryPolicy, errors: &mut Vec<FieldError>) {
    if retry.max_attempts == 0 || retry.max_attempts > MAX_ATTEMPTS {
        let rule = if retry.max_attempts == 0 {
            Rule::NonZero
        } else {
            Rule::Range
        };
        errors.push(FieldError::of(
            Field::MaxAttempts,
            rule,
            format!(
                "must be in 1..={MAX_ATTEMPTS} (attempts in total, the first included), got {}",
                retry.max_attempts
            ),
        ));
    }
    let mut push = |message: String| errors.push(FieldError::new(Field::Backoff, message));
    let (base, max) = match retry.backoff {
        Backoff::Fixed { .. } => return,
        Backoff::Linear { base, max, .. } => (base, max),
        Backoff::Exponential { base, factor, max } => {
            if base.is_zero() {
                push("exponential base delay must be non-zero (0 times any factor stays 0)".into());
            }
            if !(1.0..=100.0).contains(&factor) {
                push(format!("factor must be in 1.0..=100.0, got {factor}"));
            }
            (base, max)
        }
    };
    if max < base {
        push(format!(
            "max ({max:?}) must be >= the base delay ({base:?})"
        ));
    }
}

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

/// A zero `timeout` or `deadline`.
fn check_non_zero(field: Field, d: Option<Duration>, errors: &mut Vec<FieldError>) {
    if d == Some(Duration::ZERO) {
        errors.push(FieldError::of(
            field,
            Rule::NonZero,
            "must be non-zero, got 0s",
        ));
    }
}

/// The rules a breaker must meet to run in a shared `scope` (the fleet's own rules; every
/// other rule is the breaker's): its rate rules need a time window (a count window, "the last
/// n calls", has no order across replicas), of at most
/// [`MAX_SHARED_BUCKETS`](crate::scope::MAX_SHARED_BUCKETS) buckets. Reported at
/// [`Field::Window`], reading [`Field::Scope`]. Empty for `local`.
pub fn scope_errors(breaker: &BreakerPolicy, scope: Scope) -> Vec<FieldError> {
    use crate::breaker::SlidingWindow;
    use crate::scope::MAX_SHARED_BUCKETS;
    let mut errors = Vec::new();
    if !scope.is_shared() || !breaker.uses_window() {
        return errors;
    }
    match breaker.window {
        SlidingWindow::Count(n) => errors.push(
            FieldError::new(
                Field::Window,
                format!(
                    "a count window (the last {n} calls) has no order across replicas, so \
                     scope `{scope}` cannot share it: give the rate rules a time window \
                     (`window = \"10s\"`, DSL `50% of 10s`)"
                ),
            )
            .reading(&[Field::Scope]),
        ),
        SlidingWindow::Time { buckets, .. } if buckets > MAX_SHARED_BUCKETS => errors.push(
            FieldError::new(
                Field::Window,
                format!(
                    "under scope `{scope}` a time window has at most {MAX_SHARED_BUCKETS} \
                     buckets (the store keeps each breaker under 1 KiB), got {buckets}"
                ),
            )
            .reading(&[Field::Scope]),
        ),
        SlidingWindow::Time { .. } => {}
    }
    errors
}

/// Every rule of [`Policy::validate`], in field order.
pub(crate) fn policy_errors(policy: &Policy) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(breaker) = &policy.breaker {
        if let Err(e) = breaker.validate() {
            errors.extend(e.errors);
        }
    }
    if let Some(retry) = &policy.retry {
        check_retry(retry, &mut errors);
        // Only idempotent operations are retried (case BR-35): a retry policy on a policy not
        // declared idempotent would silently make one attempt.
        if retry.max_attempts > 1 && !policy.idempotent {
            errors.push(
                FieldError::of(
                    Field::MaxAttempts,
                    Rule::Idempotent,
                    format!(
                    "{} attempts, but only operations declared idempotent are retried and this \
                     policy is not; add `idempotent = true`, or `retry = \"none\"`",
                    retry.max_attempts
                ),
                )
                .reading(&[Field::Idempotent]),
            );
        }
    }
    check_non_zero(Field::Timeout, policy.timeout, &mut errors);
    check_non_zero(Field::Deadline, policy.deadline, &mut errors);
    if let (Some(timeout), Some(deadline)) = (policy.timeout, policy.deadline) {
        if timeout > deadline {
            errors.push(
                FieldError::of(
                    Field::Timeout,
                    Rule::TimeoutWithinDeadline,
                    format!(
                        "attempt timeout ({}) must be <= deadline ({})",
                        humantime::format_duration(timeout),
                        humantime::format_duration(deadline)
                    ),
                )
                .reading(&[Field::Deadline]),
            );
        }
    }
    if let Some(bulkhead) = &policy.bulkhead {
        check_bulkhead(bulkhead, &mut errors);
    }
    if policy.scope.is_shared() {
        match &policy.breaker {
            Some(breaker) => errors.extend(scope_errors(breaker, policy.scope)),
            None => errors.push(FieldError::new(
                Field::Scope,
                format!(
                    "scope `{}` shares the breaker, but the policy has no `breaker`",
                    policy.scope
                ),
            )),
        }
    }
    if let Some(order) = &policy.order {
        let configured = policy.configured_layers();
        for problem in check_order(order, &configured) {
            errors.push(FieldError::of(
                Field::Order,
                Rule::Order(problem),
                problem.to_string(),
            ));
        }
    }
    errors
}
