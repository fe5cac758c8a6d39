//! Classifiers of errors alone: [`ErrorClassifier`], [`AllErrors`] and [`classifier`].
//!
//! An [`ErrorClassifier`] answers three questions about an **error** (results are all
//! successes, never retried), and is a [`Classifier`] of every `Result<T, E>`:
//!
//! - [`outcome`](ErrorClassifier::outcome): what the error means to the **circuit breaker**
//!   (a failure, or ignored, or even a success).
//! - [`is_transient`](ErrorClassifier::is_transient): whether the **retry** layer may try
//!   again. Kept apart from the breaker's verdict on purpose: a 404 is ignored by the breaker
//!   and not retried; a 503 is a failure and retried; a 501 is a failure and not retried.
//! - [`retry_after`](ErrorClassifier::retry_after): a delay the server asked for (HTTP
//!   `Retry-After`), honoured by the retry layer in place of its backoff.
//!
//! The fallback uses the breaker's verdict: it never runs for an error whose outcome is
//! [`Outcome::Ignored`] (or [`Outcome::Success`]).
//!
//! To judge `Ok` values too (an HTTP response with a 503), implement [`Classifier`]; see
//! [`crate::classify`].
//!
//! Errors raised by the pipeline itself are classified by the pipeline, never by a classifier:
//! its timeouts are breaker failures and transient; local rejections are neither.

use crate::classify::{Classifier, Outcome, Retry};
use std::time::Duration;

pub(crate) mod sealed {
    /// Implemented by this crate's error classifiers only, so that a type of yours can
    /// implement [`Classifier`](super::Classifier) for every error type without overlapping
    /// with the impl for error classifiers.
    pub trait ErrorsOnly {}
}

/// Judges the operation's errors for the breaker, the retry layer and the fallback; every
/// `Ok` is a success and never retried. See the [module docs](crate::pipeline) and
/// [`crate::classify`].
///
/// Every error classifier is a [`Classifier`] of every `Result<T, E>`, which is what the entry
/// points take. This crate's error classifiers are [`AllErrors`], [`classifier`]'s
/// [`FnClassifier`] and [`HttpErrors`](crate::http::HttpErrors); the trait is sealed: for a
/// classifier of your own, implement [`Classifier`] (every method has a default there too).
pub trait ErrorClassifier<E>: sealed::ErrorsOnly {
    /// What `error` means to the circuit breaker. Default: [`Outcome::Failure`].
    fn outcome(&self, error: &E) -> Outcome {
        let _ = error;
        Outcome::Failure
    }

    /// Whether the retry layer may try again after `error`. Default: `true`.
    fn is_transient(&self, error: &E) -> bool {
        let _ = error;
        true
    }

    /// A delay the server asked for before the next attempt. Default: `None`.
    fn retry_after(&self, error: &E) -> Option<Duration> {
        let _ = error;
        None
    }
}

/// Every error classifier is a classifier of results whose `Ok` values are all successes,
/// never retried; on an `Ok` this compiles to no work.
impl<T, E, C: ErrorClassifier<E> + ?Sized> Classifier<T, E> for C {
    #[inline(always)]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e) => self.outcome(e),
        }
    }

    #[inline(always)]
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        match result {
            Ok(_) => Retry::No,
            Err(e) if self.is_transient(e) => Retry::transient(self.retry_after(e)),
            Err(_) => Retry::No,
        }
    }
}

/// The default classifier of every entry point ([`Pipeline::call`](crate::pipeline::Pipeline::call),
/// the attribute without `classify`, the tower layers): every `Ok` a success, every error a
/// breaker failure and transient, with no server hint.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllErrors;

impl sealed::ErrorsOnly for AllErrors {}
impl<E> ErrorClassifier<E> for AllErrors {}

/// The `Retry-After` extractor of [`classifier`]: always `None`.
pub type NoHint<E> = fn(&E) -> Option<Duration>;

/// A classifier made of closures; see [`classifier`].
#[derive(Clone, Copy, Debug)]
pub struct FnClassifier<O, T, H> {
    outcome: O,
    transient: T,
    retry_after: H,
}

/// A classifier from two closures: the breaker's verdict and the retry predicate. Add a
/// `Retry-After` extractor with [`FnClassifier::retry_after`].
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::classify::Outcome;
/// use breaker::pipeline::{classifier, ErrorClassifier};
///
/// #[derive(Debug)]
/// enum ApiError { NotFound, Unavailable }
///
/// let c = classifier(
///     |e: &ApiError| match e { ApiError::NotFound => Outcome::Ignored, _ => Outcome::Failure },
///     |e: &ApiError| matches!(e, ApiError::Unavailable),
/// );
/// assert_eq!(c.outcome(&ApiError::NotFound), Outcome::Ignored);
/// assert!(!c.is_transient(&ApiError::NotFound));
/// ```
pub fn classifier<E, O, T>(outcome: O, transient: T) -> FnClassifier<O, T, NoHint<E>>
where
    O: Fn(&E) -> Outcome,
    T: Fn(&E) -> bool,
{
    FnClassifier {
        outcome,
        transient,
        retry_after: |_| None,
    }
}

impl<O, T, H> FnClassifier<O, T, H> {
    /// Replaces the `Retry-After` extractor.
    pub fn retry_after<E, H2>(self, retry_after: H2) -> FnClassifier<O, T, H2>
    where
        H2: Fn(&E) -> Option<Duration>,
    {
        FnClassifier {
            outcome: self.outcome,
            transient: self.transient,
            retry_after,
        }
    }
}

impl<O, T, H> sealed::ErrorsOnly for FnClassifier<O, T, H> {}

impl<E, O, T, H> ErrorClassifier<E> for FnClassifier<O, T, H>
where
    O: Fn(&E) -> Outcome,
    T: Fn(&E) -> bool,
    H: Fn(&E) -> Option<Duration>,
{
    fn outcome(&self, error: &E) -> Outcome {
        (self.outcome)(error)
    }
    fn is_transient(&self, error: &E) -> bool {
        (self.transient)(error)
    }
    fn retry_after(&self, error: &E) -> Option<Duration> {
        (self.retry_after)(error)
    }
}
