//! The checking pass: from the option shapes of [`Args`] and the function's tokens to a
//! [`Spec`], the complete, valid description of what to generate.
//!
//! Values are checked with `breaker-core`'s own code, so a duration, a retry spec or a breaker
//! policy written in the attribute is accepted or rejected exactly as it would be in a DSL
//! string or a config file, with the same error text. Cross-option rules (`order` versus the
//! configured layers, `config` without `policy`, `retry` on a non-idempotent function) and the
//! function's shape (async, returns a `Result`, arguments reusable by retry) are checked here
//! too. Every error is recorded in the [`Ctxt`], spanned at the offending tokens.

use crate::args::{Args, Key};
use crate::config_file::check_config_file;
use crate::ctxt::Ctxt;
use crate::inline::inline_policy;
use crate::shape::{check_no_mut_ref_arguments, check_receiver_reusable, fn_shape};
pub(crate) use crate::shape::{FnKind, FnShape, RecvKind};
use breaker_core::policy::Policy;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use std::collections::HashSet;
use syn::{Expr, LitInt, LitStr};

/// Everything the expansion needs, valid. See the [module docs](self).
pub(crate) struct Spec {
    /// The path of the facade crate (`::breaker` unless `crate = ..`).
    pub krate: TokenStream,
    /// Where the policy comes from.
    pub source: Source,
    /// `fallback = path`.
    pub fallback: Option<syn::Path>,
    /// `classify = ..`: `http`, a path or a classifier expression.
    pub classify: Option<syn::Expr>,
    /// `retry_if = path`.
    pub retry_if: Option<syn::Path>,
    /// `record = path`: where the pipeline records its calls.
    pub record: Option<syn::Path>,
    /// `name = ".."`, if given (the default is the function's path).
    pub name: Option<LitStr>,
    /// `key = expression`.
    pub key: Option<KeySpec>,
    /// `max_keys = N`, checked (at least 1).
    pub max_keys: Option<LitInt>,
    /// `key_idle = "D"`, checked (a non-zero duration).
    pub key_idle: Option<LitStr>,
    /// `scope = ".."`, checked, when it is shared (`shared`, `quorum(k)`).
    pub scope: Option<LitStr>,
    /// `flatten`: the span of the option, where a type error about it belongs.
    pub flatten: Option<Span>,
    /// Whether the body may run more than once (retry is configured, or may be: a named policy).
    pub reruns: bool,
    /// The function.
    pub func: FnShape,
}

/// A checked `key = ..`.
pub(crate) struct KeySpec {
    /// The expression to key on: for `key = arg`, the argument's own name in the signature
    /// (so errors about its type land there), else the expression as written.
    pub expr: TokenStream,
    /// Where errors about the key (its type is not `Display`) belong.
    pub span: Span,
    /// Whether `expr` needs parentheses after `&`.
    pub compound: bool,
    /// The identifiers it mentions: an argument named here is used even if the body does not
    /// use it.
    pub mentions: HashSet<String>,
}

/// Where the pipeline's policy comes from.
pub(crate) enum Source {
    /// Written in the attribute.
    Inline(InlineTokens),
    /// `policy = "name"`, looked up in the config registry at run time.
    Named {
        /// The policy's name.
        policy: LitStr,
        /// With `config = "file"`: the file, checked at compile time and embedded.
        config: Option<ConfigFile>,
    },
}

/// A `config = "file"` that was read and checked while compiling.
pub(crate) struct ConfigFile {
    /// The literal as written (`"breaker.toml"`), for the file name shown at run time.
    pub literal: LitStr,
    /// The absolute path that was read, for the expansion's `include_str!`.
    pub path: String,
}

/// A policy written in the attribute: the built policy (checked), and the tokens of the
/// `InlinePolicy` literal that builds it again at run time.
pub(crate) struct InlineTokens {
    /// The fields of `InlinePolicy { .. }`, from the attribute's literals.
    pub tokens: TokenStream,
    /// The policy they build; `order` is set (declared, or the default order restricted to the
    /// configured layers).
    pub policy: Box<Policy>,
}

