//! The retry loop's decisions: what the breaker records for an error, and what follows an
//! attempt's result (an error, or an `Ok` value the classifier calls transient).

use super::ctx::Limit;
use super::*;
use crate::classify::{Classifier, Outcome, Retry};
use crate::record::Recorded;
use crate::retry::{Delays, RetryPolicy};
use crate::timeout::TimeoutKind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::Instant;

/// What the breaker records for an error seen at its level.
pub(super) fn error_outcome<T, E, C: Classifier<T, E> + ?Sized>(
    e: &Error<E>,
    class: &C,
) -> Outcome {
    match e {
        Error::Inner(e) => class.outcome_of(Err(e)),
        Error::Timeout(_) => Outcome::Failure,
        Error::GaveUp { last, .. } => error_outcome::<T, E, C>(last, class),
        // A bulkhead nested inside the breaker: not the dependency's fault.
        Error::Rejected(_) => Outcome::Ignored,
    }
}

/// What the adaptive limit and throttling learn from a result seen at their level: the
/// classifier's outcome, a timeout a failure, and nothing (`None`) from a local refusal by a
/// layer inside them.
pub(super) fn dependency_outcome<T, E, C: Classifier<T, E> + ?Sized>(
    result: &Result<T, Error<E>>,
    class: &C,
) -> Option<Outcome> {
    match result {
        Ok(v) => Some(class.outcome_of(Ok(v))),
        Err(Error::Rejected(_)) => None,
        Err(e) => Some(error_outcome::<T, E, C>(e, class)),
    }
}

/// What a hedged call makes of an attempt's result: an answer (a success, or an error the
/// classifier ignores) ends the call; a failure or timeout is kept while another attempt may
/// answer; a local refusal is kept only if nothing failed.
pub(super) fn hedge_verdict<T, E, C: Classifier<T, E> + ?Sized>(
    result: &Result<T, Error<E>>,
    class: &C,
) -> crate::hedge::Verdict {
    use crate::hedge::Verdict;
    match dependency_outcome(result, class) {
        None => Verdict::Refused,
        Some(Outcome::Failure) => Verdict::Fail,
        Some(Outcome::Success | Outcome::Ignored) => Verdict::Accept,
    }
}

pub(super) enum Step<T, E> {
    Done(Result<T, Error<E>>),
    Sleep(Duration),
}

/// What follows a transient result, whatever it was.
enum Decision {
    /// No further attempt: the result goes back as it is (`None`), or as a retry that gave up.
    Stop(Option<GiveUpReason>),
    /// Another attempt after this delay.
    Sleep(Duration),
}

/// The state of one call's retry loop.
pub(super) struct RetryRun<'p> {
    pipeline: &'p Pipeline,
    attempts: u32,
    /// Boxed and created at the first retry: most calls never need it.
    delays: Option<Box<Delays<SmallRng>>>,
    /// When the attempt being recorded started (the recorder's [`start`](crate::record::Recorder::start)),
    /// [`NOT_RECORDING`] when none is: the pipeline's recorder, folded into the loop's state
    /// rather than a guard of its own beside it, keeps the call's future small.
    recording: u64,
}

/// `RetryRun::recording` when no attempt is being recorded.
const NOT_RECORDING: u64 = u64::MAX;

impl<'p> RetryRun<'p> {
    #[inline]
    pub(super) fn new(pipeline: &'p Pipeline) -> Self {
        // The policy and the attempt bound are read from the pipeline when an attempt fails
        // (`decide`), not kept here: every call's future holds this state.
        RetryRun {
            pipeline,
            attempts: 0,
            delays: None,
            recording: NOT_RECORDING,
        }
    }

