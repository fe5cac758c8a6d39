//! The small traits and helpers the expansion names: reusable arguments, the single-attempt
//! closure, breaker keys and `Result` aliases.

/// An argument that retry can hand to every attempt: a reference (copied) or a `Clone` value.
#[diagnostic::on_unimplemented(
    message = "argument of type `{Self}` cannot be reused by retry",
    label = "retry runs the body once per attempt and needs this argument each time",
    note = "take the argument by reference, make its type `Clone`, or remove `retry`"
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

/// The `T` and `E` of a `Result<T, E>` written through an alias (`io::Result<T>`).
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` needs a function returning `Result<T, E>`, found `{Self}`"
)]
pub trait IsResult {
    /// `T`.
    type Ok;
    /// `E`.
    type Err;
}

impl<T, E> IsResult for Result<T, E> {
    type Ok = T;
    type Err = E;
}