/// Runs the whole checking pass. `None` if anything was recorded in `cx`.
pub(crate) fn validate(cx: &Ctxt, args: Args, item: TokenStream) -> Option<Spec> {
    let func = fn_shape(cx, item);
    let krate = match &args.krate {
        Some(k) => k.value.to_token_stream(),
        None => quote!(::breaker),
    };
    let source = policy_source(cx, &args);
    let reruns = match &source {
        // Retry and hedging both run the body more than once (hedging, of an idempotent
        // function only, which the policy's validation already required).
        Some(Source::Inline(p)) => {
            p.policy.retry.is_some_and(|r| r.max_attempts > 1)
                || (p.policy.hedge.is_some() && p.policy.idempotent)
        }
        Some(Source::Named { .. }) => true,
        None => args.retry.is_some() || args.hedge.is_some(),
    };
    let key = match (&args.key, &func) {
        (Some(k), Some(f)) => key_spec(cx, &k.value, f),
        _ => None,
    };
    if let (Some(Source::Inline(p)), Some(rate), None) = (&source, &args.rate, &args.key) {
        if p.policy.rate_limit.is_some_and(|r| r.per_key) {
            cx.error_spanned_by(
                &rate.value,
                "`rate` is `per key`, but no `key` is given; add `key = ..` to say what a key \
                 is (an argument, or a field of `self`), or remove `per key`",
            );
        }
    }
    let (max_keys, key_idle) = key_bounds(cx, &args);
    let scope = check_scope(cx, &args);
    if let Some(f) = &func {
        if reruns {
            check_receiver_reusable(cx, f, &args);
            check_no_mut_ref_arguments(cx, f, &args);
        }
    }
    let flatten = args
        .flatten
        .as_ref()
        .filter(|g| g.value.value)
        .map(|g| g.key);
    let func = func?;
    let source = source?;
    if cx.has_errors() {
        return None;
    }
    Some(Spec {
        krate,
        source,
        fallback: args.fallback.map(|g| g.value),
        classify: args.classify.map(|g| g.value),
        retry_if: args.retry_if.map(|g| g.value),
        record: args.record.map(|g| g.value),
        name: args.name.map(|g| g.value),
        key,
        max_keys,
        key_idle,
        scope,
        flatten,
        reruns,
        func,
    })
}

// ---------------------------------------------------------------------------------------------
// `scope`

