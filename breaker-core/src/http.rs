//! Standard classification of HTTP calls (feature `http`; `reqwest` adds the impls for
//! `reqwest`).
//!
//! # The rules
//! | what came back (an `Ok` response or an `Err`) | breaker ([`Outcome`]) | retried (transient) |
//! |---|---|---|
//! | 5xx | failure | yes |
//! | 408 Request Timeout, 429 Too Many Requests | failure | yes, after its `Retry-After` if any |
//! | other 4xx (400, 401, 403, 404, 409, 422, ...) | **ignored** | no |
//! | 1xx, 2xx, 3xx | success | no |
//! | an `Ok` value without a status (a body already read: `String`, `()`, ...) | success | no |
//! | a transport error (connect refused or reset, I/O, the client's own timeout) | failure | yes |
//! | the pipeline's own timeout | failure | yes (the pipeline decides) |
//!
//! The rules apply to responses returned as `Ok` as much as to errors: `reqwest` and hyper
//! return `Ok(response)` for a 503, and [`HttpClassifier`] calls it a failure (the caller still
//! gets the response; see [`crate::classify`] for what a retry that gives up on one returns).
//!
//! Why other 4xx are *ignored* by the breaker rather than counted as successes: a client error
//! says the request was wrong, not that the dependency is healthy or unhealthy; Resilience4j
//! users expect client errors not to count as failures (they list them as ignored exceptions),
//! and a neutral verdict keeps a stream of 404s from closing a half-open breaker on its own
//! (case BR-08; choose [`NeutralProbe::CountAsSuccess`](crate::breaker::NeutralProbe) to let
//! any answer close it). Why they are not retried: the same request gets the same answer
//! (case BR-37, from googleapis/retry-request#12).
//!
//! `Retry-After` is read in its delta-seconds form (`Retry-After: 120`); the HTTP-date form
//! would need the wall clock and is ignored.
//!
//! # Where to use them
//! - A [`Pipeline`](crate::pipeline::Pipeline): `pipeline.call_with(&HttpClassifier, op)`.
//! - `#[circuit_breaker(classify = http)]`: the same rules, with no function to write; `Ok`
//!   values are judged by status when their type has one ([`HttpValue`]), otherwise only
//!   errors are.
//! - tower: `BreakerLayer::new(b).with_classifier(HttpClassifier)`, and the same for
//!   `RetryLayer` and `PolicyLayer`. A `RetryLayer` around a `BreakerLayer` or a
//!   `TimeoutLayer` sees their [`Error<E>`](crate::Error): `HttpClassifier` judges it by its
//!   inner error, never retries a rejection and retries a timeout.
//!
//! # `Retry-After` and `error_for_status`
//! reqwest's `Response::error_for_status` turns a 429 into a `reqwest::Error` that keeps the
//! status but not the headers, so the server's `Retry-After` is lost. Either keep the response
//! as the `Ok` value (the classifier reads its headers), or call
//! [`error_for_status_with_retry_after`](ResponseExt::error_for_status_with_retry_after)
//! instead (feature `reqwest`): the same result, and the hint reaches the retry layer.

use crate::classify::{Classifier, Outcome, Retry};
use crate::pipeline::{sealed, ErrorClassifier};
use http::{HeaderMap, StatusCode};
use std::time::Duration;

/// The breaker's verdict on a response status. See the [module docs](self).
pub fn status_outcome(status: StatusCode) -> Outcome {
    if status_is_transient(status) {
        Outcome::Failure
    } else if status.is_client_error() {
        Outcome::Ignored
    } else {
        Outcome::Success
    }
}

/// Whether a response status is worth retrying: 5xx, 408 and 429.
pub fn status_is_transient(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
}

/// The `Retry-After` header in delta-seconds form, if present and valid.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    v.parse::<u64>().ok().map(Duration::from_secs)
}

/// An error of an HTTP call, as [`HttpClassifier`] sees it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP error",
    label = "the HTTP rules need the status of this error, or whether it failed in transport",
    note = "implement `breaker::http::HttpFailure` for `{Self}` (its `status`, and whether it is a transport error); for `reqwest` errors, enable the `reqwest` feature of `breaker`"
)]
pub trait HttpFailure {
    /// The response status, if a response came back.
    fn status(&self) -> Option<StatusCode>;

    /// Whether the request failed in transport (no usable response: connect refused, reset,
    /// I/O error, the client's own timeout). Default: no status.
    fn is_transport(&self) -> bool {
        self.status().is_none()
    }

