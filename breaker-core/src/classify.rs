//! Classification: what a call's result means to the circuit breaker and to the retry layer.
//!
//! # Two questions, about results as well as errors
//! Every entry point (a [`Pipeline`](crate::pipeline::Pipeline) call, `#[circuit_breaker]`'s
//! `classify = ..`, the tower [`BreakerLayer`](crate::tower::breaker::BreakerLayer),
//! [`RetryLayer`](crate::tower::retry::RetryLayer) and
//! [`PolicyLayer`](crate::tower::policy::PolicyLayer)) judges results with one trait,
//! [`Classifier`]. It answers two questions about a result, `Ok` value or `Err` error alike:
//!
//! - [`outcome_of`](Classifier::outcome_of): what it means to the **circuit breaker**
//!   ([`Outcome`]: a success, a failure, or ignored).
//! - [`retry_of`](Classifier::retry_of): whether the **retry** layer may try again, and after
//!   which delay the server asked for ([`Retry`]).
//!
//! The two are kept apart on purpose: a 404 is ignored by the breaker and not retried; a 503 is
//! a failure and retried; a 501 is a failure and not retried.
//!
//! # An `Ok` can be a failure
//! An HTTP client returns `Ok(response)` for a 503: the request went through, the dependency
//! did not work. A classifier may call such a value a failure (Resilience4j's `recordResult`,
//! Polly's `HandleResult`), and [`HttpClassifier`](crate::http::HttpClassifier) does for 5xx, 408
//! and 429 responses. What the caller gets is still the value:
//!
//! - The breaker records the failure, and the caller gets `Ok(value)`: the response is theirs
//!   to read. A fallback never runs for an `Ok`.
//! - If the retry layer retries it (it is [transient](Retry)), the next attempt's result
//!   replaces it. When the retry layer gives up on a failing `Ok` (attempts exhausted, the
//!   deadline, a `Retry-After` longer than the time left, a throttled budget), the caller gets
//!   the **last attempt's `Ok` value**, as Polly returns the last result; only an `Err` becomes
//!   [`Error::GaveUp`]. A later attempt refused by the breaker (which
//!   the failing values may have opened, with retry outside it) ends the call with that
//!   [`Error::Rejected`], as after errors.
//!
//! # What implements it
//! - [`AllErrors`](crate::pipeline::AllErrors), the default everywhere: every `Ok` a success,
//!   every `Err` a failure and transient. On an `Ok` it compiles to no work.
//! - [`classifier(outcome, transient)`](crate::pipeline::classifier): two closures over
//!   errors (and [`FnClassifier::retry_after`](crate::pipeline::FnClassifier::retry_after)).
//!   These two are [`ErrorClassifier`](crate::pipeline::ErrorClassifier)s: they judge errors
//!   only, and every `Ok` is a success that is never retried.
//! - [`from_fn`]: a closure over the whole result, for the breaker's verdict.
//! - [`HttpClassifier`](crate::http::HttpClassifier) (feature `http`): the standard HTTP rules
//!   for responses and errors, `Retry-After` included.
//! - [`Nested`]: a classifier of `E` applied to the [`Error<E>`](crate::Error) of a layer below
//!   (a tower `RetryLayer` around a `BreakerLayer`).
//! - Your own type: implement [`Classifier`]; both methods have defaults.
//!
//! Errors raised by the pipeline itself are classified by the pipeline, never by a classifier:
//! its timeouts are breaker failures and transient; local rejections are neither.

use crate::Error;
use std::time::Duration;

/// What one call means to a circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency worked.
    Success,
    /// The dependency failed; counts toward tripping.
    Failure,
    /// Neither: not counted anywhere (a business error such as "not found"). A half-open slot
    /// it held is released.
    Ignored,
}

impl Outcome {
    /// `success`, `failure` or `ignored`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
        }
    }
}

/// What the retry layer may do after a result; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retry {
    /// Not worth another attempt: the result goes to the caller as it is.
    No,
    /// Transient: another attempt, after the backoff's next delay.
    Yes,
    /// Transient, and the server asked for this delay before the next attempt (HTTP
    /// `Retry-After`). It replaces the backoff delay (no jitter) and is honoured even above the
    /// backoff's cap, as long as it fits before the deadline.
    After(Duration),
}

impl Retry {
    /// Whether another attempt may be made ([`Yes`](Retry::Yes) or [`After`](Retry::After)).
    #[inline(always)]
    pub const fn is_transient(self) -> bool {
        !matches!(self, Retry::No)
    }

    /// The delay the server asked for, if any.
    #[inline]
    pub const fn hint(self) -> Option<Duration> {
        match self {
            Retry::After(d) => Some(d),
            _ => None,
        }
    }

    /// [`Yes`](Retry::Yes), or [`After(d)`](Retry::After) with a hint.
    #[inline]
    pub const fn transient(hint: Option<Duration>) -> Retry {
        match hint {
            Some(d) => Retry::After(d),
            None => Retry::Yes,
        }
    }
}

