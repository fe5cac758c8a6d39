//! One attempt of the rewritten function: the closure that gives a fresh future per attempt
//! (or, without retry, the one future), the copies of the arguments each attempt binds again,
//! and the `self` copy of an owned receiver. [`expand`](crate::expand) puts it in place.

use crate::rewrite::{at, erase_impl_trait, replace_self, respan};
use crate::shape::Binding;
use crate::validate::{FnKind, RecvKind, Spec};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

/// The name of the per-attempt copy of an owned receiver (the body's `self` is renamed to it).
const SELF_COPY: &str = "__breaker_self";

/// One attempt: the closure giving a fresh future per attempt (or, without retry, the one
/// future), and what the function must do around it for that.
pub(crate) struct Attempt {
    /// The body of one attempt (`self` renamed when an owned receiver is copied).
    body: Vec<syn::Stmt>,
    /// With retry: the names each attempt binds again, from a copy of the outer binding.
    reused: Vec<Reused>,
    /// With retry and an owned receiver the body uses: `self` is copied per attempt.
    pub(crate) self_copy: bool,
}

/// A name an attempt binds from a copy.
struct Reused {
    binding: Binding,
    /// Which support function copies it (its error message names what it is).
    how: &'static str,
    /// `#[allow(unused_variables)]` on the copy: the name is used outside the body (by
    /// `key`), or may not be used by the body at all (a boxed future's capture, found by
    /// name only).
    allow_unused: bool,
    /// `#[allow(unused_mut)]` on the copy (a boxed future's capture: the block may not
    /// mutate what the statements before it did).
    allow_unused_mut: bool,
}

impl Attempt {
    pub(crate) fn new(spec: &Spec) -> Attempt {
        let func = &spec.func;
        let mut body = match &func.kind {
            FnKind::Async => func.item.block.stmts.clone(),
            FnKind::Boxed { body, .. } => body.clone(),
        };
        let owned = func
            .receiver
            .as_ref()
            .is_some_and(|r| r.kind == RecvKind::Owned);
        let self_copy = spec.reruns && owned && replace_self(&mut body, SELF_COPY);
        let mut reused = Vec::new();
        if spec.reruns {
            let key_mentions = |b: &Binding| {
                spec.key
                    .as_ref()
                    .is_some_and(|k| k.mentions.contains(&b.ident.to_string()))
            };
            match &func.kind {
                FnKind::Async => {
                    for b in func.args.iter().flat_map(|a| &a.bindings) {
                        reused.push(Reused {
                            allow_unused: key_mentions(b),
                            binding: b.clone(),
                            how: "reuse",
                            allow_unused_mut: false,
                        });
                    }
                }
                FnKind::Boxed {
                    locals, mentioned, ..
                } => {
                    // What the `async` block may capture: the arguments and locals it names.
                    // A local shadows an argument of the same name.
                    let args = func
                        .args
                        .iter()
                        .flat_map(|a| &a.bindings)
                        .map(|b| (b, "reuse"));
                    let locals = locals.iter().map(|b| (b, "reuse_local"));
                    for (b, how) in args.chain(locals) {
                        if !mentioned.contains(&b.ident.to_string()) {
                            continue;
                        }
                        reused.retain(|r: &Reused| r.binding.ident != b.ident);
                        reused.push(Reused {
                            binding: b.clone(),
                            how,
                            allow_unused: true,
                            allow_unused_mut: true,
                        });
                    }
                }
            }
        }
        Attempt {
            body,
            reused,
            self_copy,
        }
    }

    /// Whether the signature's pattern `pat` binds a name this attempt copies with `mut`.
    pub(crate) fn reuses_mut_arg(&self, pat: &syn::Pat) -> bool {
        crate::shape::bindings(pat, &[]).iter().any(|b| {
            b.mutability.is_some()
                && self
                    .reused
                    .iter()
                    .any(|r| r.binding.ident == b.ident && r.how == "reuse")
        })
    }

