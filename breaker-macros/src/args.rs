//! Parsing the attribute's arguments: `#[circuit_breaker(key = value, flag, ..)]`.
//!
//! This pass only reads *shapes*: which option, and whether its value is the kind of token the
//! option takes (a string literal, an integer, a path, a list of layer names). What the values
//! mean (is `"30 parsecs"` a duration? is `threshold = 0` allowed? does `order` name a layer
//! that is configured?) is checked by `validate.rs`.
//!
//! Only a syntax error (`threshold 5`, a missing comma) stops parsing. An unknown option, a value
//! of the wrong shape or an option given twice is recorded in the [`Ctxt`] and parsing goes on,
//! so every mistake is reported in one compile.

use crate::ctxt::Ctxt;
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitBool, LitInt, LitStr, Path, Token};

/// One option of the attribute: `breaker-core`'s list of them, which also maps the policy's
/// fields to options, so the parser and that mapping are exhaustive `match`es over one enum.
pub(crate) use breaker_core::__private::AttrOption as Key;

/// The option that `input` starts with, if it is one (`crate` is Rust's own keyword, so the
/// name is read as any identifier).
fn peek_option(input: ParseStream) -> Option<Key> {
    let name = input.fork().call(Ident::parse_any).ok()?;
    Key::ALL.into_iter().find(|o| name == o.name())
}

/// An option's value together with the span of its key, for errors about the option as a whole
/// ("`config` needs `policy`"). Errors about the value itself are spanned at the value.
#[derive(Clone, Debug)]
pub(crate) struct Given<T> {
    /// The span of the option's name.
    pub key: Span,
    /// The value as written.
    pub value: T,
}

/// A number literal: `5` or `50.5`.
#[derive(Clone, Debug)]
pub(crate) enum Number {
    /// An integer literal.
    Int(LitInt),
    /// A float literal.
    Float(syn::LitFloat),
    /// A string with its `%` (`"0.5%"`), as in config files.
    Str(LitStr),
}

impl Number {
    /// The literal's span.
    pub(crate) fn span(&self) -> Span {
        match self {
            Number::Int(l) => l.span(),
            Number::Float(l) => l.span(),
            Number::Str(l) => l.span(),
        }
    }
}

/// The `window` option: a number of calls or a duration string.
#[derive(Clone, Debug)]
pub(crate) enum WindowArg {
    /// `window = 100`: the last 100 calls.
    Calls(LitInt),
    /// `window = "60s"`: the calls of the last 60 seconds.
    Time(LitStr),
}

impl WindowArg {
    /// The literal's span.
    pub(crate) fn span(&self) -> Span {
        match self {
            WindowArg::Calls(l) => l.span(),
            WindowArg::Time(l) => l.span(),
        }
    }
}

/// `order = [retry, breaker, timeout]`: layer names, outermost first.
#[derive(Clone, Debug)]
pub(crate) struct OrderArg {
    /// The span of the whole `[..]`.
    pub span: Span,
    /// The names as written, each with its own span.
    pub items: Vec<Ident>,
}

