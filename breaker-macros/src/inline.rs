//! A policy written in the attribute's options: built with `breaker-core`'s own code to
//! report errors at the literals, and turned into the tokens that build it again at run time.

use crate::args::{Args, Given, Key, Number, WindowArg};
use crate::ctxt::Ctxt;
use crate::validate::InlineTokens;
use breaker_core::__private::{InlinePolicy, OptionError};
use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::{Ident, LitInt, LitStr};

/// Builds the attribute's policy with `breaker-core`'s [`InlinePolicy::build`] (the code the
/// generated function runs on first call) and reports its errors at the offending literals.
/// Returns the tokens of the same `InlinePolicy`, for the expansion.
pub(crate) fn inline_policy(cx: &Ctxt, args: &Args) -> Option<InlineTokens> {
    let mut ok = true;
    let mut num = |lit: &LitInt| match int(lit) {
        Ok(n) => Some(n),
        Err(why) => {
            cx.error_spanned_by(lit, why);
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
        Some(n) => match percent(n) {
            Ok(f) => Some(f),
            Err(why) => {
                cx.error_at(n.span(), why);
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
    let (cooldown, retry, timeout, deadline, scope) = (
        string(&args.cooldown),
        string(&args.retry),
        string(&args.timeout),
        string(&args.deadline),
        string(&args.scope),
    );
    let (rate, hedge, adaptive, throttle) = (
        string(&args.rate),
        string(&args.hedge),
        string(&args.adaptive),
        string(&args.throttle),
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
        rate: rate.as_deref(),
        hedge: hedge.as_deref(),
        adaptive: adaptive.as_deref(),
        throttle: throttle.as_deref(),
        order: order_refs.as_deref(),
        scope: scope.as_deref(),
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

/// An integer literal's value, or why it is not one.
fn int(lit: &LitInt) -> Result<u64, String> {
    lit.base10_parse::<u64>()
        .map_err(|e| format!("invalid number `{lit}`: {e}"))
}

/// The value of `failure_rate = ..`: a number literal (at least 1: a bare `0.5` reads as a
/// ratio and is refused, as in config files) or a string with its `%` (`"0.5%"`).
fn percent(n: &Number) -> Result<f64, String> {
    let bare = |f: f64| match breaker_core::__private::ratio_not_percent(f) {
        Some(why) => Err(format!("failure_rate = {why}")),
        None => Ok(f),
    };
    match n {
        Number::Int(l) => int(l).map(|n| n as f64),
        Number::Float(l) => l
            .base10_parse::<f64>()
            .map_err(|e| format!("invalid number `{l}`: {e}"))
            .and_then(bare),
        Number::Str(l) => {
            let src = l.value();
            breaker_core::dsl::parse_percent(&src)
                .map_err(|e| breaker_core::__private::literal_error("failure_rate", &src, &e))
        }
    }
}

/// Where an option error belongs: at the offending `order` item, else at the option's value;
/// an error no option caused (a default, `option: None`) belongs to the attribute as a whole.
fn option_span(args: &Args, e: &OptionError) -> Span {
    let Some(option) = e.option else {
        return Span::call_site();
    };
    if let (Key::Order, Some(i), Some(order)) = (option, e.item, &args.order) {
        return order.value.items[i].span();
    }
    // `InlinePolicy::build` only reports options that were given, at their value.
    args.value_span(option).unwrap_or_else(Span::call_site)
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
            // Reached only when `inline_policy` read the value.
            let f = percent(&g.value).unwrap_or_default();
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
    field("rate", string(&args.rate));
    field("hedge", string(&args.hedge));
    field("adaptive", string(&args.adaptive));
    field("throttle", string(&args.throttle));
    field(
        "order",
        args.order.as_ref().map(|g| {
            let names = g.value.items.iter().map(|i| i.to_string());
            quote!(&[#(#names),*])
        }),
    );
    field("scope", string(&args.scope));
    fields
}
