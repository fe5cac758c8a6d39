//! The one validator of a policy, and its structured errors.
//!
//! Every way of building a pipeline applies these rules: [`Policy::validate`] (config files,
//! `policy = ".."`, [`Pipeline::from_policy`](crate::pipeline::Pipeline::from_policy)), the
//! builder, the DSL parsers and the attribute. They differ only in how they show a
//! [`FieldError`]: the DSL at the tokens that set the field, a config file at the key, the
//! attribute at the option (see [`Field`]), the builder as a [`BuildError`] variant.
//!
//! [`BuildError`]: crate::pipeline::BuildError

use super::{Policy, MAX_ATTEMPTS};
use crate::bulkhead::check_bulkhead;
use crate::field::{Field, FieldError, Rule};
use crate::layer::check_order;
use crate::retry::{Backoff, RetryPolicy};
use std::time::Duration;

use crate::breaker::BreakerPolicy;
use crate::scope::Scope;
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
    // Hedging sends a call more than once: the same guard as retry.
    if policy.hedge.is_some() && !policy.idempotent {
        errors.push(
            FieldError::of(
                Field::Hedge,
                Rule::Idempotent,
                "hedging sends a call more than once, but only operations declared idempotent \
                 are hedged and this policy is not; add `idempotent = true`, or remove the hedge",
            )
            .reading(&[Field::Idempotent]),
        );
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
    // The rate limit, hedging, adaptive limit and throttling: each policy's own ranges, at its
    // one field.
    let layers = [
        (Field::RateLimit, policy.rate_limit.map(|p| p.problems())),
        (Field::Hedge, policy.hedge.map(|p| p.problems())),
        (Field::Adaptive, policy.adaptive.map(|p| p.problems())),
        (Field::Throttle, policy.throttle.map(|p| p.problems())),
    ];
    for (field, problems) in layers {
        for m in problems.unwrap_or_default() {
            errors.push(FieldError::new(field, m));
        }
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
