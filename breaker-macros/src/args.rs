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

/// Declares the options once: their `custom_keyword!`s (module [`kw`]), the [`Key`] enum and its
/// `peek`, and [`OPTION_NAMES`], so the list of valid options cannot drift from the parser.
macro_rules! options {
    ($($kw:ident => $Var:ident,)*) => {
        /// The option keywords (`crate` is Rust's own keyword).
        pub mod kw {
            $(syn::custom_keyword!($kw);)*
        }

        /// One option of the attribute.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(clippy::enum_variant_names)]
        pub enum Key {
            $(
                #[allow(missing_docs)]
                $Var,
            )*
            /// `crate`.
            Crate,
        }

        impl Key {
            /// The option that `input` starts with, if it is one.
            fn peek(input: ParseStream) -> Option<Key> {
                $(if input.peek(kw::$kw) { return Some(Key::$Var); })*
                if input.peek(Token![crate]) {
                    return Some(Key::Crate);
                }
                None
            }
        }

        /// Every valid option name, in the order the docs list them.
        pub const OPTION_NAMES: &[&str] = &[$(stringify!($kw),)* "crate"];
    };
}

options! {
    threshold => Threshold,
    failure_rate => FailureRate,
    window => Window,
    min_calls => MinCalls,
    cooldown => Cooldown,
    half_open_probes => HalfOpenProbes,
    retry => Retry,
    retry_if => RetryIf,
    idempotent => Idempotent,
    timeout => Timeout,
    deadline => Deadline,
    concurrency => Concurrency,
    order => Order,
    fallback => Fallback,
    classify => Classify,
    record => Record,
    name => Name,
    key => ByKey,
    policy => Policy,
    config => Config,
}

/// An option's value together with the span of its key, for errors about the option as a whole
/// ("`config` needs `policy`"). Errors about the value itself are spanned at the value.
#[derive(Clone, Debug)]
pub struct Given<T> {
    /// The span of the option's name.
    pub key: Span,
    /// The value as written.
    pub value: T,
}

/// A number literal: `5` or `50.5`.
#[derive(Clone, Debug)]
pub enum Number {
    /// An integer literal.
    Int(LitInt),
    /// A float literal.
    Float(syn::LitFloat),
}

impl Number {
    /// The literal's span.
    pub fn span(&self) -> Span {
        match self {
            Number::Int(l) => l.span(),
            Number::Float(l) => l.span(),
        }
    }
}

/// The `window` option: a number of calls or a duration string.
#[derive(Clone, Debug)]
pub enum WindowArg {
    /// `window = 100`: the last 100 calls.
    Calls(LitInt),
    /// `window = "60s"`: the calls of the last 60 seconds.
    Time(LitStr),
}

/// `order = [retry, breaker, timeout]`: layer names, outermost first.
#[derive(Clone, Debug)]
pub struct OrderArg {
    /// The span of the whole `[..]`.
    pub span: Span,
    /// The names as written, each with its own span.
    pub items: Vec<Ident>,
}

/// The parsed arguments, each option at most once. See the [module docs](self).
#[derive(Default, Debug)]
pub struct Args {
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
    /// `fallback = path`.
    pub fallback: Option<Given<Path>>,
    /// `classify = path`.
    pub classify: Option<Given<Path>>,
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
    /// `key = argument`.
    pub key: Option<Given<Ident>>,
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
    /// Parses the attribute's arguments, recording value errors in `cx`.
    ///
    /// # Errors
    /// Only on a syntax error, after which nothing more can be read.
    pub fn parse(cx: &Ctxt, tokens: proc_macro2::TokenStream) -> syn::Result<Args> {
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
        let option = Key::peek(input);
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
        // A flag written without a value; every option but `idempotent` needs one.
        let Some(value) = value else {
            if option == Key::Idempotent {
                let lit = LitBool::new(true, key.span());
                set_once(cx, &mut self.idempotent, &key, Some(lit));
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
            Key::Order => set_once(cx, &mut self.order, &key, order(cx, option, v)),
            Key::Fallback => set_once(cx, &mut self.fallback, &key, path(cx, option, v)),
            Key::Classify => set_once(cx, &mut self.classify, &key, path(cx, option, v)),
            Key::Record => set_once(cx, &mut self.record, &key, path(cx, option, v)),
            Key::Name => set_once(cx, &mut self.name, &key, string(cx, option, v)),
            Key::ByKey => {
                let ident = match v {
                    Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
                    _ => None,
                };
                if ident.is_none() {
                    cx.error_spanned_by(
                        v,
                        "`key` must name one argument of the function, like `key = host`",
                    );
                }
                set_once(cx, &mut self.key, &key, ident)
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
    let list = OPTION_NAMES
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    cx.error_at(
        key.span(),
        format!("unknown option `{key}`; expected one of {list}"),
    );
}

/// A short example value for option `name`, used in "expected .." messages.
fn example(option: Key) -> &'static str {
    match OPTION_NAMES[option as usize] {
        "threshold" => "5",
        "failure_rate" => "50",
        "window" => "100",
        "min_calls" => "20",
        "cooldown" => "\"30s\"",
        "half_open_probes" => "1",
        "retry" => "\"3x exp jitter\"",
        "timeout" => "\"2s\"",
        "deadline" => "\"10s\"",
        "order" => "[retry, breaker, timeout]",
        "concurrency" => "10",
        "fallback" => "path::to::fallback",
        "classify" => "path::to::classify",
        "record" => "path::to::recorder",
        "retry_if" => "path::to::is_transient",
        "idempotent" => "true",
        "name" => "\"inventory\"",
        "crate" => "::breaker",
        "policy" => "\"inventory\"",
        "config" => "\"breaker.toml\"",
        "key" => "host",
        _ => "..",
    }
}

/// Records "`key` expects X" at the value and returns `None`.
fn shape<T>(cx: &Ctxt, option: Key, value: &Expr) -> Option<T> {
    let name = OPTION_NAMES[option as usize];
    let what = match name {
        "threshold" | "min_calls" | "half_open_probes" | "concurrency" => "an integer",
        "failure_rate" => "a percentage (an integer or float literal)",
        "window" => "a number of calls or a duration string",
        "order" => "a list of layer names",
        "fallback" | "classify" | "retry_if" | "record" | "crate" => "a path",
        "idempotent" => "`true` or `false`",
        _ => "a string literal",
    };
    cx.error_spanned_by(
        value,
        format!(
            "`{name}` expects {what}, like `{name} = {}`",
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
                    "expected a layer name: one of `bulkhead`, `retry`, `breaker`, `timeout`",
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
            policy = "p", config = "c.toml", key = host
        });
        assert_eq!(errors, Vec::<String>::new());
        let args = args.unwrap();
        assert_eq!(args.threshold.unwrap().value.base10_digits(), "5");
        assert!(matches!(args.window.unwrap().value, WindowArg::Time(_)));
        assert_eq!(args.order.unwrap().value.items.len(), 2);
        assert!(args.idempotent.unwrap().value.value);
        assert_eq!(args.key.unwrap().value, "host");
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

    #[test]
    fn syntax_error_stops() {
        let (args, errors) = parse(quote! { threshold 5 });
        assert!(args.is_none());
        assert_eq!(errors.len(), 1);
    }
}
