//! Standard classification of HTTP calls (feature `http`; `reqwest` adds the impls for
//! `reqwest`).
//!
//! # The rules
//! | what came back | breaker ([`Outcome`]) | retried (transient) |
//! |---|---|---|
//! | 5xx | failure | yes |
//! | 408 Request Timeout, 429 Too Many Requests | failure | yes |
//! | other 4xx (400, 401, 403, 404, 409, 422, ...) | **ignored** | no |
//! | 1xx, 2xx, 3xx | success | no |
//! | a transport error (connect refused or reset, I/O, the client's own timeout) | failure | yes |
//! | the pipeline's own timeout | failure | yes (the pipeline decides) |
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

use crate::classify::Outcome;
use crate::pipeline::ErrorClassifier;
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

/// The standard HTTP classifier; see the [module docs](self) for the rules.
///
/// ```
/// use breaker_core::http::HttpClassifier;
/// use breaker_core::pipeline::ErrorClassifier;
/// use breaker_core::Outcome;
/// use http::StatusCode;
///
/// assert_eq!(HttpClassifier.outcome(&StatusCode::NOT_FOUND), Outcome::Ignored);
/// assert!(!HttpClassifier.is_transient(&StatusCode::NOT_FOUND));
/// assert!(HttpClassifier.is_transient(&StatusCode::TOO_MANY_REQUESTS));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpClassifier;

impl<E: HttpFailure> ErrorClassifier<E> for HttpClassifier {
    fn outcome(&self, error: &E) -> Outcome {
        match error.status() {
            Some(s) => status_outcome(s),
            None if error.is_transport() => Outcome::Failure,
            None => Outcome::Ignored,
        }
    }

    fn is_transient(&self, error: &E) -> bool {
        match error.status() {
            Some(s) => status_is_transient(s),
            None => error.is_transport(),
        }
    }

    fn retry_after(&self, error: &E) -> Option<Duration> {
        HttpFailure::retry_after(error)
    }
}

#[cfg(feature = "reqwest")]
mod reqwest_impls {
    use super::{retry_after, HttpFailure};
    use http::StatusCode;
    use std::time::Duration;

    /// A `reqwest` error: by its status when it has one (from `error_for_status`), otherwise a
    /// transport error when it is a connect, timeout, request or body error. Builder and
    /// decode errors are neither (a bug on our side, not the dependency's).
    impl HttpFailure for reqwest::Error {
        fn status(&self) -> Option<StatusCode> {
            reqwest::Error::status(self)
        }
        fn is_transport(&self) -> bool {
            self.is_connect() || self.is_timeout() || self.is_request() || self.is_body()
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
}
