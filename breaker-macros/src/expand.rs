//! Writing the rewritten function from a valid [`Spec`].
//!
//! For
//! ```text
//! #[circuit_breaker(threshold = 5, retry = "3x")]
//! async fn get(client: &Client, sku: String) -> Result<Stock, E> { body }
//! ```
//! the output is, in outline:
//! ```text
//! async fn get(client: &Client, sku: String) -> Result<Stock, ::breaker::Error<E>> {
//!     static __BREAKER_PIPELINE: OnceLock<Pipeline> = OnceLock::new();   // one per function
//!     let __breaker_pipeline = __BREAKER_PIPELINE.get_or_init(|| Pipeline::inline(policy, name));
//!     let __breaker_target = __breaker_pipeline.breaker();   // or `.keyed(key(&expr))`
//!     let __breaker_classifier = default_classifier();   // or `classify`, `retry_if`
//!     call(__breaker_target, &__breaker_classifier, move || {   // a fresh future per attempt
//!         let client = reuse(&client);     // each name the patterns bind: `&T` copied,
//!         let sku = reuse(&sku);           // `T: Clone` cloned, with the argument's attributes
//!         async move { /* fake return typed as the user's `Result<Stock, E>` */ body }
//!     })
//!     .await
//! }
//! ```
//! Without retry the attempt is `once(async move { .. })`, which captures the arguments as
//! they are (no copies, no rebinding). With retry and an owned receiver the body uses, `self`
//! in the body becomes `__breaker_self`, a `reuse_self(&self)` per attempt. A function
//! returning a boxed future keeps its statements before `Box::pin` (run once per call) and
//! copies, per attempt, the arguments and locals its `async` block names. With `flatten`
//! the result goes through `flatten(..)` and the declared return type stays.
//!
//! The body keeps its original tokens and spans, so the user's lints and type errors land where
//! they would without the attribute; the copies are generated code at the user's tokens (see
//! `rewrite::at`), so their errors land there while lints and suggestions leave them alone.
//! Runtime support is named only through the absolute path `::breaker::__private` (or
//! `crate = path`), and generated names start with `__breaker_`.

use crate::args::Args;
use crate::attempt::{splice_arg, Attempt};
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::rewrite::{erase_impl_trait, respan};
use crate::shape::strip_mut;
use crate::validate::{self, FnKind, Source, Spec};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, ReturnType, Type};

/// The attribute's entry point: parse, validate, expand; on any error, the function unchanged
/// plus every error.
pub(crate) fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let spec = match Args::parse(&cx, args) {
        Ok(args) => validate::validate(&cx, args, item.clone()),
        Err(syntax) => {
            cx.syn_error(syntax);
            None
        }
    };
    match (cx.check(), spec) {
        (Ok(()), Some(spec)) => expand(&spec),
        (Err(errors), _) => fallback::emit(item, errors),
        (Ok(()), None) => fallback::emit(
            item,
            syn::Error::new(Span::call_site(), "internal error in #[circuit_breaker]"),
        ),
    }
}

