//! The checking pass: from the option shapes of [`Args`] and the function's tokens to a
//! [`Spec`], the complete, valid description of what to generate.
//!
//! Values are checked with `breaker-core`'s own code, so a duration, a retry spec or a breaker
//! policy written in the attribute is accepted or rejected exactly as it would be in a DSL
//! string or a config file, with the same error text. Cross-option rules (`order` versus the
//! configured layers, `config` without `policy`, `retry` on a non-idempotent function) and the
//! function's shape (async, returns a `Result`, arguments reusable by retry) are checked here
//! too. Every error is recorded in the [`Ctxt`], spanned at the offending tokens.

use crate::args::{Args, Given, Number, WindowArg};
use crate::ctxt::Ctxt;
use breaker_core::__private::{InlinePolicy, OptionError};
use breaker_core::policy::Policy;
use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{
    Block, Expr, FnArg, GenericArgument, Ident, ItemFn, LitInt, LitStr, Pat, PathArguments,
    ReturnType, Signature, Stmt, Type,
};

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

/// The shape of the annotated function.
pub struct FnShape {
    /// The function as written.
    pub item: ItemFn,
    /// How its body is written.
    pub kind: FnKind,
    /// The declared return type, `Result<T, E>` (or an alias named `Result`).
    pub ret: Type,
    /// `T` and `E` of the declared return type, when written out as `Result<T, E>`.
    pub ok_err: Option<(Type, Type)>,
    /// The arguments the body uses, in order.
    pub args: Vec<Arg>,
    /// The receiver, if a method.
    pub receiver: Option<syn::Receiver>,
}

/// How the body is written.
pub enum FnKind {
    /// `async fn`: the body is the function's block.
    Async,
    /// The shape `#[async_trait]` produces: `fn f(..) -> Pin<Box<dyn Future<Output = R> + ..>>`
    /// whose last statement is `Box::pin(async move { .. })`; the body is that async block.
    AsyncTrait,
}

/// One typed argument.
pub struct Arg {
    /// The name it has in the rewritten signature (the user's name for a plain `name: T`,
    /// `__breaker_argN` for a pattern).
    pub binding: Ident,
    /// The pattern the body expects (`name`, `mut name`, `(a, b)`).
    pub pat: Pat,
    /// Its type.
    pub ty: Type,
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
        name: args.name.map(|g| g.value),
        key,
        reruns,
        func,
    })
}

// ---------------------------------------------------------------------------------------------
// The policy

/// The options that describe the policy itself; they cannot be combined with `policy = ".."`.
fn inline_options(args: &Args) -> Vec<(&'static str, Span)> {
    let mut given = Vec::new();
    let mut add = |name: &'static str, key: Option<Span>| {
        if let Some(span) = key {
            given.push((name, span));
        }
    };
    add("threshold", args.threshold.as_ref().map(|g| g.key));
    add("failure_rate", args.failure_rate.as_ref().map(|g| g.key));
    add("window", args.window.as_ref().map(|g| g.key));
    add("min_calls", args.min_calls.as_ref().map(|g| g.key));
    add("cooldown", args.cooldown.as_ref().map(|g| g.key));
    add(
        "half_open_probes",
        args.half_open_probes.as_ref().map(|g| g.key),
    );
    add("retry", args.retry.as_ref().map(|g| g.key));
    add("idempotent", args.idempotent.as_ref().map(|g| g.key));
    add("timeout", args.timeout.as_ref().map(|g| g.key));
    add("deadline", args.deadline.as_ref().map(|g| g.key));
    add("concurrency", args.concurrency.as_ref().map(|g| g.key));
    add("order", args.order.as_ref().map(|g| g.key));
    given
}

