//! The retry loop's decisions: what the breaker records for an error, and what follows an
//! attempt's error.

use super::ctx::Limit;
use super::*;
use crate::classify::Outcome;
use crate::retry::{Delays, RetryPolicy};
use crate::timeout::TimeoutKind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::Instant;

/// What the breaker records for a result seen at its level.
pub(super) fn error_outcome<E, C: ErrorClassifier<E> + ?Sized>(e: &Error<E>, class: &C) -> Outcome {
    match e {
        Error::Inner(e) => class.outcome(e),
        Error::Timeout(_) => Outcome::Failure,
        Error::GaveUp { last, .. } => error_outcome(last, class),
        // A bulkhead nested inside the breaker: not the dependency's fault.
        Error::Rejected(_) => Outcome::Ignored,
    }
}

pub(super) enum Step<T, E> {
    Done(Result<T, Error<E>>),
    Sleep(Duration),
}

/// The state of one call's retry loop.
pub(super) struct RetryRun<'p> {
    pipeline: &'p Pipeline,
    policy: &'p RetryPolicy,
    max: u32,
    attempts: u32,
    /// Boxed and created at the first retry: most calls never need it.
    delays: Option<Box<Delays<SmallRng>>>,
}

impl<'p> RetryRun<'p> {
    #[inline]
    pub(super) fn new(pipeline: &'p Pipeline) -> Self {
        let policy = pipeline.retry.as_ref().unwrap_or(&RetryPolicy::NONE);
        let max = if pipeline.idempotent {
            policy.max_attempts.max(1)
        } else {
            1
        };
        RetryRun {
            pipeline,
            policy,
            max,
            attempts: 0,
            delays: None,
        }
    }

    pub(super) fn next_delay(&mut self) -> Duration {
        let (policy, rng) = (&self.policy, &self.pipeline.rng);
        self.delays
            .get_or_insert_with(|| {
                let seed = rng.lock().unwrap_or_else(|p| p.into_inner()).gen::<u64>();
                Box::new(policy.delays(SmallRng::seed_from_u64(seed)))
            })
            .next()
            .unwrap_or(Duration::ZERO)
    }

    /// Notes a successful attempt.
    #[inline]
    pub(super) fn succeeded(&self) {
        if let Some(b) = &self.pipeline.budget {
            b.deposit();
        }
    }

    /// Decides what follows an attempt's error. `limit` is the earliest limit enclosing
    /// the retry layer.
    #[cold]
    pub(super) fn after_error<T, E, C: ErrorClassifier<E> + ?Sized>(
        &mut self,
        error: Error<E>,
        class: &C,
        limit: Option<Limit>,
    ) -> Step<T, E> {
        self.attempts += 1;
        let budget = self.pipeline.budget.as_ref();
        let (transient, hint) = match &error {
            Error::Inner(e) => (class.is_transient(e), class.retry_after(e)),
            // The timeout layer's own limit, unless it is the limit enclosing the retry
            // loop (a timeout layer outside retry) and so has already passed for it too.
            Error::Timeout(t) => (
                t.kind == TimeoutKind::Attempt && !limit.is_some_and(|l| Instant::now() >= l.at),
                None,
            ),
            _ => (false, None),
        };
        if !transient {
            return Step::Done(Err(error));
        }
        if let Some(b) = budget {
            b.withdraw();
        }
        if self.max <= 1 {
            return Step::Done(Err(error));
        }
        let attempts = self.attempts;
        let gave_up = |reason| {
            Step::Done(Err(Error::GaveUp {
                attempts,
                reason,
                last: Box::new(error),
            }))
        };
        if self.attempts >= self.max {
            return gave_up(GiveUpReason::AttemptsExhausted);
        }
        if budget.is_some_and(|b| !b.can_retry()) {
            return gave_up(GiveUpReason::Throttled);
        }
        let delay = match hint {
            Some(h) => h,
            None => self.next_delay(),
        };
        if let Some(l) = limit {
            let remaining = l.at.saturating_duration_since(Instant::now());
            if delay > remaining {
                return gave_up(match hint {
                    Some(required) => GiveUpReason::RetryAfterExceedsBudget {
                        required,
                        remaining,
                    },
                    None => GiveUpReason::DeadlineExhausted {
                        next_delay: delay,
                        remaining,
                    },
                });
            }
        }
        crate::observe::retry(self.pipeline.metrics_name());
        Step::Sleep(delay)
    }
}