/// The parsed arguments, each option at most once. See the [module docs](self).
#[derive(Default, Debug)]
pub(crate) struct Args {
    /// `threshold = N`: trip after N consecutive failures.
    pub threshold: Option<Given<LitInt>>,
    /// `failure_rate = P`: trip when at least P% of the window failed.
    pub failure_rate: Option<Given<Number>>,
    /// `window = N` or `window = "D"`.
    pub window: Option<Given<WindowArg>>,
    /// `min_calls = N`.
    pub min_calls: Option<Given<LitInt>>,
    /// `cooldown = "D"`.
    pub cooldown: Option<Given<LitStr>>,
    /// `half_open_probes = N`.
    pub half_open_probes: Option<Given<LitInt>>,
    /// `retry = "3x exp jitter"`.
    pub retry: Option<Given<LitStr>>,
    /// `timeout = "D"` (per attempt).
    pub timeout: Option<Given<LitStr>>,
    /// `deadline = "D"` (total).
    pub deadline: Option<Given<LitStr>>,
    /// `order = [..]`.
    pub order: Option<Given<OrderArg>>,
    /// `concurrency = N` (bulkhead).
    pub concurrency: Option<Given<LitInt>>,
    /// `rate = "100/s burst 20"` (rate limit).
    pub rate: Option<Given<LitStr>>,
    /// `hedge = "1x after 50ms"` (hedging).
    pub hedge: Option<Given<LitStr>>,
    /// `adaptive = "aimd 5..200"` (adaptive concurrency limit).
    pub adaptive: Option<Given<LitStr>>,
    /// `throttle = "k 2 over 2m"` (client-side adaptive throttling).
    pub throttle: Option<Given<LitStr>>,
    /// `fallback = path`.
    pub fallback: Option<Given<Path>>,
    /// `classify = http`, `classify = path::to::fn` or `classify = <classifier expression>`.
    pub classify: Option<Given<Expr>>,
    /// `retry_if = path`.
    pub retry_if: Option<Given<Path>>,
    /// `record = path`: a `fn() -> Option<Recorder>`.
    pub record: Option<Given<Path>>,
    /// `idempotent` or `idempotent = bool`.
    pub idempotent: Option<Given<LitBool>>,
    /// `name = "..."`.
    pub name: Option<Given<LitStr>>,
    /// `crate = path` or `crate = "path"`.
    pub krate: Option<Given<Path>>,
    /// `policy = "name"`.
    pub policy: Option<Given<LitStr>>,
    /// `config = "file.toml"`.
    pub config: Option<Given<LitStr>>,
    /// `key = expression` over the arguments and `self`.
    pub key: Option<Given<Expr>>,
    /// `max_keys = N`: at most N keyed breakers.
    pub max_keys: Option<Given<LitInt>>,
    /// `key_idle = "D"`: a closed key breaker unused for D may be evicted.
    pub key_idle: Option<Given<LitStr>>,
    /// `scope = "local"`: where the breaker's state lives (`local`, `shared`, `quorum(k)`;
    /// checked at compile time).
    pub scope: Option<Given<LitStr>>,
    /// `flatten` or `flatten = bool`: keep the declared error type.
    pub flatten: Option<Given<LitBool>>,
}

/// The one set-once helper: stores the first occurrence of an option and reports any later one
/// at its own key, pointing back at nothing else (the first is still in force).
fn set_once<T>(cx: &Ctxt, slot: &mut Option<Given<T>>, key: &Ident, value: Option<T>) {
    if slot.is_some() {
        cx.error_at(
            key.span(),
            format!("option `{key}` is given more than once; remove this one"),
        );
        return;
    }
    if let Some(value) = value {
        *slot = Some(Given {
            key: key.span(),
            value,
        });
    }
}

impl Args {
    /// The spans of option `option`'s name and of its value, if it was given.
    fn spans(&self, option: Key) -> Option<(Span, Span)> {
        fn of<T: Spanned>(g: &Option<Given<T>>) -> Option<(Span, Span)> {
            g.as_ref().map(|g| (g.key, g.value.span()))
        }
        match option {
            Key::Threshold => of(&self.threshold),
            Key::FailureRate => self.failure_rate.as_ref().map(|g| (g.key, g.value.span())),
            Key::Window => self.window.as_ref().map(|g| (g.key, g.value.span())),
            Key::MinCalls => of(&self.min_calls),
            Key::Cooldown => of(&self.cooldown),
            Key::HalfOpenProbes => of(&self.half_open_probes),
            Key::Retry => of(&self.retry),
            Key::RetryIf => of(&self.retry_if),
            Key::Idempotent => of(&self.idempotent),
            Key::Timeout => of(&self.timeout),
            Key::Deadline => of(&self.deadline),
            Key::Concurrency => of(&self.concurrency),
            Key::Rate => of(&self.rate),
            Key::Hedge => of(&self.hedge),
            Key::Adaptive => of(&self.adaptive),
            Key::Throttle => of(&self.throttle),
            Key::Order => self.order.as_ref().map(|g| (g.key, g.value.span)),
            Key::Fallback => of(&self.fallback),
            Key::Classify => of(&self.classify),
            Key::Record => of(&self.record),
            Key::Name => of(&self.name),
            Key::ByKey => of(&self.key),
            Key::MaxKeys => of(&self.max_keys),
            Key::KeyIdle => of(&self.key_idle),
            Key::Scope => of(&self.scope),
            Key::Flatten => of(&self.flatten),
            Key::Policy => of(&self.policy),
            Key::Config => of(&self.config),
            Key::Crate => of(&self.krate),
        }
    }

    /// The span of option `option`'s name, if it was given.
    pub(crate) fn key_span(&self, option: Key) -> Option<Span> {
        self.spans(option).map(|(key, _)| key)
    }