fn policy_source(cx: &Ctxt, args: &Args) -> Option<Source> {
    if let Some(name) = &args.policy {
        for (option, span) in inline_options(args) {
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

/// Reads `config` (relative to the crate root) at compile time and checks that policy `name`
/// exists in it and is valid, with the same loader the run-time registry uses. Problems with
/// the policy are reported under `name`, problems with the file under `config`.
fn check_config_file(cx: &Ctxt, name: &LitStr, config: &LitStr) -> Option<ConfigFile> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let path = std::path::Path::new(&dir).join(config.value());
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                _ => e.to_string(),
            };
            cx.error_spanned_by(
                config,
                format!(
                    "cannot read config file `{}`: {why}; the path is relative to the crate root \
                     (the directory of Cargo.toml)",
                    config.value()
                ),
            );
            return None;
        }
    };
    let file = config.value();
    match breaker_core::__private::check_named_policy(&file, &text, &name.value()) {
        Ok(()) => Some(ConfigFile {
            literal: config.clone(),
            path: path.to_string_lossy().into_owned(),
        }),
        Err(errors) => {
            for e in errors {
                let at = if e.about_policy { name } else { config };
                cx.error_spanned_by(at, e.message);
            }
            None
        }
    }
}

/// Builds the attribute's policy with `breaker-core`'s [`InlinePolicy::build`] (the code the
/// generated function runs on first call) and reports its errors at the offending literals.
/// Returns the tokens of the same `InlinePolicy`, for the expansion.
fn inline_policy(cx: &Ctxt, args: &Args) -> Option<InlineTokens> {
    let mut ok = true;
    let mut num = |lit: &LitInt| match lit.base10_parse::<u64>() {
        Ok(n) => Some(n),
        Err(e) => {
            cx.error_spanned_by(lit, format!("invalid number `{lit}`: {e}"));
            ok = false;
            None
        }
    };
    let threshold = args.threshold.as_ref().and_then(|g| num(&g.value));
    let min_calls = args.min_calls.as_ref().and_then(|g| num(&g.value));
    let half_open_probes = args.half_open_probes.as_ref().and_then(|g| num(&g.value));
    let concurrency = args.concurrency.as_ref().and_then(|g| num(&g.value));
    let window_calls = match args.window.as_ref().map(|g| &g.value) {
        Some(WindowArg::Calls(l)) => num(l),
        _ => None,
    };
    let failure_rate = match args.failure_rate.as_ref().map(|g| &g.value) {
        Some(Number::Int(l)) => num(l).map(|n| n as f64),
        Some(Number::Float(l)) => match l.base10_parse::<f64>() {
            Ok(f) => Some(f),
            Err(e) => {
                cx.error_spanned_by(l, format!("invalid number `{l}`: {e}"));
                ok = false;
                None
            }
        },
        None => None,
    };
    if !ok {
        return None;
    }
    let window_time = match args.window.as_ref().map(|g| &g.value) {
        Some(WindowArg::Time(l)) => Some(l.value()),
        _ => None,
    };
    let string = |g: &Option<Given<LitStr>>| g.as_ref().map(|g| g.value.value());
    let (cooldown, retry, timeout, deadline) = (
        string(&args.cooldown),
        string(&args.retry),
        string(&args.timeout),
        string(&args.deadline),
    );
    let order_names: Option<Vec<String>> = args
        .order
        .as_ref()
        .map(|g| g.value.items.iter().map(|i| i.to_string()).collect());
    let order_refs: Option<Vec<&str>> = order_names
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    let policy = InlinePolicy {
        threshold,
        failure_rate,
        window_calls,
        window_time: window_time.as_deref(),
        min_calls,
        cooldown: cooldown.as_deref(),
        half_open_probes,
        retry: retry.as_deref(),
        idempotent: args.idempotent.as_ref().map(|g| g.value.value),
        timeout: timeout.as_deref(),
        deadline: deadline.as_deref(),
        concurrency,
        order: order_refs.as_deref(),
    };
    match policy.build() {
        Ok(policy) => Some(InlineTokens {
            tokens: inline_tokens(args),
            policy: Box::new(policy),
        }),
        Err(errors) => {
            for e in errors {
                cx.error_at(option_span(args, &e), e.message);
            }
            None
        }
    }
}

