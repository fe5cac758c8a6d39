//! The small traits and helpers the expansion names: reusable arguments, receivers and
//! captured locals, the single-attempt closure, breaker keys, `Result` aliases, `flatten`
//! and the default name of a method.
//!
//! Each "cannot be reused" trait exists only for its message: the three are the same
//! `Clone` bound, worded for what the user wrote (an argument, `self`, a local captured by a
//! boxed future).

use crate::Error;
use std::convert::Infallible;

/// An argument that retry can hand to every attempt: a reference (copied) or a `Clone` value.
#[diagnostic::on_unimplemented(
    message = "argument of type `{Self}` cannot be reused by retry",
    label = "retry runs the body once per attempt, and each attempt needs its own `{Self}`",
    note = "derive or implement `Clone` for `{Self}`, take the argument by reference (`&{Self}`), or remove `retry`"
)]
pub trait Reusable {
    /// A copy for the next attempt.
    fn __breaker_reuse(&self) -> Self;
}

impl<T: Clone> Reusable for T {
    #[inline]
    fn __breaker_reuse(&self) -> Self {
        self.clone()
    }
}

/// A copy of `arg` for one attempt.
#[inline]
pub fn reuse<T: Reusable>(arg: &T) -> T {
    arg.__breaker_reuse()
}

/// A receiver that retry can hand to every attempt: `self: Arc<Self>`, `self: Rc<Self>`, or
/// `self`, `self: Box<Self>` of a `Clone` type. (`&self` is copied and needs nothing.)
#[diagnostic::on_unimplemented(
    message = "`self` of type `{Self}` cannot be reused by retry",
    label = "retry runs the body once per attempt, and each attempt needs its own `self`",
    note = "take `&self` or `self: Arc<Self>`, derive or implement `Clone` for the type, or remove `retry`"
)]
pub trait ReusableSelf {
    /// A copy for the next attempt.
    fn __breaker_reuse_self(&self) -> Self;
}

impl<T: Clone> ReusableSelf for T {
    #[inline]
    fn __breaker_reuse_self(&self) -> Self {
        self.clone()
    }
}

/// A copy of the receiver for one attempt.
#[inline]
pub fn reuse_self<T: ReusableSelf>(receiver: &T) -> T {
    receiver.__breaker_reuse_self()
}

/// A local, prepared before `Box::pin(async move { .. })` in a function returning a boxed
/// future, that retry can move into every attempt's future.
#[diagnostic::on_unimplemented(
    message = "`{Self}`, prepared before `Box::pin(async move {{ .. }})`, cannot be reused by retry",
    label = "retry creates the future once per attempt, and each one needs its own `{Self}`",
    note = "derive or implement `Clone` for `{Self}` (or wrap it in an `Arc`), create it inside the `async move` block, or remove `retry`"
)]
pub trait ReusableLocal {
    /// A copy for the next attempt.
    fn __breaker_reuse_local(&self) -> Self;
}

impl<T: Clone> ReusableLocal for T {
    #[inline]
    fn __breaker_reuse_local(&self) -> Self {
        self.clone()
    }
}

/// A copy of a captured local for one attempt.
#[inline]
pub fn reuse_local<T: ReusableLocal>(local: &T) -> T {
    local.__breaker_reuse_local()
}

/// Without retry the body runs once: this wraps its one future as the attempt closure.
///
/// # Panics
/// If called twice (the pipeline never does without a retry layer).
pub fn once<F>(fut: F) -> impl FnMut() -> F {
    let mut fut = Some(fut);
    move || {
        fut.take()
            .expect("#[circuit_breaker]: a function without retry runs once")
    }
}

/// A value that keys a breaker (`key = arg`): anything `Display`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot key a circuit breaker",
    label = "`key` needs an argument whose type implements `Display`",
    note = "one breaker is kept per distinct displayed value (a host, a tenant id)"
)]
pub trait BreakerKey {
    /// The key's text.
    fn __breaker_key(&self) -> String;
}

impl<T: std::fmt::Display + ?Sized> BreakerKey for T {
    fn __breaker_key(&self) -> String {
        self.to_string()
    }
}

/// The text of a key.
pub fn key<K: BreakerKey + ?Sized>(k: &K) -> String {
    k.__breaker_key()
}