    /// The span of option `option`'s value, if it was given.
    pub(crate) fn value_span(&self, option: Key) -> Option<Span> {
        self.spans(option).map(|(_, value)| value)
    }

    /// Parses the attribute's arguments, recording value errors in `cx`.
    ///
    /// # Errors
    /// Only on a syntax error, after which nothing more can be read.
    pub(crate) fn parse(cx: &Ctxt, tokens: proc_macro2::TokenStream) -> syn::Result<Args> {
        let parser = |input: ParseStream| {
            let mut args = Args::default();
            while !input.is_empty() {
                args.parse_one(cx, input)?;
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(args)
        };
        parser.parse2(tokens)
    }

    fn parse_one(&mut self, cx: &Ctxt, input: ParseStream) -> syn::Result<()> {
        let option = peek_option(input);
        // `crate` is a Rust keyword, so read the name as any identifier.
        let key = Ident::parse_any(input)?;
        let value: Option<Expr> = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            return Err(input.error(format!("expected `=` after `{key}`, like `{key} = ..`")));
        };
        let Some(option) = option else {
            unknown(cx, &key);
            return Ok(());
        };
        // A flag written without a value; every option but `idempotent` and `flatten` needs one.
        let Some(value) = value else {
            if option == Key::Idempotent {
                let lit = LitBool::new(true, key.span());
                set_once(cx, &mut self.idempotent, &key, Some(lit));
            } else if option == Key::Flatten {
                let lit = LitBool::new(true, key.span());
                set_once(cx, &mut self.flatten, &key, Some(lit));
            } else {
                cx.error_at(
                    key.span(),
                    format!(
                        "option `{key}` needs a value: `{key} = {}`",
                        example(option)
                    ),
                );
            }
            return Ok(());
        };
        let v = &value;
        match option {
            Key::Threshold => set_once(cx, &mut self.threshold, &key, int(cx, option, v)),
            Key::FailureRate => {
                let number = match v {
                    Expr::Lit(ExprLit {
                        lit: Lit::Int(l), ..
                    }) => Some(Number::Int(l.clone())),
                    Expr::Lit(ExprLit {
                        lit: Lit::Float(l), ..
                    }) => Some(Number::Float(l.clone())),
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(l), ..
                    }) => Some(Number::Str(l.clone())),
                    _ => shape(cx, option, v),
                };
                set_once(cx, &mut self.failure_rate, &key, number)
            }
            Key::Window => {
                let window = match v {
                    Expr::Lit(ExprLit {
                        lit: Lit::Int(l), ..
                    }) => Some(WindowArg::Calls(l.clone())),
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(l), ..
                    }) => Some(WindowArg::Time(l.clone())),
                    _ => shape(cx, option, v),
                };
                set_once(cx, &mut self.window, &key, window)
            }
            Key::MinCalls => set_once(cx, &mut self.min_calls, &key, int(cx, option, v)),
            Key::Cooldown => set_once(cx, &mut self.cooldown, &key, string(cx, option, v)),
            Key::HalfOpenProbes => {
                set_once(cx, &mut self.half_open_probes, &key, int(cx, option, v))
            }
            Key::Retry => set_once(cx, &mut self.retry, &key, string(cx, option, v)),
            Key::RetryIf => set_once(cx, &mut self.retry_if, &key, path(cx, option, v)),
            Key::Idempotent => {
                let flag = match v {
                    Expr::Lit(ExprLit {
                        lit: Lit::Bool(b), ..
                    }) => Some(b.clone()),
                    _ => shape(cx, option, v),
                };
                set_once(cx, &mut self.idempotent, &key, flag)
            }
            Key::Timeout => set_once(cx, &mut self.timeout, &key, string(cx, option, v)),
            Key::Deadline => set_once(cx, &mut self.deadline, &key, string(cx, option, v)),
            Key::Concurrency => set_once(cx, &mut self.concurrency, &key, int(cx, option, v)),
            Key::Rate => set_once(cx, &mut self.rate, &key, string(cx, option, v)),
            Key::Hedge => set_once(cx, &mut self.hedge, &key, string(cx, option, v)),
            Key::Adaptive => set_once(cx, &mut self.adaptive, &key, string(cx, option, v)),
            Key::Throttle => set_once(cx, &mut self.throttle, &key, string(cx, option, v)),
            Key::Order => set_once(cx, &mut self.order, &key, order(cx, option, v)),
            Key::Fallback => set_once(cx, &mut self.fallback, &key, path(cx, option, v)),
            // Any expression: `http`, a `fn(&E) -> Outcome` path or a classifier value; which
            // one is decided by its type (see `expand::classifier`).
            Key::Classify => set_once(cx, &mut self.classify, &key, Some(v.clone())),
            Key::Record => set_once(cx, &mut self.record, &key, path(cx, option, v)),
            Key::Name => set_once(cx, &mut self.name, &key, string(cx, option, v)),
            // Any expression over the arguments and `self`; `validate` checks what it names.
            Key::ByKey => set_once(cx, &mut self.key, &key, Some(v.clone())),
            Key::MaxKeys => set_once(cx, &mut self.max_keys, &key, int(cx, option, v)),
            Key::KeyIdle => set_once(cx, &mut self.key_idle, &key, string(cx, option, v)),
            Key::Scope => set_once(cx, &mut self.scope, &key, string(cx, option, v)),
            Key::Flatten => {
                let flag = match v {
                    Expr::Lit(ExprLit {
                        lit: Lit::Bool(b), ..
                    }) => Some(b.clone()),
                    _ => shape(cx, option, v),
                };
                set_once(cx, &mut self.flatten, &key, flag)
            }
            Key::Policy => set_once(cx, &mut self.policy, &key, string(cx, option, v)),
            Key::Config => set_once(cx, &mut self.config, &key, string(cx, option, v)),
            Key::Crate => {
                let krate = match v {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(s), ..
                    }) => match s.parse::<Path>() {
                        Ok(p) => Some(p),
                        Err(_) => {
                            cx.error_spanned_by(
                                s,
                                format!("`crate` must name a path, got `{}`", s.value()),
                            );
                            None
                        }
                    },
                    _ => path(cx, option, v),
                };
                set_once(cx, &mut self.krate, &key, krate)
            }
        }
        Ok(())
    }
}

