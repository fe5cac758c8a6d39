//! The classifier an annotated function runs with: `classify = ..` (a function of the error
//! or a classifier value), `retry_if = ..`, `classify = http` (and its compile error without
//! the `http` feature), each pinned to the function's `Result<T, E>`.

use crate::classify::{Classifier, Outcome, Retry};
use crate::pipeline::{self, AllErrors, FnClassifier, NoHint};
use std::marker::PhantomData;

/// The classifier of an annotated function, pinned to its `Result<T, E>`: the one value the
/// expansion passes to [`call`](super::call) and
/// [`Target::wants_fallback`](super::Target::wants_fallback), whose `T` it lets the compiler
/// infer.
pub struct Attr<T, E, C> {
    classifier: C,
    _result: PhantomData<fn(&T, &E)>,
}

impl<T, E, C: Classifier<T, E>> Classifier<T, E> for Attr<T, E, C> {
    #[inline(always)]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        self.classifier.outcome_of(result)
    }
    #[inline(always)]
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        self.classifier.retry_of(result)
    }
}

fn attr<T, E, C>(classifier: C) -> Attr<T, E, C> {
    Attr {
        classifier,
        _result: PhantomData,
    }
}

/// Without `classify` and `retry_if`: every error a failure and transient.
pub fn default_classifier<T, E>() -> Attr<T, E, AllErrors> {
    attr(AllErrors)
}

/// What `classify = ..` may be: a `fn(&E) -> Outcome` (the breaker's verdict on errors), or a
/// value of a [`Classifier`] of the function's `Result<T, E>`. `M` tells the two apart, so the
/// compiler picks the one that applies.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a classifier of this function's `Result<{T}, {E}>`",
    label = "expected `fn(&{E}) -> breaker::Outcome`, or a value of a type implementing `breaker::classify::Classifier<{T}, {E}>`",
    note = "`classify = http` gives the standard HTTP rules (feature `http`)"
)]
pub trait IntoClassifier<T, E, M> {
    /// The classifier.
    type Classifier: Classifier<T, E>;
    /// Converts.
    fn __breaker_into(self) -> Self::Classifier;
}

/// [`IntoClassifier`] for a function over errors.
#[derive(Debug)]
pub enum ErrorFn {}

/// [`IntoClassifier`] for a classifier value.
#[derive(Debug)]
pub enum Value {}

impl<T, E, F: Fn(&E) -> Outcome> IntoClassifier<T, E, ErrorFn> for F {
    type Classifier = FnClassifier<F, fn(&E) -> bool, NoHint<E>>;
    fn __breaker_into(self) -> Self::Classifier {
        pipeline::classifier(self, |_: &E| true)
    }
}

impl<T, E, C: Classifier<T, E>> IntoClassifier<T, E, Value> for C {
    type Classifier = C;
    fn __breaker_into(self) -> C {
        self
    }
}

/// A `classify = expr`: a function over errors or a classifier value. The expansion spans the
/// call at the user's expression, so a value that is neither is one error, there.
pub fn classifier<T, E, M, C: IntoClassifier<T, E, M>>(c: C) -> Attr<T, E, C::Classifier> {
    attr(c.__breaker_into())
}

/// A `retry_if = path`, as a function pointer (a path of another signature is one type error,
/// at that path).
pub fn transient_fn<E>(f: fn(&E) -> bool) -> fn(&E) -> bool {
    f
}

/// `classifier` with `retry_if = path` deciding which errors are transient.
pub fn retry_if<T, E, C: Classifier<T, E>>(
    classifier: Attr<T, E, C>,
    transient: fn(&E) -> bool,
) -> Attr<T, E, RetryIf<C, E>> {
    attr(RetryIf {
        classifier: classifier.classifier,
        transient,
    })
}

/// A classifier whose verdict on retrying errors is a `retry_if` function's: an error is
/// transient if and only if `transient` says so, after the server's delay if the classifier
/// read one. `Ok` values and the breaker's verdicts are the classifier's.
pub struct RetryIf<C, E> {
    classifier: C,
    transient: fn(&E) -> bool,
}

impl<T, E, C: Classifier<T, E>> Classifier<T, E> for RetryIf<C, E> {
    #[inline(always)]
    fn outcome_of(&self, result: Result<&T, &E>) -> Outcome {
        self.classifier.outcome_of(result)
    }
    fn retry_of(&self, result: Result<&T, &E>) -> Retry {
        match result {
            Ok(_) => self.classifier.retry_of(result),
            Err(e) if (self.transient)(e) => {
                Retry::transient(self.classifier.retry_of(result).hint())
            }
            Err(_) => Retry::No,
        }
    }
}

