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
//!     let __breaker_target = __breaker_pipeline.breaker();   // or `.keyed(key(&arg))`
//!     let __breaker_classifier = classifier(failure, transient); // or `classify`, `retry_if`
//!     call(__breaker_target, &__breaker_classifier, move || {   // a fresh future per attempt
//!         let client = reuse(&client);     // `&T` is copied, `T: Clone` cloned
//!         let sku = reuse(&sku);
//!         async move { /* fake return typed as the user's `Result<Stock, E>` */ body }
//!     })
//!     .await
//! }
//! ```
//! The body keeps its original tokens and spans, so the user's lints and type errors land where
//! they would without the attribute. Runtime support is named only through the absolute path
//! `::breaker::__private` (or `crate = path`), and generated names start with `__breaker_`.

use crate::args::Args;
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::validate::{self, FnKind, Source, Spec};
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

fn expand(spec: &Spec) -> TokenStream {
    let func = &spec.func;
    let krate = &spec.krate;
    let item = &func.item;
    let attrs = &item.attrs;
    let vis = &item.vis;
    let mut sig = item.sig.clone();

    // Plain names in the signature; patterns are re-bound inside each attempt.
    for (input, arg) in sig
        .inputs
        .iter_mut()
        .filter(|i| matches!(i, FnArg::Typed(_)))
        .zip(&func.args)
    {
        if let FnArg::Typed(t) = input {
            let binding = &arg.binding;
            *t.pat = syn::parse_quote_spanned!(t.pat.span()=> #binding);
        }
    }

    let ret = &func.ret;
    let wrapped = wrapped_type(spec);
    let attempt = attempt_closure(spec);
    let pipeline = pipeline_expr(spec);
    let name_note = doc_note(spec);
    let static_ty = quote!(#krate::__private::OnceLock<#krate::__private::Pipeline>);
    let select = match &spec.key {
        Some(key) => quote_spanned! {key.span()=>
            let __breaker_target = __breaker_pipeline.keyed(#krate::__private::key(&#key));
        },
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
    let needs_config = match &spec.source {
        Source::Named { .. } => quote!(#krate::__private::named_policy_needs_config!();),
        Source::Inline(_) => TokenStream::new(),
    };
    let registration = crate::config_file::registration(spec, &function_name(spec));
    let run = quote! {
        #needs_config
        #registration
        static __BREAKER_PIPELINE: #static_ty = #krate::__private::OnceLock::new();
        let __breaker_pipeline = __BREAKER_PIPELINE.get_or_init(|| #pipeline);
        #select
        let __breaker_classifier = #classifier;
        #call
    };

    let block = match func.kind {
        FnKind::Async => {
            sig.output = syn::parse_quote_spanned!(ret.span()=> -> #wrapped);
            quote!({ #run })
        }
        FnKind::AsyncTrait => {
            // `-> Pin<Box<dyn Future<Output = R> + Send + 'async_trait>>`: replace `R`.
            if let ReturnType::Type(_, ty) = &mut sig.output {
                replace_future_output(ty, &wrapped);
            }
            let stmts = &item.block.stmts[..item.block.stmts.len() - 1];
            quote!({
                #(#stmts)*
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

/// The closure giving a fresh future per attempt (or, without retry, the one future).
fn attempt_closure(spec: &Spec) -> TokenStream {
    let krate = &spec.krate;
    let func = &spec.func;
    let ret = &func.ret;
    let rebind = func.args.iter().map(|a| {
        let (pat, binding) = (&a.pat, &a.binding);
        quote_spanned!(pat.span()=> let #pat = #binding;)
    });
    let fake_return = quote_spanned! {ret.span()=>
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
    let body = match func.kind {
        FnKind::Async => {
            // The body's statements, not its block: a block whose only content is the tail
            // expression, as the tail of the attempt's own block, trips `unused_braces` in the
            // user's crate (with a suggested fix that is not valid Rust).
            let stmts = &func.item.block.stmts;
            quote!(#(#rebind)* #fake_return #(#stmts)*)
        }
        FnKind::AsyncTrait => {
            let inner =
                crate::shape::async_trait_block(&func.item.block).expect("checked by validate");
            let stmts = &inner.block.stmts;
            quote!(#(#stmts)*)
        }
    };
    if !spec.reruns {
        return quote! {
            #krate::__private::once(async move { #body })
        };
    }
    let reuse = func.args.iter().map(|a| {
        let binding = &a.binding;
        quote_spanned! {a.pat.span().join(a.ty.span()).unwrap_or_else(|| a.pat.span())=>
            let #binding = #krate::__private::reuse(&#binding);
        }
    });
    quote! {
        move || {
            #(#reuse)*
            async move { #body }
        }
    }
}

/// The error classifier: `classify = path` (the breaker's verdict) and `retry_if = path`
/// (transient or not). Each path is an argument of its own, coerced to a function pointer
/// there, so a wrong signature is one error under that path.
fn classifier(spec: &Spec) -> TokenStream {
    let krate = &spec.krate;
    let (_, err) = ok_err(spec);
    // `outcome_fn::<E>(path)`, every token at the path: the mismatch and its labels land there.
    let checked = |helper: &str, path: &Option<syn::Path>, default: &str| {
        let helper = syn::Ident::new(helper, Span::call_site());
        match path {
            Some(p) => {
                let f = respan(quote!(#krate::__private::#helper::<#err>), p.span());
                quote_spanned!(p.span()=> #f(#p))
            }
            None => {
                let default = syn::Ident::new(default, Span::call_site());
                quote!(#krate::__private::#default)
            }
        }
    };
    let outcome = checked("outcome_fn", &spec.classify, "failure");
    let transient = checked("transient_fn", &spec.retry_if, "transient");
    quote!(#krate::__private::classify::<#err>(#outcome, #transient))
}

/// `tokens` with every span set to `span`, so an error about the whole expression (not only
/// its argument) lands on the user's path too.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let proc_macro2::TokenTree::Group(g) = &t {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                t = proc_macro2::TokenTree::Group(group);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}

/// The declared `T` and `E`, spelled out or projected from an alias.
fn ok_err(spec: &Spec) -> (TokenStream, TokenStream) {
    let krate = &spec.krate;
    let ret = &spec.func.ret;
    match &spec.func.ok_err {
        Some((ok, err)) => (ok.to_token_stream(), err.to_token_stream()),
        None => (
            quote!(<#ret as #krate::__private::IsResult>::Ok),
            quote!(<#ret as #krate::__private::IsResult>::Err),
        ),
    }
}

/// The function's name: its `name = ".."`, else its module path and name.
fn function_name(spec: &Spec) -> TokenStream {
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
    let krate = &spec.krate;
    let name = function_name(spec);
    match &spec.source {
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
    }
}

fn doc_note(spec: &Spec) -> TokenStream {
    let text = " \n\n*Wrapped by `#[circuit_breaker]`: returns `Result<T, breaker::Error<E>>`, \
                where `Result<T, E>` is the declared return type.*";
    let _ = spec;
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
