//! The `#[circuit_breaker]` attribute of the [`breaker`](https://docs.rs/breaker) crate.
//!
//! Use it through the facade crate (`breaker::circuit_breaker`), whose documentation describes
//! every option with an example and the equivalent code without the macro.
//!
//! # How this crate is organised
//! Each step is its own module, run in order, and only syntax errors stop early:
//! 1. `args`: reads the attribute's options (their shapes only) into `Args`;
//! 2. `validate`: checks the values (with `breaker-core`'s own DSL parser and policy
//!    validator, the very code that runs for config files), the cross-option rules and the
//!    function's shape (`shape`: receivers, bindings, the boxed-future kind, `Result`
//!    aliases), producing a `Spec`;
//! 3. `expand`: writes the rewritten function from the `Spec` (`rewrite`: `self` in a body
//!    that retry re-runs, `impl Trait` where a type must be written, generated spans;
//!    `attempt`: the closure that gives each attempt its future and its copies of the
//!    arguments);
//! 4. `fallback`: on any error, emits the function unchanged plus every error at once.
//!
//! Errors are gathered in a `ctxt::Ctxt`; `text` writes types and tokens in messages with a
//! person's spacing.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

mod args;
mod attempt;
mod config_file;
mod ctxt;
mod expand;
mod fallback;
mod inline;
mod rewrite;
mod shape;
mod text;
mod validate;

/// Wraps an `async fn` returning `Result<T, E>` in a circuit breaker and the other layers of a
/// resilience pipeline; the function then returns `Result<T, breaker::Error<E>>`.
///
/// See the `breaker` crate's documentation of `circuit_breaker` for every option.
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::circuit_breaker(args.into(), item.into()).into()
}
