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
use crate::shape::{check_no_mut_ref_arguments, check_receiver_reusable, fn_shape, key_argument};
pub use crate::shape::{FnKind, FnShape};
use breaker_core::policy::Policy;
use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{Ident, LitStr};

/// Everything the expansion needs, valid. See the [module docs](self).
pub struct Spec {
    /// The path of the facade crate (`::breaker` unless `crate = ..`).
    pub krate: TokenStream,
    /// Where the policy comes from.
    pub source: Source,
    /// `fallback = path`.
    pub fallback: Option<syn::Path>,
    /// `classify = path`.
    pub classify: Option<syn::Path>,
    /// `retry_if = path`.
    pub retry_if: Option<syn::Path>,
    /// `record = path`: where the pipeline records its calls.
    pub record: Option<syn::Path>,
    /// `name = ".."`, if given (the default is the function's path).
    pub name: Option<LitStr>,
    /// `key = arg`, resolved to the argument.
    pub key: Option<Ident>,
    /// Whether the body may run more than once (retry is configured, or may be: a named policy).
    pub reruns: bool,
    /// The function.
    pub func: FnShape,
}

/// Where the pipeline's policy comes from.
pub enum Source {
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
pub struct ConfigFile {
    /// The literal as written (`"breaker.toml"`), for the file name shown at run time.
    pub literal: LitStr,
    /// The absolute path that was read, for the expansion's `include_str!`.
    pub path: String,
}

/// A policy written in the attribute: the built policy (checked), and the tokens of the
/// `InlinePolicy` literal that builds it again at run time.
pub struct InlineTokens {
    /// The fields of `InlinePolicy { .. }`, from the attribute's literals.
    pub tokens: TokenStream,
    /// The policy they build; `order` is set (declared, or the default order restricted to the
    /// configured layers).
    pub policy: Box<Policy>,
}

/// Runs the whole checking pass. `None` if anything was recorded in `cx`.
pub fn validate(cx: &Ctxt, args: Args, item: TokenStream) -> Option<Spec> {
    let func = fn_shape(cx, item);
    let krate = match &args.krate {
        Some(k) => k.value.to_token_stream(),
        None => quote!(::breaker),
    };
    let source = policy_source(cx, &args);
    let reruns = match &source {
        Some(Source::Inline(p)) => p.policy.retry.is_some_and(|r| r.max_attempts > 1),
        Some(Source::Named { .. }) => true,
        None => args.retry.is_some(),
    };
    let key = match (&args.key, &func) {
        (Some(k), Some(f)) => key_argument(cx, &k.value, f),
        _ => None,
    };
    if let Some(f) = &func {
        if reruns {
            check_receiver_reusable(cx, f, &args);
            check_no_mut_ref_arguments(cx, f, &args);
        }
    }
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
        reruns,
        func,
    })
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
        let config = args
            .config
            .as_ref()
            .and_then(|config| check_config_file(cx, &name.value, &config.value));
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
