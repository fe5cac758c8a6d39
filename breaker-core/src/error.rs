//! The one error type of a [`Pipeline`](crate::pipeline::Pipeline) call.
//!
//! [`Error<E>`] keeps apart the four things a caller handles differently:
//!
//! | variant | the dependency was called? | what to do |
//! |---|---|---|
//! | [`Error::Inner`] | yes, it answered with `E` | handle `E` as without the pipeline |
//! | [`Error::Rejected`] | not by the refused attempt (see below) | use a fallback, try later ([`Rejection::retry_after`]) |
//! | [`Error::Timeout`] | yes, it did not answer in time | the call may or may not have taken effect |
//! | [`Error::GaveUp`] | yes, several times | see the reason and the last error |
//!
//! A rejection says that the attempt it ended was not made. With retry *outside* the breaker,
//! earlier attempts of the same call may have reached the dependency and failed, tripping the
//! breaker that then refused the next attempt (case BR-42; the
//! [pipeline docs](crate::pipeline) say what each order of the layers sees).
//!
//! Display strings are lowercase and `source()` is chained: `GaveUp` → its last error →
//! `E`'s own sources. `GaveUp` also names its last error in its own Display
//! (`gave up after 3 attempts: attempts exhausted; last error: connection refused`), so a log
//! line of the error alone says what kept failing.

use crate::adaptive::LimitReached;
use crate::breaker::Rejected;
use crate::bulkhead::BulkheadFull;
use crate::layer::Layer;
use crate::ratelimit::RateLimited;
use crate::registry::RegistryFull;
use crate::retry::GiveUpReason;
use crate::throttle::Throttled;
use crate::timeout::{Elapsed, TimeoutKind};
use std::fmt;
use std::time::Duration;