/// `scope = ".."`: the scope's syntax through the run-time parser. A shared scope (`shared`,
/// `quorum(k)`) is returned for the expansion, which shares the function's breaker at its
/// first call with the store `breaker_redis::install` installed (a clear panic then if there
/// is none: never a breaker that silently stays local); `local` needs nothing.
fn check_scope(cx: &Ctxt, args: &Args) -> Option<LitStr> {
    let g = args.scope.as_ref()?;
    let src = g.value.value();
    match src.parse::<breaker_core::scope::Scope>() {
        Ok(scope) => scope.is_shared().then(|| g.value.clone()),
        Err(e) => {
            cx.error_spanned_by(
                &g.value,
                breaker_core::__private::literal_error("scope", &src, &e),
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `key`, `max_keys`, `key_idle`

/// Checks `key = expr`: a lone name must be an argument; `self` needs a receiver. Anything
/// else about the expression (a field that does not exist, a type without `Display`) is the
/// compiler's to say, at the expression.
fn key_spec(cx: &Ctxt, expr: &Expr, func: &FnShape) -> Option<KeySpec> {
    let mut mentions = HashSet::new();
    crate::shape::idents_in(expr.to_token_stream(), &mut mentions);
    let names: Vec<&syn::Ident> = func
        .args
        .iter()
        .flat_map(|a| a.bindings.iter().map(|b| &b.ident))
        .collect();
    if let Expr::Path(p) = expr {
        if let Some(ident) = p.path.get_ident().filter(|_| p.qself.is_none()) {
            if ident != "self" {
                let Some(arg) = names.iter().find(|n| **n == ident) else {
                    key_names_no_argument(cx, ident, func, &names);
                    return None;
                };
                return Some(KeySpec {
                    expr: arg.to_token_stream(),
                    span: arg.span(),
                    compound: false,
                    mentions,
                });
            }
        }
    }
    if func.receiver.is_none() {
        if let Some(self_token) = find_self(expr.to_token_stream()) {
            cx.error_spanned_by(
                self_token,
                format!(
                    "`key = {}` uses `self`, but `{}` has no receiver; key on an argument \
                    (`key = host`), or make the function a method (`&self`)",
                    crate::text::tokens_text(expr.to_token_stream()),
                    func.item.sig.ident
                ),
            );
            return None;
        }
    }
    let compound = !matches!(
        expr,
        Expr::Path(_)
            | Expr::Field(_)
            | Expr::MethodCall(_)
            | Expr::Call(_)
            | Expr::Index(_)
            | Expr::Lit(_)
            | Expr::Paren(_)
            | Expr::Macro(_)
    );
    Some(KeySpec {
        expr: expr.to_token_stream(),
        span: syn::spanned::Spanned::span(expr),
        compound,
        mentions,
    })
}

fn key_names_no_argument(cx: &Ctxt, key: &syn::Ident, func: &FnShape, names: &[&syn::Ident]) {
    let names: Vec<String> = names
        .iter()
        .filter(|n| !n.to_string().starts_with("__"))
        .map(|n| format!("`{n}`"))
        .collect();
    let list = if names.is_empty() {
        "the function has no named arguments".to_string()
    } else {
        format!("its arguments are {}", names.join(", "))
    };
    let field = if func.receiver.is_some() {
        format!(", or a field of `self` (`key = self.{key}`)")
    } else {
        String::new()
    };
    cx.error_spanned_by(
        key,
        format!(
            "`key = {key}` names no argument of `{}`; {list}{field}",
            func.item.sig.ident
        ),
    );
}

/// The first `self` token of `tokens`.
fn find_self(tokens: TokenStream) -> Option<syn::Ident> {
    tokens.into_iter().find_map(|tt| match tt {
        TokenTree::Ident(i) if i == "self" => Some(i),
        TokenTree::Group(g) => find_self(g.stream()),
        _ => None,
    })
}

/// `max_keys = N` (at least 1) and `key_idle = "D"` (a non-zero duration), which bound the
/// breakers of `key` and mean nothing without it.
fn key_bounds(cx: &Ctxt, args: &Args) -> (Option<LitInt>, Option<LitStr>) {
    for (name, key) in [
        ("max_keys", args.max_keys.as_ref().map(|g| g.key)),
        ("key_idle", args.key_idle.as_ref().map(|g| g.key)),
    ] {
        if let (Some(span), None) = (key, &args.key) {
            cx.error_at(
                span,
                format!(
                    "`{name}` bounds the breakers (and rate limiters) of `key = ..`, one per key, \
                    but no `key` is given; add `key = ..` or remove `{name}`"
                ),
            );
        }
    }
    let max_keys = args.max_keys.as_ref().and_then(|g| {
        match g.value.base10_parse::<u64>() {
            Ok(0) => cx.error_spanned_by(
                &g.value,
                "`max_keys` must be at least 1, got 0: it is the most breakers (and rate limiters) \
                 kept for keys",
            ),
            Ok(_) => return Some(g.value.clone()),
            Err(e) => cx.error_spanned_by(&g.value, format!("invalid number `{}`: {e}", g.value)),
        }
        None
    });
    let key_idle = args.key_idle.as_ref().and_then(|g| {
        let src = g.value.value();
        match breaker_core::dsl::parse_duration(&src) {
            Ok(d) if d.is_zero() => cx.error_spanned_by(
                &g.value,
                format!(
                    "`key_idle` must be longer than zero, got `{src}`: it is how long a key's \
                    closed breaker (or refilled rate limiter) goes unused before it may be \
                    evicted"
                ),
            ),
            Ok(_) => return Some(g.value.clone()),
            Err(e) => cx.error_spanned_by(
                &g.value,
                breaker_core::__private::literal_error("key_idle", &src, &e),
            ),
        }
        None
    });
    (max_keys, key_idle)
}

// ---------------------------------------------------------------------------------------------
// The policy

fn policy_source(cx: &Ctxt, args: &Args) -> Option<Source> {
    if let Some(name) = &args.policy {
        let given = Key::ALL
            .into_iter()
            .filter(|o| o.sets_policy())
            .filter_map(|o| Some((o, args.key_span(o)?)));
        for (option, span) in given {
            cx.error_at(
                span,
                format!(
                    "`{option}` cannot be combined with `policy = {:?}`: the named policy \
                     defines it; set it in the config file or remove `policy`",
                    name.value.value()
                ),
            );
        }
        let config = args.config.as_ref().and_then(|config| {
            check_config_file(cx, &name.value, &config.value, args.key.is_some())
        });
        return Some(Source::Named {
            policy: name.value.clone(),
            config,
        });
    }
    if let Some(config) = &args.config {
        cx.error_at(
            config.key,
            "`config` names the file to check a named policy against, but no `policy = \"..\"` \
             is given; add `policy = \"name\"` or remove `config`",
        );
    }
    inline_policy(cx, args).map(Source::Inline)
}
