//! What the macro emits when the attribute or the function has an error: the user's function
//! exactly as written, followed by the errors.
//!
//! Emitting the function keeps the rest of the crate compiling against it (callers, the IDE's
//! completion and go-to-definition), so the user sees the attribute's errors and nothing else:
//! no cascade of "cannot find function" or type errors caused by a missing item.

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The function tokens unchanged, then `compile_error!`s for `error`.
pub(crate) fn emit(item: TokenStream, error: syn::Error) -> TokenStream {
    let mut out = item;
    error.to_compile_error().to_tokens(&mut out);
    out
}
