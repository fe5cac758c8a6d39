//! Outcome classification: what a call's result means to the breaker.
//!
//! The breaker needs one of three verdicts per call ([`Outcome`]); retry asks a different
//! question (is the error transient?), answered separately by the retry predicate. Keeping the
//! two apart lets a 404 be *ignored* by the breaker and *not retried*, while a 503 is a breaker
//! failure *and* retried.
//!
//! The default classifier, [`DefaultClassifier`], says: `Ok` is a success, `Err` is a failure.
//! Give your own with a closure: `|r: &Result<T, E>| -> Outcome`.

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

/// Decides the [`Outcome`] of a call from its result.
///
/// Implemented for every `Fn(&Result<T, E>) -> Outcome`.
pub trait Classify<T, E> {
    /// The verdict for `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// `Ok` is a success, `Err` a failure.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}