    /// The retry policy (none: one attempt).
    fn policy(&self) -> &'p RetryPolicy {
        self.pipeline.retry.as_ref().unwrap_or(&RetryPolicy::NONE)
    }

    /// The most attempts a call may make: the policy's, or one for an operation that is not
    /// idempotent.
    fn max(&self) -> u32 {
        if self.pipeline.idempotent {
            self.policy().max_attempts.max(1)
        } else {
            1
        }
    }

    /// Starts recording the next attempt, if the pipeline has a recorder.
    #[inline]
    pub(super) fn begin_attempt(&mut self) {
        if let Some(r) = &self.pipeline.recorder {
            self.recording = r.start();
        }
    }

    /// Records how the attempt begun last ended (`outcome`, asked only when recording).
    #[inline]
    pub(super) fn end_attempt(&mut self, outcome: impl FnOnce() -> Recorded) {
        if self.recording != NOT_RECORDING {
            self.record(outcome());
        }
    }

    #[cold]
    fn record(&mut self, outcome: Recorded) {
        let start = std::mem::replace(&mut self.recording, NOT_RECORDING);
        if let Some(r) = &self.pipeline.recorder {
            // This attempt is counted in `attempts` only once its result has been judged.
            let attempt = u16::try_from(self.attempts.saturating_add(1)).unwrap_or(u16::MAX);
            r.record_attempt(start, outcome, None, attempt);
        }
    }

    pub(super) fn next_delay(&mut self) -> Duration {
        let (policy, rng) = (self.policy(), &self.pipeline.rng);
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
    pub(super) fn after_error<T, E, C: Classifier<T, E> + ?Sized>(
        &mut self,
        error: Error<E>,
        class: &C,
        limit: Option<Limit>,
    ) -> Step<T, E> {
        let retry = match &error {
            Error::Inner(e) => class.retry_of(Err(e)),
            // The timeout layer's own limit, unless it is the limit enclosing the retry
            // loop (a timeout layer outside retry) and so has already passed for it too.
            Error::Timeout(t)
                if t.kind == TimeoutKind::Attempt
                    && !limit.is_some_and(|l| Instant::now() >= l.at) =>
            {
                Retry::Yes
            }
            _ => Retry::No,
        };
        match self.decide(retry, limit) {
            Decision::Stop(None) => Step::Done(Err(error)),
            Decision::Stop(Some(reason)) => Step::Done(Err(Error::GaveUp {
                attempts: self.attempts,
                reason,
                last: Box::new(error),
            })),
            Decision::Sleep(d) => Step::Sleep(d),
        }
    }

    /// Decides what follows an `Ok` value that the classifier calls transient (`retry`):
    /// another attempt after a delay, or the value itself (Polly's model: a retry that gives up
    /// on a result returns the last result).
    #[cold]
    pub(super) fn after_ok<T, E>(
        &mut self,
        value: T,
        retry: Retry,
        limit: Option<Limit>,
    ) -> Step<T, E> {
        match self.decide(retry, limit) {
            Decision::Sleep(d) => Step::Sleep(d),
            Decision::Stop(_) => Step::Done(Ok(value)),
        }
    }

    /// The one retry rule for any result: counts the attempt, then stops unless `retry` is
    /// transient, the operation may be retried, attempts and the retry budget are left, and
    /// the next delay (the server's hint, else the backoff's) fits before `limit`.
    fn decide(&mut self, retry: Retry, limit: Option<Limit>) -> Decision {
        self.attempts += 1;
        if !retry.is_transient() {
            return Decision::Stop(None);
        }
        let budget = self.pipeline.budget.as_ref();
        if let Some(b) = budget {
            b.withdraw();
        }
        let max = self.max();
        if max <= 1 {
            return Decision::Stop(None);
        }
        if self.attempts >= max {
            return Decision::Stop(Some(GiveUpReason::AttemptsExhausted));
        }
        if budget.is_some_and(|b| !b.can_retry()) {
            return Decision::Stop(Some(GiveUpReason::Throttled));
        }
        let hint = retry.hint();
        let delay = match hint {
            Some(h) => h,
            None => self.next_delay(),
        };
        if let Some(l) = limit {
            let remaining = l.at.saturating_duration_since(Instant::now());
            if delay > remaining {
                return Decision::Stop(Some(match hint {
                    Some(required) => GiveUpReason::RetryAfterExceedsBudget {
                        required,
                        remaining,
                    },
                    None => GiveUpReason::DeadlineExhausted {
                        next_delay: delay,
                        remaining,
                    },
                }));
            }
        }
        crate::observe::retry(self.pipeline.metrics_name());
        Decision::Sleep(delay)
    }
}

/// An attempt begun and never ended: the call's future was dropped while the attempt ran
/// (a cancellation), or the operation panicked (recorded as cancelled too, as a dropped
/// permit is counted).
impl Drop for RetryRun<'_> {
    fn drop(&mut self) {
        if self.recording != NOT_RECORDING {
            self.record(Recorded::Cancelled);
        }
    }
}