/// The `T` and `E` of a `Result<T, E>` written through an alias (`io::Result<T>`,
/// `anyhow::Result<T>`, `type Res<T> = Result<T, MyError>`).
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` needs a function returning `Result<T, E>`, found `{Self}`",
    label = "not a `Result`: the breaker counts `Err` as a failure",
    note = "`Result<T, E>` may be written through a type alias (`io::Result<T>`, `type Res<T> = Result<T, MyError>`), but the alias must name a `Result`"
)]
pub trait IsResult {
    /// `T`.
    type Ok;
    /// `E`.
    type Err;
    /// The value as the `Result` it is.
    fn __breaker_into_result(self) -> Result<Self::Ok, Self::Err>;
}

impl<T, E> IsResult for Result<T, E> {
    type Ok = T;
    type Err = E;
    #[inline]
    fn __breaker_into_result(self) -> Self {
        self
    }
}

/// The output of one attempt of a function whose return type `R` is an alias, as the
/// `Result` the pipeline takes. The expansion names `R` and spans the call at the return
/// type, so a non-`Result` alias is one error there (the signature's), not a second one.
#[inline]
pub fn into_result<R: IsResult>(output: R) -> Result<R::Ok, R::Err> {
    output.__breaker_into_result()
}

/// An error type that `#[circuit_breaker(flatten)]` can return: the pipeline's own errors
/// convert into it through `From<breaker::Error<Infallible>>` (see
/// [`Error::flatten`](crate::Error::flatten)).
#[diagnostic::on_unimplemented(
    message = "`flatten` needs `{Self}` to hold the pipeline's own errors, but `{Self}` does not implement `From<breaker::Error<Infallible>>`",
    label = "the function returns `{Self}` for a rejection or a timeout too",
    note = "`anyhow::Error` and `Box<dyn std::error::Error + Send + Sync>` qualify; for an error type of yours, add a variant holding `breaker::Error<std::convert::Infallible>` with a `From` impl, or remove `flatten` (the function then returns `Result<T, breaker::Error<E>>`)"
)]
pub trait Flatten: Sized {
    /// `e`, flattened.
    fn __breaker_flatten(e: Error<Self>) -> Self;
}

impl<E: From<Error<Infallible>>> Flatten for E {
    #[inline]
    fn __breaker_flatten(e: Error<E>) -> E {
        e.flatten()
    }
}

/// A function's result, flattened: `#[circuit_breaker(flatten)]`.
#[inline]
pub fn flatten<T, E: Flatten>(result: Result<T, Error<E>>) -> Result<T, E> {
    result.map_err(E::__breaker_flatten)
}

/// The default breaker name of a method: its type's path (without generic arguments) and
/// the method's name, `app::client::Client::get_price`. The attribute cannot see the `impl`
/// block it is in, so the expansion passes `type_name::<Self>()` on the pipeline's first
/// use; the name is interned (one allocation per annotated method, ever).
pub fn method_name(type_name: &'static str, method: &'static str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let ty = type_name.split('<').next().unwrap_or(type_name);
    let name = format!("{ty}::{method}");
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name.as_str()) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Client<T>(T);

    #[test]
    fn method_names_have_the_type_without_generics() {
        let name = method_name(std::any::type_name::<Client<u32>>(), "get_price");
        assert_eq!(
            name,
            "breaker_core::__private::support::tests::Client::get_price"
        );
        let again = method_name(std::any::type_name::<Client<String>>(), "get_price");
        assert!(std::ptr::eq(name, again), "interned");
        let _ = Client(0);
    }

    #[test]
    fn flatten_keeps_the_inner_error_and_converts_the_others() {
        #[derive(Debug, PartialEq)]
        enum App {
            Mine,
            Pipeline(String),
        }
        impl From<Error<Infallible>> for App {
            fn from(e: Error<Infallible>) -> Self {
                App::Pipeline(e.to_string())
            }
        }
        let r: Result<u32, Error<App>> = Err(Error::Inner(App::Mine));
        assert_eq!(flatten(r), Err(App::Mine));
        let elapsed = crate::timeout::Elapsed {
            kind: crate::timeout::TimeoutKind::Attempt,
            after: std::time::Duration::from_secs(1),
        };
        let r: Result<u32, Error<App>> = Err(Error::Timeout(elapsed));
        assert_eq!(
            flatten(r),
            Err(App::Pipeline(
                Error::<Infallible>::Timeout(elapsed).to_string()
            ))
        );
    }
}