fn unknown(cx: &Ctxt, key: &Ident) {
    let list = Key::ALL
        .iter()
        .map(|o| format!("`{o}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let names: Vec<String> = Key::ALL.iter().map(|o| o.to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let hint = breaker_core::__private::suggest(&key.to_string(), &names)
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    cx.error_at(
        key.span(),
        format!("unknown option `{key}`; expected one of {list}{hint}"),
    );
}

/// A short example value for `option`, used in "expected .." messages.
fn example(option: Key) -> &'static str {
    option.example()
}

/// Records "`key` expects X" at the value and returns `None`.
fn shape<T>(cx: &Ctxt, option: Key, value: &Expr) -> Option<T> {
    let what = match option {
        Key::Threshold | Key::MinCalls | Key::HalfOpenProbes | Key::Concurrency | Key::MaxKeys => {
            "an integer"
        }
        Key::FailureRate => "a percentage (a number such as `50`, or a string such as `\"0.5%\"`)",
        Key::Window => "a number of calls or a duration string",
        Key::Order => "a list of layer names",
        Key::Fallback | Key::Classify | Key::RetryIf | Key::Record | Key::Crate => "a path",
        Key::Idempotent | Key::Flatten => "`true` or `false`",
        Key::Cooldown
        | Key::Retry
        | Key::Timeout
        | Key::Deadline
        | Key::Rate
        | Key::Hedge
        | Key::Adaptive
        | Key::Throttle
        | Key::Name
        | Key::ByKey
        | Key::KeyIdle
        | Key::Scope
        | Key::Policy
        | Key::Config => "a string literal",
    };
    cx.error_spanned_by(
        value,
        format!(
            "`{option}` expects {what}, like `{option} = {}`",
            example(option)
        ),
    );
    None
}

fn int(cx: &Ctxt, option: Key, value: &Expr) -> Option<LitInt> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(l), ..
        }) => Some(l.clone()),
        _ => shape(cx, option, value),
    }
}

fn string(cx: &Ctxt, option: Key, value: &Expr) -> Option<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(l), ..
        }) => Some(l.clone()),
        _ => shape(cx, option, value),
    }
}

fn path(cx: &Ctxt, option: Key, value: &Expr) -> Option<Path> {
    match value {
        Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        _ => shape(cx, option, value),
    }
}