/// Where an option error belongs: at the offending `order` item, else at the option's value.
fn option_span(args: &Args, e: &OptionError) -> Span {
    fn value<T: Spanned>(g: &Option<Given<T>>) -> Option<Span> {
        g.as_ref().map(|g| g.value.span())
    }
    let span = match e.option {
        "threshold" => value(&args.threshold),
        "failure_rate" => args.failure_rate.as_ref().map(|g| g.value.span()),
        "window" => args.window.as_ref().map(|g| match &g.value {
            WindowArg::Calls(l) => l.span(),
            WindowArg::Time(l) => l.span(),
        }),
        "min_calls" => value(&args.min_calls),
        "cooldown" => value(&args.cooldown),
        "half_open_probes" => value(&args.half_open_probes),
        "retry" => value(&args.retry),
        "idempotent" => value(&args.idempotent),
        "timeout" => value(&args.timeout),
        "deadline" => value(&args.deadline),
        "concurrency" => value(&args.concurrency),
        "order" => args.order.as_ref().map(|g| match e.item {
            Some(i) => g.value.items[i].span(),
            None => g.value.span,
        }),
        _ => None,
    };
    span.unwrap_or_else(Span::call_site)
}

/// The `InlinePolicy { .. }` literal the expansion builds at run time: the attribute's own
/// literals, in the order the fields are declared.
fn inline_tokens(args: &Args) -> TokenStream {
    let mut fields = TokenStream::new();
    let some = |v: TokenStream| quote!(::core::option::Option::Some(#v));
    let mut field = |name: &str, v: Option<TokenStream>| {
        if let Some(v) = v {
            let name = Ident::new(name, Span::call_site());
            let v = some(v);
            fields.extend(quote!(#name: #v,));
        }
    };
    let int = |g: &Option<Given<LitInt>>| {
        g.as_ref().map(|g| {
            let n = g.value.base10_parse::<u64>().unwrap_or_default();
            quote!(#n)
        })
    };
    let string = |g: &Option<Given<LitStr>>| g.as_ref().map(|g| g.value.to_token_stream());
    field("threshold", int(&args.threshold));
    field(
        "failure_rate",
        args.failure_rate.as_ref().map(|g| {
            let f = match &g.value {
                Number::Int(l) => l.base10_parse::<u64>().unwrap_or_default() as f64,
                Number::Float(l) => l.base10_parse::<f64>().unwrap_or_default(),
            };
            let lit = proc_macro2::Literal::f64_suffixed(f);
            quote!(#lit)
        }),
    );
    match args.window.as_ref().map(|g| &g.value) {
        Some(WindowArg::Calls(l)) => {
            let n = l.base10_parse::<u64>().unwrap_or_default();
            field("window_calls", Some(quote!(#n)));
        }
        Some(WindowArg::Time(l)) => field("window_time", Some(l.to_token_stream())),
        None => {}
    }
    field("min_calls", int(&args.min_calls));
    field("cooldown", string(&args.cooldown));
    field("half_open_probes", int(&args.half_open_probes));
    field("retry", string(&args.retry));
    field(
        "idempotent",
        args.idempotent.as_ref().map(|g| {
            let b = g.value.value;
            quote!(#b)
        }),
    );
    field("timeout", string(&args.timeout));
    field("deadline", string(&args.deadline));
    field("concurrency", int(&args.concurrency));
    field(
        "order",
        args.order.as_ref().map(|g| {
            let names = g.value.items.iter().map(|i| i.to_string());
            quote!(&[#(#names),*])
        }),
    );
    fields
}

// ---------------------------------------------------------------------------------------------
// The function

fn fn_shape(cx: &Ctxt, item: TokenStream) -> Option<FnShape> {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            if let Ok(decl) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
                cx.error_spanned_by(
                    &decl.sig.ident,
                    "`#[circuit_breaker]` needs the function's body; put it on the \
                     implementation (or on a default method body), not on a declaration",
                );
            } else {
                cx.error_at(
                    Span::call_site(),
                    "`#[circuit_breaker]` can only be applied to an `async fn`",
                );
            }
            return None;
        }
    };
    let sig = &item.sig;
    let (kind, ret) = if sig.asyncness.is_some() {
        match &sig.output {
            ReturnType::Type(_, ty) => (FnKind::Async, (**ty).clone()),
            ReturnType::Default => {
                cx.error_spanned_by(
                    &sig.ident,
                    format!(
                        "`{}` returns `()`, but `#[circuit_breaker]` needs a function returning \
                         `Result<T, E>`: the breaker counts `Err` as a failure",
                        sig.ident
                    ),
                );
                return None;
            }
        }
    } else if let Some(ret) = async_trait_output(&item) {
        (FnKind::AsyncTrait, ret)
    } else {
        cx.error_spanned_by(
            sig.fn_token,
            format!(
                "`#[circuit_breaker]` needs an `async fn`; `{}` is synchronous (write `async fn`)",
                sig.ident
            ),
        );
        return None;
    };
    if let Some(c) = &sig.constness {
        cx.error_spanned_by(c, "`#[circuit_breaker]` cannot be applied to a `const fn`");
    }
    let ok_err = match result_args(&ret) {
        Some(ok_err) => ok_err,
        None => {
            cx.error_spanned_by(
                &ret,
                format!(
                    "`#[circuit_breaker]` needs a function returning `Result<T, E>`, found `{}`; \
                     the breaker counts `Err` as a failure",
                    ret.to_token_stream()
                ),
            );
            return None;
        }
    };
    let (args, receiver) = arguments(&item.sig);
    Some(FnShape {
        item,
        kind,
        ret,
        ok_err,
        args,
        receiver,
    })
}

/// `Some(Some((T, E)))` for `Result<T, E>`, `Some(None)` for an alias such as `io::Result<T>`,
/// `None` for anything that is not named `Result`.
#[allow(clippy::option_option)]
fn result_args(ty: &Type) -> Option<Option<(Type, Type)>> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    if let PathArguments::AngleBracketed(a) = &last.arguments {
        let types: Vec<&Type> = a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect();
        if let [ok, err] = types.as_slice() {
            return Some(Some(((*ok).clone(), (*err).clone())));
        }
    }
    Some(None)
}

/// The `R` of `Pin<Box<dyn Future<Output = R> + ..>>` when the function has the shape
/// `#[async_trait]` generates and its last statement is `Box::pin(async move { .. })`.
fn async_trait_output(item: &ItemFn) -> Option<Type> {
    async_trait_block(&item.block)?;
    let ReturnType::Type(_, ty) = &item.sig.output else {
        return None;
    };
    future_output(ty).cloned()
}

/// The `R` in `Pin<Box<dyn Future<Output = R> + ..>>`.
pub fn future_output(ty: &Type) -> Option<&Type> {
    let Type::Path(pin) = ty else { return None };
    let seg = pin.path.segments.last()?;
    if seg.ident != "Pin" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let Some(GenericArgument::Type(Type::Path(boxed))) = a.args.first() else {
        return None;
    };
    let seg = boxed.path.segments.last()?;
    if seg.ident != "Box" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let Some(GenericArgument::Type(Type::TraitObject(dyn_))) = a.args.first() else {
        return None;
    };
    dyn_.bounds.iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let seg = t.path.segments.last()?;
        if seg.ident != "Future" {
            return None;
        }
        let PathArguments::AngleBracketed(a) = &seg.arguments else {
            return None;
        };
        a.args.iter().find_map(|g| match g {
            GenericArgument::AssocType(at) if at.ident == "Output" => Some(&at.ty),
            _ => None,
        })
    })
}

/// The `async move { .. }` block of `Box::pin(async move { .. })`, the last statement of an
/// `#[async_trait]` method's body.
pub fn async_trait_block(block: &Block) -> Option<&syn::ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last() else {
        return None;
    };
    let Expr::Path(f) = &*call.func else {
        return None;
    };
    let names: Vec<String> = f
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if names.len() < 2 || names[names.len() - 2] != "Box" || names[names.len() - 1] != "pin" {
        return None;
    }
    match call.args.first() {
        Some(Expr::Async(a)) if call.args.len() == 1 => Some(a),
        _ => None,
    }
}

fn arguments(sig: &Signature) -> (Vec<Arg>, Option<syn::Receiver>) {
    let mut args = Vec::new();
    let mut receiver = None;
    for (i, input) in sig.inputs.iter().enumerate() {
        match input {
            FnArg::Receiver(r) => receiver = Some(r.clone()),
            FnArg::Typed(t) => {
                let binding = match &*t.pat {
                    Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => p.ident.clone(),
                    other => Ident::new(&format!("__breaker_arg{i}"), other.span()),
                };
                args.push(Arg {
                    binding,
                    pat: (*t.pat).clone(),
                    ty: (*t.ty).clone(),
                });
            }
        }
    }
    (args, receiver)
}

fn key_argument(cx: &Ctxt, key: &Ident, func: &FnShape) -> Option<Ident> {
    if let Some(arg) = func.args.iter().find(|a| a.binding == *key) {
        return Some(arg.binding.clone());
    }
    let names: Vec<String> = func
        .args
        .iter()
        .filter(|a| !a.binding.to_string().starts_with("__breaker_"))
        .map(|a| format!("`{}`", a.binding))
        .collect();
    let list = if names.is_empty() {
        "the function has no named arguments".to_string()
    } else {
        format!("its arguments are {}", names.join(", "))
    };
    cx.error_spanned_by(
        key,
        format!(
            "`key = {key}` names no argument of `{}`; {list}",
            func.item.sig.ident
        ),
    );
    None
}

/// A receiver taken by value or by `&mut` cannot be handed to a second attempt.
/// A `&mut` argument cannot be handed to several attempts: said here, at the argument, rather
/// than by the `Reusable` bound, whose error names the hidden support module and ends with a
/// suggestion that does not compile.
fn check_no_mut_ref_arguments(cx: &Ctxt, func: &FnShape, args: &Args) {
    for arg in &func.args {
        let Type::Reference(r) = &arg.ty else {
            continue;
        };
        if r.mutability.is_none() {
            continue;
        }
        let shared = Type::Reference(syn::TypeReference {
            mutability: None,
            ..r.clone()
        });
        let mut err = syn::Error::new_spanned(
            &arg.ty,
            format!(
                "retry runs `{}` more than once, but argument `{}` is a `{}`, which only one \
                 attempt can hold; take `{}`, an owned `Clone` value, or remove `retry`",
                func.item.sig.ident,
                arg.pat.to_token_stream(),
                type_text(&arg.ty),
                type_text(&shared),
            ),
        );
        if let Some(retry) = &args.retry {
            err.combine(syn::Error::new(retry.key, "retry is configured here"));
        }
        cx.syn_error(err);
    }
}

/// `ty` as written, near enough: its tokens without the spaces `to_string` puts around
/// `&`, `<`, `>`, `::` and `,`.
fn type_text(ty: &Type) -> String {
    ty.to_token_stream()
        .to_string()
        .replace("& ", "&")
        .replace(" < ", "<")
        .replace(" <", "<")
        .replace(" >", ">")
        .replace(" :: ", "::")
        .replace(" ,", ",")
}

fn check_receiver_reusable(cx: &Ctxt, func: &FnShape, args: &Args) {
    let Some(r) = &func.receiver else { return };
    let shared_ref = r.reference.is_some() && r.mutability.is_none();
    if shared_ref {
        return;
    }
    let how = if r.reference.is_some() {
        "`&mut self` is borrowed exclusively"
    } else {
        "`self` is moved into the first attempt"
    };
    let mut err = syn::Error::new_spanned(
        r,
        format!(
            "retry runs `{}` more than once, but {how}, so it cannot be reused by the next \
             attempt; take `&self`, or remove `retry`",
            func.item.sig.ident
        ),
    );
    if let Some(retry) = &args.retry {
        err.combine(syn::Error::new(retry.key, "retry is configured here"));
    }
    cx.syn_error(err);
}