    /// The server's `Retry-After` hint. Default: `None`.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

impl HttpFailure for StatusCode {
    fn status(&self) -> Option<StatusCode> {
        Some(*self)
    }
}

impl<B> HttpFailure for http::Response<B> {
    fn status(&self) -> Option<StatusCode> {
        Some(http::Response::status(self))
    }
    fn retry_after(&self) -> Option<Duration> {
        retry_after(self.headers())
    }
}

impl HttpFailure for std::io::Error {
    fn status(&self) -> Option<StatusCode> {
        None
    }
}

/// An error of a tower stack (hyper's client, `tower::timeout`, ...): a transport error.
impl HttpFailure for Box<dyn std::error::Error + Send + Sync> {
    fn status(&self) -> Option<StatusCode> {
        None
    }
}

/// The error of a layer of this crate nested inside the one that classifies (a tower
/// `RetryLayer` around a `BreakerLayer` or a `TimeoutLayer`): by its inner error. A timeout is
/// a transport failure (retried); a rejection is neither a status nor a transport failure, so
/// it is ignored by a breaker and never retried.
impl<E: HttpFailure> HttpFailure for crate::Error<E> {
    fn status(&self) -> Option<StatusCode> {
        self.inner().and_then(HttpFailure::status)
    }
    fn is_transport(&self) -> bool {
        match self {
            crate::Error::Inner(e) => e.is_transport(),
            crate::Error::Timeout(_) => true,
            // Already retried below: not again.
            crate::Error::GaveUp { .. } | crate::Error::Rejected(_) => false,
        }
    }
    fn retry_after(&self) -> Option<Duration> {
        match self {
            crate::Error::Inner(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// An `Ok` value of an HTTP call, as [`HttpClassifier`] sees it: a response with a status, or
/// a value without one (a body already read), which is a success.
///
/// Implemented for responses (`http::Response`, `reqwest::Response`, `StatusCode`) and for the
/// plain values a call commonly returns (`()`, `String`, `&str`, `Vec<u8>`, `bytes::Bytes`,
/// `bool`). For a type of yours without a status, `impl HttpValue for Stock {}` is enough.
/// `#[circuit_breaker(classify = http)]` needs none of this: for a type that is not an
/// `HttpValue` it judges errors only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP response or value",
    label = "`HttpClassifier` judges `Ok` values by their status",
    note = "for a value without a status, `impl breaker::http::HttpValue for {Self} {{}}` (always a success), or use `HttpErrors`, which judges errors only"
)]
pub trait HttpValue {
    /// The response status, if this is a response. Default: `None` (a success).
    fn status(&self) -> Option<StatusCode> {
        None
    }

    /// The server's `Retry-After` hint. Default: `None`.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

impl HttpValue for StatusCode {
    fn status(&self) -> Option<StatusCode> {
        Some(*self)
    }
}

impl<B> HttpValue for http::Response<B> {
    fn status(&self) -> Option<StatusCode> {
        Some(http::Response::status(self))
    }
    fn retry_after(&self) -> Option<Duration> {
        retry_after(self.headers())
    }
}

impl HttpValue for () {}
impl HttpValue for bool {}
impl HttpValue for String {}
impl HttpValue for &str {}
impl HttpValue for Vec<u8> {}
impl HttpValue for bytes::Bytes {}
impl HttpValue for std::convert::Infallible {}

/// The standard HTTP classifier of results, responses returned as `Ok` and errors alike; see
/// the [module docs](self) for the rules.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::classify::{Classifier, Retry};
/// use breaker::http::HttpClassifier;
/// use breaker::Outcome;
/// use http::StatusCode;
/// use std::time::Duration;
///
/// // Errors and responses alike:
/// assert_eq!(HttpClassifier.outcome(&StatusCode::NOT_FOUND), Outcome::Ignored);
/// assert!(!HttpClassifier.is_transient(&StatusCode::NOT_FOUND));
/// assert!(HttpClassifier.is_transient(&StatusCode::TOO_MANY_REQUESTS));
///
/// // A 503 returned as `Ok` is a failure, retried after its `Retry-After`.
/// let busy = http::Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
/// let ok: Result<&_, &std::io::Error> = Ok(&busy);
/// assert_eq!(HttpClassifier.outcome_of(ok), Outcome::Failure);
/// assert_eq!(HttpClassifier.retry_of(ok), Retry::After(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpClassifier;

impl HttpClassifier {
    /// The breaker's verdict on a response or an error.
    pub fn outcome<F: HttpFailure + ?Sized>(&self, failure: &F) -> Outcome {
        match failure.status() {
            Some(s) => status_outcome(s),
            None if failure.is_transport() => Outcome::Failure,
            None => Outcome::Ignored,
        }
    }

    /// Whether a response or an error is worth retrying.
    pub fn is_transient<F: HttpFailure + ?Sized>(&self, failure: &F) -> bool {
        match failure.status() {
            Some(s) => status_is_transient(s),
            None => failure.is_transport(),
        }
    }

    /// The server's `Retry-After` hint of a response or an error.
    pub fn retry_after<F: HttpFailure + ?Sized>(&self, failure: &F) -> Option<Duration> {
        HttpFailure::retry_after(failure)
    }

    /// The retry verdict on a response or an error: the hint is read only for a transient one.
    fn retry<F: HttpFailure + ?Sized>(&self, failure: &F) -> Retry {
        if self.is_transient(failure) {
            Retry::transient(HttpFailure::retry_after(failure))
        } else {
            Retry::No
        }
    }
}

impl<T: HttpValue, E: HttpFailure> Classifier<T, E> for HttpClassifier {
    #[inline]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        match result {
            Ok(v) => v.status().map_or(Outcome::Success, status_outcome),
            Err(e) => self.outcome(e),
        }
    }

    #[inline]
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        match result {
            Ok(v) => match v.status() {
                Some(s) if status_is_transient(s) => Retry::transient(v.retry_after()),
                _ => Retry::No,
            },
            Err(e) => self.retry(e),
        }
    }
}

/// The HTTP rules for errors only, with every `Ok` a success: for calls whose `Ok` value has no
/// status, of any type (what `#[circuit_breaker(classify = http)]` uses for a type that is not
/// an [`HttpValue`]). On errors it says what [`HttpClassifier`] says.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpErrors;

impl sealed::ErrorsOnly for HttpErrors {}

impl<E: HttpFailure> ErrorClassifier<E> for HttpErrors {
    fn outcome(&self, error: &E) -> Outcome {
        HttpClassifier.outcome(error)
    }