/// A call (or an attempt) refused by a local layer: that attempt was not made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The circuit breaker is open (or half-open with every probe slot taken).
    #[error(transparent)]
    Breaker(#[from] Rejected),
    /// The bulkhead is full.
    #[error(transparent)]
    Bulkhead(#[from] BulkheadFull),
    /// The call's key has no breaker (or, for a rate limit `per key`, no rate limiter) and
    /// none can be made: the keyed registry holds its `max_keys` and none of them is evictable
    /// ([`RegistryFull::layer`] says which registry). `#[circuit_breaker(key = ..)]` refuses
    /// such a call rather than grow without bound or run it unprotected or unlimited.
    #[error(transparent)]
    Keys(#[from] RegistryFull),
    /// The rate limiter had no permit (within its wait): see [`RateLimited::retry_after`].
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// Adaptive throttling shed the call (the dependency has been rejecting calls).
    #[error(transparent)]
    Throttled(#[from] Throttled),
    /// The adaptive concurrency limit is reached.
    #[error(transparent)]
    Limit(#[from] LimitReached),
}

impl Rejection {
    /// The layer that refused.
    pub fn layer(&self) -> Layer {
        match self {
            Rejection::Breaker(_) => Layer::Breaker,
            Rejection::Keys(full) => full.layer(),
            Rejection::Bulkhead(_) => Layer::Bulkhead,
            Rejection::RateLimited(_) => Layer::RateLimit,
            Rejection::Throttled(_) => Layer::Throttle,
            Rejection::Limit(_) => Layer::Adaptive,
        }
    }

    /// When trying again may succeed: the rest of the breaker's cooldown, or the time until
    /// the rate limiter's next permit; `None` when unknown (a half-open breaker, a full
    /// bulkhead or adaptive limit, throttling).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Rejection::Breaker(r) => r.retry_after(),
            Rejection::RateLimited(r) => Some(r.retry_after),
            Rejection::Bulkhead(_)
            | Rejection::Keys(_)
            | Rejection::Throttled(_)
            | Rejection::Limit(_) => None,
        }
    }
}

/// The error of a pipeline call, and of every tower layer of this crate. See the
/// [module docs](self).
///
/// Implements [`std::error::Error`] when `E` does.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error<E> {
    /// The operation's own error, unchanged. Displayed as `E` is.
    Inner(E),
    /// A local layer (breaker or bulkhead) refused the call, or with retry outside that layer
    /// one of its attempts after the first (see the [module docs](self)); a rejection is never
    /// retried.
    Rejected(Rejection),
    /// A limit of the pipeline elapsed and the operation's future was dropped.
    Timeout(Elapsed),
    /// The retry layer stopped retrying an operation that kept failing transiently.
    GaveUp {
        /// Attempts made, the first included (at least 1).
        attempts: u32,
        /// Why no further attempt was made.
        reason: GiveUpReason,
        /// The last attempt's error: [`Error::Inner`] or [`Error::Timeout`].
        last: Box<Error<E>>,
    },
}

impl<E> Error<E> {
    /// The operation's error, if this is one, looking through [`Error::GaveUp`].
    pub fn inner(&self) -> Option<&E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::GaveUp { last, .. } => last.inner(),
            _ => None,
        }
    }

    /// Like [`inner`](Self::inner), by value.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::GaveUp { last, .. } => last.into_inner(),
            _ => None,
        }
    }

    /// The rejection, if a local layer refused the call.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Error::Rejected(r) => Some(r),
            _ => None,
        }
    }

    /// Which limit elapsed, looking through [`Error::GaveUp`].
    pub fn timeout(&self) -> Option<TimeoutKind> {
        match self {
            Error::Timeout(t) => Some(t.kind),
            Error::GaveUp { last, .. } => last.timeout(),
            _ => None,
        }
    }

    /// Why the retry layer gave up, if it did.
    pub fn give_up_reason(&self) -> Option<GiveUpReason> {
        match self {
            Error::GaveUp { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The same error with the operation's error mapped by `f` (looking through
    /// [`Error::GaveUp`]); the pipeline's own errors are kept as they are.
    ///
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::Error;
    /// let e: Error<std::num::ParseIntError> = Error::Inner("x".parse::<u32>().unwrap_err());
    /// let e: Error<String> = e.map_inner(|e| e.to_string());
    /// assert_eq!(e.inner().map(String::as_str), Some("invalid digit found in string"));
    /// ```
    pub fn map_inner<F>(self, f: impl FnOnce(E) -> F) -> Error<F> {
        match self {
            Error::Inner(e) => Error::Inner(f(e)),
            Error::Rejected(r) => Error::Rejected(r),
            Error::Timeout(t) => Error::Timeout(t),
            Error::GaveUp {
                attempts,
                reason,
                last,
            } => Error::GaveUp {
                attempts,
                reason,
                last: Box::new(last.map_inner(f)),
            },
        }
    }

    /// The operation's error as it is, or the pipeline's own error (a rejection, a timeout)
    /// converted into `E`: one error type for code whose `E` can hold any error, such as
    /// `anyhow::Error` (which converts from every `std::error::Error`, and so from
    /// `Error<Infallible>`) or an enum of yours with a `#[from] breaker::Error<Infallible>`
    /// variant. When retry gave up, this is the last attempt's error, flattened the same
    /// way (the number of attempts is not kept).
    ///
    /// `#[circuit_breaker(flatten)]` applies it to the function's result, which then keeps its
    /// declared type `Result<T, E>`.
    ///
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::Error;
    /// use std::convert::Infallible;
    ///
    /// #[derive(Debug)]
    /// enum AppError {
    ///     NotFound,
    ///     Resilience(Error<Infallible>),
    /// }
    /// impl From<Error<Infallible>> for AppError {
    ///     fn from(e: Error<Infallible>) -> Self {
    ///         AppError::Resilience(e)
    ///     }
    /// }
    ///
    /// let e: Error<AppError> = Error::Inner(AppError::NotFound);
    /// assert!(matches!(e.flatten(), AppError::NotFound));
    /// ```
    pub fn flatten(self) -> E
    where
        E: From<Error<std::convert::Infallible>>,
    {
        match self {
            Error::Inner(e) => e,
            Error::Rejected(r) => E::from(Error::Rejected(r)),
            Error::Timeout(t) => E::from(Error::Timeout(t)),
            Error::GaveUp { last, .. } => last.flatten(),
        }
    }

    /// Attempts made: the `attempts` of [`Error::GaveUp`], 1 for an inner error or a timeout,
    /// 0 for a rejection. A rejection of a retry (retry outside the refusing layer) also reads
    /// 0, though earlier attempts were made: the error does not carry them.
    pub fn attempts(&self) -> u32 {
        match self {
            Error::GaveUp { attempts, .. } => *attempts,
            Error::Rejected(_) => 0,
            _ => 1,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Inner(e) => e.fmt(f),
            Error::Rejected(r) => r.fmt(f),
            Error::Timeout(t) => t.fmt(f),
            Error::GaveUp {
                attempts,
                reason,
                last,
            } => {
                let s = if *attempts == 1 { "" } else { "s" };
                write!(
                    f,
                    "gave up after {attempts} attempt{s}: {reason}; last error: {last}"
                )
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Inner, Rejected and Timeout display their error itself, so they forward its
            // source (as `#[error(transparent)]` does); GaveUp's source is its last error.
            Error::Inner(e) => e.source(),
            Error::Rejected(r) => std::error::Error::source(r),
            Error::Timeout(_) => None,
            Error::GaveUp { last, .. } => Some(&**last),
        }
    }
}

/// A breaker's rejection as a pipeline error, for code that drives a
/// [`CircuitBreaker`](crate::breaker::CircuitBreaker) by hand:
/// `Err(rejected) => Err(rejected.into())`.
impl<E> From<Rejected> for Error<E> {
    fn from(r: Rejected) -> Self {
        Error::Rejected(Rejection::Breaker(r))
    }
}

/// A full bulkhead as a pipeline error.
impl<E> From<BulkheadFull> for Error<E> {
    fn from(r: BulkheadFull) -> Self {
        Error::Rejected(Rejection::Bulkhead(r))
    }
}

impl<E> From<Rejection> for Error<E> {
    fn from(r: Rejection) -> Self {
        Error::Rejected(r)
    }
}

impl<E> From<Elapsed> for Error<E> {
    fn from(t: Elapsed) -> Self {
        Error::Timeout(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::{BreakerPolicy, CircuitBreaker, RejectReason};

    #[test]
    fn a_breaker_rejection_converts_into_the_pipeline_error() {
        let breaker = CircuitBreaker::new(BreakerPolicy::default()).unwrap();
        breaker.force_open();
        let rejected = breaker.try_acquire().unwrap_err();
        let e: Error<std::io::Error> = rejected.into();
        match e.rejection() {
            Some(Rejection::Breaker(r)) => assert_eq!(r.reason(), RejectReason::ForcedOpen),
            other => panic!("expected a breaker rejection, got {other:?}"),
        }
        assert_eq!(e.attempts(), 0);
    }
}