    /// The statements before `Box::pin`, with `#[allow(unused_mut)]` on the `let`s of the
    /// locals each attempt copies (the attempt's copy is the one the block mutates).
    pub(crate) fn prep(&self, prep: &[syn::Stmt]) -> Vec<syn::Stmt> {
        prep.iter()
            .cloned()
            .map(|mut stmt| {
                if let syn::Stmt::Local(local) = &mut stmt {
                    let copied = crate::shape::bindings(&local.pat, &[]).iter().any(|b| {
                        b.mutability.is_some()
                            && self
                                .reused
                                .iter()
                                .any(|r| r.binding.ident == b.ident && r.how == "reuse_local")
                    });
                    if copied {
                        local.attrs.push(syn::parse_quote!(#[allow(unused_mut)]));
                    }
                }
                stmt
            })
            .collect()
    }

    pub(crate) fn tokens(&self, spec: &Spec) -> TokenStream {
        let krate = &spec.krate;
        let func = &spec.func;
        let ret = erase_impl_trait(&func.ret);
        let fake_return = quote_spanned! {func.ret.span()=>
            #[allow(
                unknown_lints,
                unreachable_code,
                clippy::diverging_sub_expression,
                clippy::empty_loop,
                clippy::let_unit_value,
                clippy::needless_return,
                clippy::unreachable
            )]
            if false {
                let __breaker_fake_return: #ret = loop {};
                return __breaker_fake_return;
            }
        };
        // The body's statements, not its block: a block whose only content is the tail
        // expression, as the tail of the attempt's own block, trips `unused_braces` in the
        // user's crate (with a suggested fix that is not valid Rust).
        let stmts = &self.body;
        let body = quote!(#fake_return #(#stmts)*);
        let future = match func.ok_err {
            Some(_) => quote!(async move { #body }),
            // An alias: the attempt's output goes through `IsResult` (see `aliased`).
            // Every token of the call at the return type, the parentheses too, so the call's
            // own span is the return type's and a non-`Result` is one error there.
            None => {
                let ret = &func.ret;
                let into = respan(
                    quote!(#krate::__private::into_result::<#ret>()),
                    func.ret.span(),
                );
                let into = splice_arg(into, quote!(async move { #body }.await));
                quote!(async move { #into })
            }
        };
        if !spec.reruns {
            return quote! {
                #krate::__private::once(#future)
            };
        }
        let reuse = self.reused.iter().map(|r| {
            let Binding {
                ident,
                mutability,
                attrs,
            } = &r.binding;
            let how = syn::Ident::new(r.how, Span::call_site());
            // The copy is generated code at the user's token: errors (`Clone` missing) land
            // there, lints and suggestions about it do not.
            let copy = respan(quote!(#krate::__private::#how(&)), at(ident.span()));
            let copy = splice_arg(copy, use_of(ident));
            let mut allows = Vec::new();
            if r.allow_unused {
                allows.push(quote!(unused_variables));
            }
            if r.allow_unused_mut {
                allows.push(quote!(unused_mut));
            }
            let allow = (!allows.is_empty()).then(|| quote!(#[allow(#(#allows),*)]));
            quote! {
                #(#attrs)*
                #allow
                let #mutability #ident = #copy;
            }
        });
        let self_copy = self.self_copy.then(|| {
            let r = func.receiver.as_ref().expect("an owned receiver");
            let mutability = r.receiver.mutability;
            let self_token = &r.receiver.self_token;
            let copy_name = syn::Ident::new(SELF_COPY, Span::call_site());
            let copy = respan(
                quote!(#krate::__private::reuse_self(&)),
                at(self_token.span()),
            );
            let copy = splice_arg(copy, quote!(#self_token));
            quote!(let #mutability #copy_name = #copy;)
        });
        quote! {
            move || {
                #(#reuse)*
                #self_copy
                #future
            }
        }
    }
}

/// A use of the binding `ident` in generated code: the user's names get the macro's hygiene
/// at the user's place (see [`at`]); a name some other macro generated (`#[async_trait]`'s
/// `__arg0`, at its own hygiene) is kept as it is, or it would no longer resolve.
fn use_of(ident: &syn::Ident) -> TokenStream {
    if ident.to_string().starts_with("__") {
        return ident.to_token_stream();
    }
    let mut ident = ident.clone();
    ident.set_span(at(ident.span()));
    ident.to_token_stream()
}

/// `path(..)` with `arg` appended inside the parentheses (`path(&)` becomes `path(&arg)`):
/// the call's own tokens keep their spans.
pub(crate) fn splice_arg(call: TokenStream, arg: TokenStream) -> TokenStream {
    call.into_iter()
        .map(|tt| match tt {
            proc_macro2::TokenTree::Group(g)
                if g.delimiter() == proc_macro2::Delimiter::Parenthesis =>
            {
                let mut inner = g.stream();
                inner.extend(arg.clone());
                let mut group = proc_macro2::Group::new(g.delimiter(), inner);
                group.set_span(g.span());
                proc_macro2::TokenTree::Group(group)
            }
            other => other,
        })
        .collect()
}
