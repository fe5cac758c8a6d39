//! The error collector shared by parsing and validation (after serde_derive's `internals/ctxt.rs`).
//!
//! Value errors never stop the macro: they are recorded here and parsing goes on, so the user
//! sees every mistake in one compile. [`Ctxt::check`] turns the collected errors into one
//! combined [`syn::Error`]. A `Ctxt` dropped without being checked panics: an error that was
//! recorded and then forgotten is a bug in the macro.

use quote::ToTokens;
use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

/// Collects errors; see the [module docs](self).
pub(crate) struct Ctxt {
    /// `None` once checked.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    /// A fresh collector.
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error spanned at `obj`'s tokens.
    pub(crate) fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        self.syn_error(syn::Error::new_spanned(obj.into_token_stream(), msg));
    }

    /// Records an error at `span`.
    pub(crate) fn error_at<T: Display>(&self, span: proc_macro2::Span, msg: T) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// Records a ready-made error.
    pub(crate) fn syn_error(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// Whether any error has been recorded so far.
    pub(crate) fn has_errors(&self) -> bool {
        self.errors.borrow().as_ref().is_some_and(|e| !e.is_empty())
    }

    /// Consumes the collector: `Ok` if nothing was recorded, otherwise every error combined into
    /// one, in the order they were recorded.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("Ctxt checked twice")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("breaker-macros: Ctxt dropped without being checked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::Span;

    #[test]
    fn combines_in_order() {
        let cx = Ctxt::new();
        cx.error_at(Span::call_site(), "first");
        cx.error_at(Span::call_site(), "second");
        let err = cx.check().unwrap_err();
        let msgs: Vec<_> = err.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs, ["first", "second"]);
    }

    #[test]
    fn empty_is_ok() {
        assert!(Ctxt::new().check().is_ok());
    }

    #[test]
    #[should_panic(expected = "without being checked")]
    fn unchecked_panics() {
        let cx = Ctxt::new();
        cx.error_at(Span::call_site(), "lost");
    }
}
