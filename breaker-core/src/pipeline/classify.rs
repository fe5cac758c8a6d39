//! How a pipeline judges the operation's errors: three separate questions.
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
//! Errors raised by the pipeline itself are classified by the pipeline, never by this trait:
//! its timeouts are breaker failures and transient; local rejections are neither.

use crate::classify::Outcome;
use std::time::Duration;

/// Judges the operation's errors for the breaker, the retry layer and the fallback. See the
/// [module docs](crate::pipeline).
///
/// Every method has a default, so an implementation overrides only what it needs. Implement it
/// on a unit struct, or build one from closures with [`classifier`].
pub trait ErrorClassifier<E> {
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

impl<E, C: ErrorClassifier<E> + ?Sized> ErrorClassifier<E> for &C {
    fn outcome(&self, error: &E) -> Outcome {
        (**self).outcome(error)
    }
    fn is_transient(&self, error: &E) -> bool {
        (**self).is_transient(error)
    }
    fn retry_after(&self, error: &E) -> Option<Duration> {
        (**self).retry_after(error)
    }
}

/// The classifier of [`Pipeline::call`](crate::pipeline::Pipeline::call): every error is a
/// breaker failure and transient, with no server hint.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllErrors;

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
/// use breaker_core::classify::Outcome;
/// use breaker_core::pipeline::{classifier, ErrorClassifier};
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
