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
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::rewrite::{at, erase_impl_trait, replace_self, respan};
use crate::shape::{strip_mut, Binding};
use crate::validate::{self, FnKind, RecvKind, Source, Spec};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, ReturnType, Type};

/// The attribute's entry point: parse, validate, expand; on any error, the function unchanged
/// plus every error.
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
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

/// The name of the per-attempt copy of an owned receiver (the body's `self` is renamed to it).
const SELF_COPY: &str = "__breaker_self";

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

/// One attempt: the closure giving a fresh future per attempt (or, without retry, the one
/// future), and what the function must do around it for that.
struct Attempt {
    /// The body of one attempt (`self` renamed when an owned receiver is copied).
    body: Vec<syn::Stmt>,
    /// With retry: the names each attempt binds again, from a copy of the outer binding.
    reused: Vec<Reused>,
    /// With retry and an owned receiver the body uses: `self` is copied per attempt.
    self_copy: bool,
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
    fn new(spec: &Spec) -> Attempt {
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
    fn reuses_mut_arg(&self, pat: &syn::Pat) -> bool {
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
    fn prep(&self, prep: &[syn::Stmt]) -> Vec<syn::Stmt> {
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

    fn tokens(&self, spec: &Spec) -> TokenStream {
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
fn splice_arg(call: TokenStream, arg: TokenStream) -> TokenStream {
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
mod tests {
    use super::expand_str;
    use std::path::Path;

    /// Compares `actual` with the committed snapshot `name`; `BREAKER_SNAPSHOTS=overwrite`
    /// rewrites it (review the diff).
    fn snapshot(name: &str, actual: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(format!("{name}.txt"));
        let actual = pretty(actual);
        if std::env::var_os("BREAKER_SNAPSHOTS").is_some_and(|v| v == "overwrite") {
            std::fs::write(&path, &actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("missing snapshot {}: {e}", path.display()));
        assert_eq!(actual, expected, "expansion of {name} changed");
    }

    /// One statement or attribute per line, so a snapshot diff is readable.
    fn pretty(tokens: &str) -> String {
        let mut out = String::new();
        for part in tokens.split_inclusive(['{', ';', '}']) {
            out.push_str(part.trim());
            out.push('\n');
        }
        out
    }

    const FN: &str = "async fn call(id: u64) -> Result<u64, E> { inner(id).await }";

    #[test]
    fn br_42_retry_outside_breaker_expands_in_declared_order() {
        let out = expand_str(
            r#"threshold = 5, retry = "3x", order = [retry, breaker]"#,
            FN,
        );
        assert!(
            out.contains(
                r#"order : :: core :: option :: Option :: Some (& ["retry" , "breaker"])"#
            ),
            "{out}"
        );
        snapshot("br_42_retry_outside_breaker", &out);
    }

    #[test]
    fn br_42_breaker_outside_retry_expands_in_declared_order() {
        let out = expand_str(
            r#"threshold = 5, retry = "3x", order = [breaker, retry]"#,
            FN,
        );
        assert!(
            out.contains(
                r#"order : :: core :: option :: Option :: Some (& ["breaker" , "retry"])"#
            ),
            "{out}"
        );
        snapshot("br_42_breaker_outside_retry", &out);
    }

    #[test]
    fn br_43_all_four_layers_in_declared_order() {
        let out = expand_str(
            r#"threshold = 5, retry = "3x", timeout = "1s", concurrency = 4, order = [timeout, breaker, retry, bulkhead]"#,
            FN,
        );
        snapshot("br_43_four_layers", &out);
    }

    #[test]
    fn br_43_default_order_is_built_by_the_same_code() {
        use breaker_core::__private::InlinePolicy;
        use breaker_core::layer::Layer;
        let policy = InlinePolicy {
            retry: Some("3x"),
            timeout: Some("1s"),
            concurrency: Some(4),
            ..InlinePolicy::EMPTY
        }
        .build()
        .unwrap();
        assert_eq!(policy.order.as_deref(), Some(&Layer::DEFAULT_ORDER[..]));
    }

    #[test]
    fn br_43_order_errors_point_at_the_item() {
        let out = expand_str(r#"retry = "3x", order = [retry, breaker, retry]"#, FN);
        assert!(out.contains("layer `retry` is listed twice"), "{out}");
        // The function is still emitted, unchanged.
        assert!(
            out.starts_with("async fn call (id : u64) -> Result < u64 , E >"),
            "{out}"
        );
    }

    #[test]
    fn keyed_and_hooks() {
        let out = expand_str(
            "threshold = 2, key = id, classify = c, retry_if = t, fallback = f, name = \"n\"",
            FN,
        );
        snapshot("keyed_and_hooks", &out);
    }

    #[test]
    fn named_policy_embeds_the_checked_file() {
        let out = expand_str(
            r#"policy = "inventory", config = "../tests/fixtures/breaker.toml""#,
            FN,
        );
        assert!(
            out.contains(":: breaker :: __private :: named_policy_needs_config ! ()"),
            "{out}"
        );
        assert!(
            out.contains(":: breaker :: __private :: Pipeline :: named (\"inventory\""),
            "{out}"
        );
        assert!(
            out.contains("file : \"../tests/fixtures/breaker.toml\""),
            "{out}"
        );
        assert!(out.contains(":: core :: include_str ! (\""), "{out}");
        // A policy defined elsewhere: no file, the installed registry at run time.
        let out = expand_str(r#"policy = "inventory""#, FN);
        assert!(out.contains("\"inventory\" , :: core :: concat !"), "{out}");
        assert!(
            out.contains(":: core :: option :: Option :: None)"),
            "{out}"
        );
    }

    #[test]
    fn named_policy_errors_sit_under_the_literals() {
        let file = r#"config = "../tests/fixtures/breaker.toml""#;
        let out = expand_str(&format!(r#"policy = "inventry", {file}"#), FN);
        assert!(
            out.contains(
                "policy `inventry` not found in ../tests/fixtures/breaker.toml; available: \
                 `inventory`, `payments`"
            ),
            "{out}"
        );
        let out = expand_str(
            r#"policy = "inventory", config = "../tests/fixtures/invalid.toml""#,
            FN,
        );
        assert!(
            out.contains(
                "policy `inventory` is invalid: ../tests/fixtures/invalid.toml:4:24: \
                 policies.inventory.breaker.consecutive_failures: must be at least 1, got 0"
            ),
            "{out}"
        );
        let out = expand_str(r#"policy = "inventory", config = "nope.toml""#, FN);
        assert!(
            out.contains("cannot read config file `nope.toml`: no such file"),
            "{out}"
        );
        let out = expand_str(r#"policy = "inventory", config = "../Cargo.lock""#, FN);
        assert!(out.contains("has an unknown format"), "{out}");
        // The function is still emitted, unchanged.
        assert!(
            out.starts_with("async fn call (id : u64) -> Result < u64 , E >"),
            "{out}"
        );
    }

    #[test]
    fn renamed_crate() {
        let out = expand_str("crate = ::other::breaker", FN);
        assert_eq!(
            out.matches(":: breaker :: __private").count(),
            out.matches(":: other :: breaker :: __private").count(),
            "{out}"
        );
        assert!(
            out.contains(":: other :: breaker :: __private :: Pipeline :: inline"),
            "{out}"
        );
    }
}