fn order(cx: &Ctxt, option: Key, value: &Expr) -> Option<OrderArg> {
    let Expr::Array(array) = value else {
        return shape(cx, option, value);
    };
    let mut items = Vec::new();
    let mut ok = true;
    let elems: &Punctuated<Expr, Token![,]> = &array.elems;
    for elem in elems {
        match elem {
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                items.push(p.path.get_ident().cloned().expect("checked"));
            }
            other => {
                ok = false;
                cx.error_spanned_by(
                    other,
                    format!(
                        "expected a layer name: one of {}",
                        breaker_core::layer::Layer::names_in_default_order()
                    ),
                );
            }
        }
    }
    ok.then(|| OrderArg {
        span: array.span(),
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: proc_macro2::TokenStream) -> (Option<Args>, Vec<String>) {
        let cx = Ctxt::new();
        let args = Args::parse(&cx, tokens);
        let mut errors: Vec<String> = match cx.check() {
            Ok(()) => vec![],
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        };
        let args = match args {
            Ok(a) => Some(a),
            Err(e) => {
                errors.push(e.to_string());
                None
            }
        };
        (args, errors)
    }

    #[test]
    fn reads_every_shape() {
        let (args, errors) = parse(quote! {
            threshold = 5, failure_rate = 50.5, window = "60s", min_calls = 10,
            cooldown = "30s", half_open_probes = 2, retry = "3x", timeout = "1s",
            deadline = "5s", order = [retry, breaker], concurrency = 4, fallback = a::b,
            classify = c, retry_if = d, idempotent, name = "n", crate = "::x",
            policy = "p", config = "c.toml", key = host, max_keys = 100, key_idle = "1m",
            flatten
        });
        assert_eq!(errors, Vec::<String>::new());
        let args = args.unwrap();
        assert_eq!(args.threshold.unwrap().value.base10_digits(), "5");
        assert!(matches!(args.window.unwrap().value, WindowArg::Time(_)));
        assert_eq!(args.order.unwrap().value.items.len(), 2);
        assert!(args.idempotent.unwrap().value.value);
        let key = args.key.unwrap().value;
        assert_eq!(quote::ToTokens::to_token_stream(&key).to_string(), "host");
    }

    #[test]
    fn value_errors_do_not_stop_parsing() {
        let (args, errors) = parse(quote! {
            threshold = "5", bogus = 1, cooldown = "1s", cooldown = "2s", timeout
        });
        assert!(args.is_some());
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].starts_with("`threshold` expects an integer"));
        assert!(errors[1].starts_with("unknown option `bogus`; expected one of `threshold`"));
        assert!(errors[2].contains("`cooldown` is given more than once"));
        assert!(errors[3].contains("`timeout` needs a value"));
    }

    /// A misspelled option is named, as config files do.
    #[test]
    fn unknown_options_suggest_the_closest() {
        let (_, errors) = parse(quote! { treshold = 5, coldown = "1s", zzzzzz = 1 });
        assert!(
            errors[0].ends_with("did you mean `threshold`?"),
            "{errors:?}"
        );
        assert!(
            errors[1].ends_with("did you mean `cooldown`?"),
            "{errors:?}"
        );
        assert!(!errors[2].contains("did you mean"), "{errors:?}");
    }

    /// The parser knows every option of the one list, by the name the list gives it.
    #[test]
    fn every_option_of_the_list_is_read() {
        for option in Key::ALL {
            let tokens: proc_macro2::TokenStream =
                format!("{option} = {}", option.example()).parse().unwrap();
            let peek = |s: ParseStream| {
                let found = peek_option(s);
                s.parse::<proc_macro2::TokenStream>()?;
                Ok(found)
            };
            assert_eq!(peek.parse2(tokens.clone()).unwrap(), Some(option));
            let (args, errors) = parse(tokens);
            assert!(args.is_some() && errors.is_empty(), "{option}: {errors:?}");
        }
    }

    #[test]
    fn syntax_error_stops() {
        let (args, errors) = parse(quote! { threshold 5 });
        assert!(args.is_none());
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn key_is_any_expression() {
        let (args, errors) = parse(quote! { key = self.base, flatten = false });
        assert_eq!(errors, Vec::<String>::new());
        let args = args.unwrap();
        let key = args.key.unwrap().value;
        assert_eq!(
            quote::ToTokens::to_token_stream(&key).to_string(),
            "self . base"
        );
        assert!(!args.flatten.unwrap().value.value);
    }
}