fn expand(spec: &Spec) -> TokenStream {
    let func = &spec.func;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let mut sig = item.sig.clone();
    let attempt = Attempt::new(spec);

    if spec.reruns {
        match func.kind {
            // Every use of an argument is in the attempts, which bind it again (with `mut` as
            // written): the signature's binding is only borrowed, so `mut` there would warn.
            FnKind::Async => {
                for input in &mut sig.inputs {
                    match input {
                        FnArg::Typed(t) => strip_mut(&mut t.pat),
                        FnArg::Receiver(r) if attempt.self_copy => r.mutability = None,
                        FnArg::Receiver(_) => {}
                    }
                }
            }
            // The statements before `Box::pin` may mutate an argument, or not: both are right.
            FnKind::Boxed { .. } => {
                for input in &mut sig.inputs {
                    let allow: syn::Attribute = syn::parse_quote!(#[allow(unused_mut)]);
                    match input {
                        FnArg::Typed(t) if attempt.reuses_mut_arg(&t.pat) => t.attrs.push(allow),
                        FnArg::Receiver(r) if attempt.self_copy && r.mutability.is_some() => {
                            r.attrs.push(allow)
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    let ret = &func.ret;
    let output = match spec.flatten {
        Some(_) => ret.to_token_stream(),
        None => wrapped_type(spec),
    };
    let run = run(spec, attempt.tokens(spec));
    let name_note = doc_note(spec);
    let block = match &func.kind {
        FnKind::Async => {
            sig.output = syn::parse_quote_spanned!(ret.span()=> -> #output);
            quote!({ #run })
        }
        FnKind::Boxed { prep, .. } => {
            // `-> Pin<Box<dyn Future<Output = R> + Send + 'a>>`: replace `R`.
            if let ReturnType::Type(_, ty) = &mut sig.output {
                replace_future_output(ty, &output);
            }
            let prep = attempt.prep(prep);
            quote!({
                #(#prep)*
                ::std::boxed::Box::pin(async move { #run })
            })
        }
    };

    quote! {
        #(#attrs)*
        #name_note
        #vis #sig #block
    }
}

/// The statements of one call, inside the rewritten function: the pipeline (one per
/// function), the breaker (the function's or the key's), the classifier, the call.
fn run(spec: &Spec, attempt: TokenStream) -> TokenStream {
    let krate = &spec.krate;
    let pipeline = pipeline_expr(spec);
    let static_ty = quote!(#krate::__private::OnceLock<#krate::__private::Pipeline>);
    let select = match &spec.key {
        Some(key) => {
            let expr = &key.expr;
            let expr = if key.compound {
                quote!((#expr))
            } else {
                quote!(#expr)
            };
            quote_spanned! {key.span=>
                let __breaker_target = __breaker_pipeline.keyed(#krate::__private::key(&#expr));
            }
        }
        None => quote!(let __breaker_target = __breaker_pipeline.breaker();),
    };
    let classifier = classifier(spec);
    let call = quote! {
        #krate::__private::call(&__breaker_target, &__breaker_classifier, #attempt).await
    };
    let call = match &spec.fallback {
        // The fallback is called in an expression of its own, every token of which carries the
        // span of the user's path: a wrong signature is reported there, once (the compiler
        // folds identical errors at one place), not again on the whole attribute.
        Some(f) => {
            let (ok, err) = ok_err(spec);
            let span = f.span();
            let helper = respan(
                quote!(#krate::__private::run_fallback::<#ok, #err, _>),
                span,
            );
            let error = syn::Ident::new("__breaker_error", span);
            let fallback = quote_spanned!(span=> #helper(#f, #error).await);
            quote! {
                match #call {
                    ::core::result::Result::Err(#error)
                        if __breaker_target.wants_fallback(&#error, &__breaker_classifier) =>
                    {
                        #fallback
                    }
                    __breaker_result => __breaker_result,
                }
            }
        }
        None => call,
    };
    let call = match spec.flatten {
        Some(span) => splice_arg(respan(quote!(#krate::__private::flatten()), span), call),
        None => call,
    };
    let needs_config = match &spec.source {
        Source::Named { .. } => quote!(#krate::__private::named_policy_needs_config!();),
        Source::Inline(_) => TokenStream::new(),
    };
    let registration = crate::config_file::registration(spec, &registered_name(spec));
    quote! {
        #registration
        static __BREAKER_PIPELINE: #static_ty = #krate::__private::OnceLock::new();
        #needs_config
        let __breaker_pipeline = __BREAKER_PIPELINE.get_or_init(|| #pipeline);
        #select
        let __breaker_classifier = #classifier;
        #call
    }
}

/// `Result<T, breaker::Error<E>>`, spelled out when the declared type is `Result<T, E>`, through
/// a projection for an alias such as `io::Result<T>`.
fn wrapped_type(spec: &Spec) -> TokenStream {
    let krate = &spec.krate;
    let ret = &spec.func.ret;
    match &spec.func.ok_err {
        Some((ok, err)) => quote_spanned! {ret.span()=>
            ::core::result::Result<#ok, #krate::Error<#err>>
        },
        None => quote_spanned! {ret.span()=>
            ::core::result::Result<
                <#ret as #krate::__private::IsResult>::Ok,
                #krate::Error<<#ret as #krate::__private::IsResult>::Err>,
            >
        },
    }
}

/// The classifier, pinned to the function's `Result<T, E>` (`__private::Attr`):
/// - `classify = http`: the standard HTTP rules (`__private::classify_http!`, a compile error
///   without the `http` feature);
/// - `classify = expr`: a `fn(&E) -> Outcome` or a classifier value, told apart by its type
///   (`__private::classifier`);
/// - `retry_if = path`: the errors that are transient, coerced to a function pointer;
/// - neither: every error a failure and transient.
///
/// Each user expression is an argument of its own and every token of the call around it carries
/// its span, so a wrong signature or type is one error, under that expression.
fn classifier(spec: &Spec) -> TokenStream {
    let krate = &spec.krate;
    let (ok, err) = ok_err(spec);
    let base = match &spec.classify {
        Some(syn::Expr::Path(p)) if p.qself.is_none() && p.path.is_ident("http") => {
            let span = p.span();
            let helper = respan(quote!(#krate::__private::classify_http!), span);
            quote_spanned!(span=> #helper(#ok, #err))
        }
        Some(expr) => {
            let span = expr.span();
            let helper = respan(
                quote!(#krate::__private::classifier::<#ok, #err, _, _>),
                span,
            );
            quote_spanned!(span=> #helper(#expr))
        }
        None => quote!(#krate::__private::default_classifier::<#ok, #err>()),
    };
    match &spec.retry_if {
        Some(p) => {
            // `transient_fn::<E>(path)`, every token at the path: a mismatch lands there.
            let f = respan(quote!(#krate::__private::transient_fn::<#err>), p.span());
            let transient = quote_spanned!(p.span()=> #f(#p));
            quote!(#krate::__private::retry_if(#base, #transient))
        }
        None => base,
    }
}

/// The declared `T` and `E` as a turbofish may name them: spelled out (with any `impl Trait`
/// left to inference), or projected from an alias.
fn ok_err(spec: &Spec) -> (TokenStream, TokenStream) {
    let krate = &spec.krate;
    let ret = &spec.func.ret;
    match &spec.func.ok_err {
        Some((ok, err)) => (
            erase_impl_trait(ok).to_token_stream(),
            erase_impl_trait(err).to_token_stream(),
        ),
        None => (
            quote!(<#ret as #krate::__private::IsResult>::Ok),
            quote!(<#ret as #krate::__private::IsResult>::Err),
        ),
    }
}

/// The function's name in the link-time list of annotated functions: its `name = ".."`, else
/// its module path and name. (A method's run-time name also has its type's name, which the
/// attribute cannot see and a `static` cannot compute.)
fn registered_name(spec: &Spec) -> TokenStream {
    let ident = &spec.func.item.sig.ident;
    match &spec.name {
        Some(n) => n.to_token_stream(),
        None => quote!(::core::concat!(
            ::core::module_path!(),
            "::",
            ::core::stringify!(#ident)
        )),
    }
}

fn pipeline_expr(spec: &Spec) -> TokenStream {
    let built = source_pipeline_expr(spec);
    let krate = &spec.krate;
    match &spec.record {
        // Spanned at the user's path: a wrong signature is one type error there.
        Some(path) => {
            let span = path.span();
            let helper = respan(quote!(#krate::__private::recorder_fn), span);
            quote!(#built.recording(#helper(#path)))
        }
        None => built,
    }
}

fn source_pipeline_expr(spec: &Spec) -> TokenStream {
    let krate = &spec.krate;
    let ident = &spec.func.item.sig.ident;
    let name = match (&spec.name, &spec.func.receiver) {
        (Some(n), _) => n.to_token_stream(),
        // A method: its type's name, which the attribute cannot see, from `Self` at run time.
        (None, Some(_)) => quote!(#krate::__private::method_name(
            ::core::any::type_name::<Self>(),
            ::core::stringify!(#ident),
        )),
        (None, None) => quote!(::core::concat!(
            ::core::module_path!(),
            "::",
            ::core::stringify!(#ident)
        )),
    };
    let pipeline = match &spec.source {
        Source::Inline(inline) => {
            let fields = &inline.tokens;
            quote!(#krate::__private::Pipeline::inline(
                #krate::__private::InlinePolicy {
                    #fields
                    ..#krate::__private::InlinePolicy::EMPTY
                },
                #name,
            ))
        }
        Source::Named { policy, config } => {
            let embedded = match config {
                Some(config) => {
                    let (file, path) = (&config.literal, &config.path);
                    quote!(::core::option::Option::Some(#krate::__private::EmbeddedConfig {
                        file: #file,
                        text: ::core::include_str!(#path),
                    }))
                }
                None => quote!(::core::option::Option::None),
            };
            quote!(#krate::__private::Pipeline::named(#policy, #name, #embedded))
        }
    };
    let pipeline = match &spec.scope {
        Some(scope) => quote!(#pipeline.scoped(#scope)),
        None => pipeline,
    };
    if spec.max_keys.is_none() && spec.key_idle.is_none() {
        return pipeline;
    }
    let some = |v: Option<TokenStream>| match v {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    };
    let max_keys = some(spec.max_keys.as_ref().map(|n| {
        let n = n.base10_parse::<u64>().unwrap_or(1);
        quote!(#n)
    }));
    let key_idle = some(spec.key_idle.as_ref().map(ToTokens::to_token_stream));
    quote!(#pipeline.key_bounds(#max_keys, #key_idle))
}

fn doc_note(spec: &Spec) -> TokenStream {
    let text = match spec.flatten {
        None => {
            " \n\n*Wrapped by `#[circuit_breaker]`: returns `Result<T, breaker::Error<E>>`, \
             where `Result<T, E>` is the declared return type.*"
        }
        Some(_) => {
            " \n\n*Wrapped by `#[circuit_breaker(flatten)]`: a rejection or a timeout is \
             returned as an `E` too (see `breaker::Error::flatten`).*"
        }
    };
    quote!(#[doc = #text])
}

fn replace_future_output(ty: &mut Type, wrapped: &TokenStream) {
    let Type::Path(pin) = ty else { return };
    let Some(seg) = pin.path.segments.last_mut() else {
        return;
    };
    let syn::PathArguments::AngleBracketed(a) = &mut seg.arguments else {
        return;
    };
    let Some(syn::GenericArgument::Type(Type::Path(boxed))) = a.args.first_mut() else {
        return;
    };
    let Some(seg) = boxed.path.segments.last_mut() else {
        return;
    };
    let syn::PathArguments::AngleBracketed(a) = &mut seg.arguments else {
        return;
    };
    let Some(syn::GenericArgument::Type(Type::TraitObject(dyn_))) = a.args.first_mut() else {
        return;
    };
    for bound in &mut dyn_.bounds {
        let syn::TypeParamBound::Trait(t) = bound else {
            continue;
        };
        let Some(seg) = t.path.segments.last_mut() else {
            continue;
        };
        if let syn::PathArguments::AngleBracketed(a) = &mut seg.arguments {
            for g in &mut a.args {
                if let syn::GenericArgument::AssocType(at) = g {
                    if at.ident == "Output" {
                        at.ty = syn::parse_quote!(#wrapped);
                    }
                }
            }
        }
    }
}

/// For tests: the expansion of `#[circuit_breaker(args)] item`.
#[cfg(test)]
pub(crate) fn expand_str(args: &str, item: &str) -> String {
    let args: TokenStream = args.parse().expect("args tokens");
    let item: TokenStream = item.parse().expect("item tokens");
    circuit_breaker(args, item).to_string()
}

#[cfg(test)]
mod tests;