/// Judges a call's results, `Ok` values and `Err` errors, for the circuit breaker and the retry
/// layer: the one classifier trait of every entry point. See the [module docs](self).
///
/// Both methods have defaults (every `Ok` a success and never retried, every `Err` a failure
/// and transient), so an implementation overrides what it needs.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::classify::{Classifier, Outcome, Retry};
///
/// /// A reply carrying a status of its own; `Err` is a transport error.
/// struct Reply { busy: bool }
///
/// struct Rules;
///
/// impl<E> Classifier<Reply, E> for Rules {
///     fn outcome_of(&self, result: Result<&Reply, &E>) -> Outcome {
///         match result {
///             Ok(reply) if reply.busy => Outcome::Failure,
///             Ok(_) => Outcome::Success,
///             Err(_) => Outcome::Failure,
///         }
///     }
///     fn retry_of(&self, result: Result<&Reply, &E>) -> Retry {
///         match result {
///             Ok(reply) if !reply.busy => Retry::No,
///             _ => Retry::Yes,
///         }
///     }
/// }
///
/// let busy: Result<&Reply, &()> = Ok(&Reply { busy: true });
/// assert_eq!(Rules.outcome_of(busy), Outcome::Failure);
/// assert_eq!(Rules.retry_of(busy), Retry::Yes);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a classifier of `Result<{T}, {E}>`",
    label = "expected a classifier of `Result<{T}, {E}>`",
    note = "a classifier implements `breaker::classify::Classifier<{T}, {E}>`; `AllErrors`, \
            `classifier(..)`, `from_fn(..)` and `HttpClassifier` (feature `http`) do"
)]
pub trait Classifier<T, E> {
    /// What `result` means to the circuit breaker. Default: `Ok` a success, `Err` a failure.
    #[inline(always)]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }

    /// Whether the retry layer may try again after `result`. Default: never after an `Ok`,
    /// always after an `Err`, with no server hint.
    #[inline(always)]
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        match result {
            Ok(_) => Retry::No,
            Err(_) => Retry::Yes,
        }
    }
}

impl<T, E, C: Classifier<T, E> + ?Sized> Classifier<T, E> for std::sync::Arc<C> {
    #[inline(always)]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        (**self).outcome_of(result)
    }
    #[inline(always)]
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        (**self).retry_of(result)
    }
}

/// A classifier from a closure over the whole result; see [`from_fn`].
#[derive(Clone, Copy, Debug)]
pub struct FromFn<F>(F);

/// A classifier whose breaker verdict is `f(result)`, and which retries what `f` calls a
/// failure (an `Ok` or an `Err`) and nothing else, with no server hint.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::classify::{from_fn, Classifier, Outcome, Retry};
///
/// // Negative answers are failures; errors are not the dependency's fault.
/// let c = from_fn(|r: Result<&i32, &String>| match r {
///     Ok(n) if *n < 0 => Outcome::Failure,
///     Ok(_) => Outcome::Success,
///     Err(_) => Outcome::Ignored,
/// });
/// assert_eq!(c.outcome_of(Ok(&-1)), Outcome::Failure);
/// assert_eq!(c.retry_of(Ok(&-1)), Retry::Yes);
/// assert_eq!(c.retry_of(Err(&"bad".to_string())), Retry::No);
/// ```
pub fn from_fn<T, E, F>(f: F) -> FromFn<F>
where
    F: Fn(Result<&T, &E>) -> Outcome,
{
    FromFn(f)
}

impl<T, E, F> Classifier<T, E> for FromFn<F>
where
    F: Fn(Result<&T, &E>) -> Outcome,
{
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        (self.0)(result)
    }
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        match (self.0)(result) {
            Outcome::Failure => Retry::Yes,
            Outcome::Success | Outcome::Ignored => Retry::No,
        }
    }
}

/// A classifier of `E` applied to [`Error<E>`], the error of a layer of this crate nested
/// inside the one that classifies: a tower [`RetryLayer`](crate::tower::retry::RetryLayer) around
/// a [`BreakerLayer`](crate::tower::breaker::BreakerLayer) or a
/// [`TimeoutLayer`](crate::tower::timeout::TimeoutLayer).
///
/// The same rules as the pipeline's for its own errors:
///
/// | inner layer's error | breaker | retry |
/// |---|---|---|
/// | [`Error::Inner(e)`](Error::Inner) | `C`'s verdict on `e` | `C`'s verdict on `e` |
/// | [`Error::Timeout`] | failure | yes |
/// | [`Error::Rejected`] (an open breaker, a full bulkhead) | ignored | **no**: never retry a rejection |
/// | [`Error::GaveUp`] | as its last error | no: the inner layer already retried |
///
/// `Ok` values are judged by `C`.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::breaker::{BreakerPolicy, CircuitBreaker};
/// use breaker::classify::{Classifier, Nested, Retry};
/// use breaker::pipeline::AllErrors;
/// use breaker::Error;
///
/// let breaker = CircuitBreaker::new(BreakerPolicy::default()).unwrap();
/// breaker.force_open();
/// let rejected: Error<std::io::Error> = breaker.try_acquire().unwrap_err().into();
/// // `AllErrors` alone would retry the rejection; nested, it does not.
/// assert_eq!(Nested(AllErrors).retry_of(Err::<&(), _>(&rejected)), Retry::No);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Nested<C>(pub C);

impl<T, E, C: Classifier<T, E>> Classifier<T, Error<E>> for Nested<C> {
    fn outcome_of(&self, result: Result<&T, &Error<E>>) -> Outcome {
        match result {
            Ok(v) => self.0.outcome_of(Ok(v)),
            Err(Error::Inner(e)) => self.0.outcome_of(Err(e)),
            Err(Error::Timeout(_)) => Outcome::Failure,
            Err(Error::Rejected(_)) => Outcome::Ignored,
            Err(Error::GaveUp { last, .. }) => self.outcome_of(Err(last)),
        }
    }

    fn retry_of(&self, result: Result<&T, &Error<E>>) -> Retry {
        match result {
            Ok(v) => self.0.retry_of(Ok(v)),
            Err(Error::Inner(e)) => self.0.retry_of(Err(e)),
            Err(Error::Timeout(_)) => Retry::Yes,
            Err(Error::Rejected(_) | Error::GaveUp { .. }) => Retry::No,
        }
    }
}