    fn is_transient(&self, error: &E) -> bool {
        HttpClassifier.is_transient(error)
    }

    fn retry_after(&self, error: &E) -> Option<Duration> {
        HttpFailure::retry_after(error)
    }
}

#[cfg(feature = "reqwest")]
pub use reqwest_impls::ResponseExt;

#[cfg(feature = "reqwest")]
mod reqwest_impls {
    use super::{retry_after, HttpFailure, HttpValue};
    use http::StatusCode;
    use std::cell::Cell;
    use std::hash::{Hash, Hasher};
    use std::time::Duration;

    /// A `reqwest` error: by its status when it has one (from `error_for_status`), otherwise a
    /// transport error when it is a connect, timeout, request or body error. Builder and
    /// decode errors are neither (a bug on our side, not the dependency's). Its `Retry-After`
    /// is the one [`ResponseExt::error_for_status_with_retry_after`] kept for it, if any.
    impl HttpFailure for reqwest::Error {
        fn status(&self) -> Option<StatusCode> {
            reqwest::Error::status(self)
        }
        fn is_transport(&self) -> bool {
            self.is_connect() || self.is_timeout() || self.is_request() || self.is_body()
        }
        fn retry_after(&self) -> Option<Duration> {
            recall(self)
        }
    }

    /// A `reqwest` response returned as an error (`Err(response)`), which keeps its
    /// `Retry-After` header.
    impl HttpFailure for reqwest::Response {
        fn status(&self) -> Option<StatusCode> {
            Some(reqwest::Response::status(self))
        }
        fn retry_after(&self) -> Option<Duration> {
            retry_after(self.headers())
        }
    }

    /// A `reqwest` response returned as `Ok`: by its status, with its `Retry-After`.
    impl HttpValue for reqwest::Response {
        fn status(&self) -> Option<StatusCode> {
            Some(reqwest::Response::status(self))
        }
        fn retry_after(&self) -> Option<Duration> {
            retry_after(self.headers())
        }
    }

    /// `error_for_status` that keeps the server's `Retry-After` for the retry layer.
    pub trait ResponseExt: Sized {
        /// `reqwest::Response::error_for_status`, and the response's `Retry-After` (if the
        /// status is an error) is kept for the [`HttpFailure::retry_after`] of the error it
        /// returns, so [`HttpClassifier`](super::HttpClassifier) (and `classify = http`)
        /// waits as the server asked before the next attempt.
        ///
        /// The hint travels on the current thread from this call to the classifier that reads
        /// the error, and is read once: call this in the attempt whose error the pipeline
        /// classifies (not in a task spawned from it). It is matched to the error by status and
        /// URL, and a later `error_for_status_with_retry_after` on the same thread replaces it.
        ///
        /// # Errors
        /// As `error_for_status`: the status is a client or server error.
        fn error_for_status_with_retry_after(self) -> reqwest::Result<Self>;
    }

    impl ResponseExt for reqwest::Response {
        fn error_for_status_with_retry_after(self) -> reqwest::Result<Self> {
            let status = self.status();
            if status.is_client_error() || status.is_server_error() {
                let hint = retry_after(self.headers()).map(|after| Hint {
                    status: status.as_u16(),
                    url: url_key(self.url()),
                    after,
                });
                HINT.with(|h| h.set(hint));
            }
            self.error_for_status()
        }
    }

    /// A `Retry-After` kept for the error of one response.
    #[derive(Clone, Copy)]
    struct Hint {
        status: u16,
        url: u64,
        after: Duration,
    }

    thread_local! {
        static HINT: Cell<Option<Hint>> = const { Cell::new(None) };
    }

    fn url_key(url: &reqwest::Url) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        url.as_str().hash(&mut h);
        h.finish()
    }

    /// The hint kept for `e`'s response, taken.
    fn recall(e: &reqwest::Error) -> Option<Duration> {
        let status = e.status()?.as_u16();
        let url = url_key(e.url()?);
        let hint = HINT.with(Cell::take)?;
        (hint.status == status && hint.url == url).then_some(hint.after)
    }
}