/// `classify = http` for a function returning `Result<T, E>`, chosen by autoref on
/// `&&&HttpProbe` (the first that applies): [`HttpClassifier`] when `E` is an HTTP error and
/// `T` has a status ([`HttpValue`]), [`HttpErrors`] when only `E` is, else (after the error
/// [`http_error`] reports) [`AllErrors`], so that no second error follows the first.
///
/// [`HttpClassifier`]: crate::http::HttpClassifier
/// [`HttpValue`]: crate::http::HttpValue
/// [`HttpErrors`]: crate::http::HttpErrors
#[cfg(feature = "http")]
pub struct HttpProbe<T, E>(PhantomData<fn(&T, &E)>);

#[cfg(feature = "http")]
impl<T, E> HttpProbe<T, E> {
    /// The probe.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        HttpProbe(PhantomData)
    }
}

/// See [`HttpProbe`]: a response type and an HTTP error.
#[cfg(feature = "http")]
pub trait HttpOfValue<T, E> {
    /// The classifier.
    fn __breaker_http(&self) -> Attr<T, E, crate::http::HttpClassifier>;
}

#[cfg(feature = "http")]
impl<T: crate::http::HttpValue, E: crate::http::HttpFailure> HttpOfValue<T, E>
    for &&HttpProbe<T, E>
{
    fn __breaker_http(&self) -> Attr<T, E, crate::http::HttpClassifier> {
        attr(crate::http::HttpClassifier)
    }
}

/// See [`HttpProbe`]: an HTTP error, with any `Ok` type.
#[cfg(feature = "http")]
pub trait HttpOfErrors<T, E> {
    /// The classifier.
    fn __breaker_http(&self) -> Attr<T, E, crate::http::HttpErrors>;
}

#[cfg(feature = "http")]
impl<T, E: crate::http::HttpFailure> HttpOfErrors<T, E> for &HttpProbe<T, E> {
    fn __breaker_http(&self) -> Attr<T, E, crate::http::HttpErrors> {
        attr(crate::http::HttpErrors)
    }
}

/// See [`HttpProbe`]: not an HTTP error, which [`http_error`] reports.
#[cfg(feature = "http")]
pub trait HttpOfOther<T, E> {
    /// The classifier.
    fn __breaker_http(&self) -> Attr<T, E, AllErrors>;
}

#[cfg(feature = "http")]
impl<T, E> HttpOfOther<T, E> for HttpProbe<T, E> {
    fn __breaker_http(&self) -> Attr<T, E, AllErrors> {
        attr(AllErrors)
    }
}

/// Requires the function's error type to be an HTTP error, for `classify = http`: the one
/// error when it is not ("`MyError` is not an HTTP error"), at `http`.
#[cfg(feature = "http")]
pub fn http_error<E: crate::http::HttpFailure>() {}

/// `classify = http`: the standard HTTP rules ([`crate::http`]), or without the `http` feature
/// a compile error saying so.
#[cfg(feature = "http")]
#[doc(hidden)]
#[macro_export]
macro_rules! __breaker_classify_http {
    ($ok:ty, $err:ty) => {{
        #[allow(unused_imports)]
        use $crate::__private::{HttpOfErrors as _, HttpOfOther as _, HttpOfValue as _};
        $crate::__private::http_error::<$err>();
        (&&&$crate::__private::HttpProbe::<$ok, $err>::new()).__breaker_http()
    }};
}

/// `classify = http`: the standard HTTP rules ([`crate::http`]), or without the `http` feature
/// a compile error saying so.
#[cfg(not(feature = "http"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breaker_classify_http {
    ($ok:ty, $err:ty) => {{
        ::core::compile_error!(
            "`classify = http` needs the `http` feature of `breaker` (and `reqwest` for \
             `reqwest` errors and responses): `breaker = { features = [\"http\"] }`"
        );
        $crate::__private::default_classifier::<$ok, $err>()
    }};
}

pub use crate::__breaker_classify_http as classify_http;

impl<T, E, C> std::fmt::Debug for Attr<T, E, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attr").finish_non_exhaustive()
    }
}

impl<C, E> std::fmt::Debug for RetryIf<C, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryIf").finish_non_exhaustive()
    }
}

#[cfg(feature = "http")]
impl<T, E> std::fmt::Debug for HttpProbe<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpProbe")
    }
}
