//! The rate limit, hedging, adaptive limit and throttling grammars: see the grammar in the
//! [module docs](super).
//!
//! Values out of range are reported at the token that wrote them (`0/s` at `0`, `50..10` at
//! the range), and then the whole policy goes through its validator (`problems`), whose
//! errors point at the whole string.

use super::parser;
use crate::adaptive::{AdaptiveLimitPolicy, LimitAlgorithm};
use crate::field::{Field, FieldError};
use crate::hedge::{HedgeDelay, HedgePolicy, MAX_HEDGES};
use crate::policy::MAX_CONCURRENT;
use crate::ratelimit::{RateLimitPolicy, MAX_BURST};
use crate::syntax::{parse_duration, tick, DslError, Parser, Token};
use crate::throttle::{ThrottlePolicy, MAX_WINDOW, MIN_WINDOW};
use std::ops::Range;
use std::str::FromStr;
use std::time::Duration;

/// The keywords of these grammars.
pub(super) const KEYWORDS: [&str; 16] = [
    "burst",
    "wait",
    "per",
    "key",
    "after",
    "in",
    "aimd",
    "gradient2",
    "from",
    "backoff",
    "slow",
    "tolerance",
    "smoothing",
    "queue",
    "k",
    "over",
];

/// An error about a value at `span` of `src`.
fn value_error(src: &str, span: Range<usize>, message: impl Into<String>) -> DslError {
    DslError::new(src, span, message)
}

/// The next token, or the error naming what was expected there.
fn word<'a>(p: &mut Parser<'a>, what: &str, example: &str) -> Result<Token<'a>, DslError> {
    match p.peek().cloned() {
        Some(t) if !matches!(t.text, "(" | ")" | "," | ">") => {
            p.bump();
            Ok(t)
        }
        _ => Err(p.unexpected("", &[format!("{what} such as `{example}`")], &[])),
    }
}

/// A whole number within a word, at `span`.
fn int_in(src: &str, text: &str, span: Range<usize>, what: &str) -> Result<u32, DslError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(
            value_error(src, span, format!("{what} `{text}` is not a whole number"))
                .expected([format!("{what} such as `5`")]),
        );
    }
    text.parse().map_err(|_| {
        value_error(src, span, format!("number `{text}` is too large"))
            .expected([format!("at most {}", u32::MAX)])
    })
}

/// A duration within a word (no spaces: `1s`, `1m30s`), at `start` of `src`.
fn duration_in(src: &str, text: &str, start: usize) -> Result<Duration, DslError> {
    parse_duration(text).map_err(|e| {
        // The inner error's span is relative to `text`; its fragment is already right.
        let mut e = e.offset(src, start);
        if e.fragment.is_empty() {
            e.fragment = text.to_owned();
        }
        e
    })
}

// ---- rate ----

pub(crate) fn parse_rate(src: &str) -> Result<RateLimitPolicy, DslError> {
    let mut p = parser(src);
    p.record(Field::RateLimit, 0..src.len());
    let t = word(&mut p, "a rate", "100/s")?;
    let Some((count, per)) = t.text.split_once('/') else {
        return Err(value_error(
            src,
            t.span.clone(),
            format!("rate `{}` has no period", t.text),
        )
        .expected(["a rate such as `100/s` or `5/100ms`".to_owned()]));
    };
    let count_span = t.span.start..t.span.start + count.len();
    let rate = int_in(src, count, count_span.clone(), "permit count")?;
    if rate == 0 {
        return Err(value_error(src, count_span, "a rate of 0 admits no call")
            .expected(["at least 1 permit per period, such as `1/s`".to_owned()])
            .help("to stop every call, open the breaker instead"));
    }
    let per_start = count_span.end + 1;
    if per.is_empty() {
        let mut e = value_error(
            src,
            t.span.clone(),
            format!("rate `{}` has no period", t.text),
        )
        .expected(["a period right after the `/`, such as `s`, `1m` or `100ms`".to_owned()]);
        if let Some(next) = p.peek() {
            e = e.help(format!("write `{}{}`, without a space", t.text, next.text));
        }
        return Err(e);
    }
    // A bare unit is one of it: `s` is `1s`.
    let per_text = if per.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        per.to_owned()
    } else {
        format!("1{per}")
    };
    let per = duration_in(src, &per_text, per_start).map_err(|e| {
        if per_text.len() == per.len() {
            e
        } else {
            // The `1` was ours: point at the unit as written.
            value_error(src, per_start..t.span.end, e.message)
                .expected(["a period such as `s`, `1m` or `100ms`".to_owned()])
        }
    })?;
    if per.is_zero() {
        return Err(value_error(src, per_start..t.span.end, "a period of 0s")
            .expected(["a non-zero period such as `s` or `100ms`".to_owned()]));
    }
    let mut policy = RateLimitPolicy::new(rate, per);
    let mut seen = [false; 3];
    loop {
        if p.peek_is("burst") && !seen[0] {
            seen[0] = true;
            p.bump();
            let (burst, span) = p.int("a burst")?;
            if !(1..=MAX_BURST).contains(&burst) {
                return Err(
                    value_error(src, span, format!("burst {burst} is out of range")).expected([
                        format!("a burst in 1..={MAX_BURST} (1 is perfectly smooth)"),
                    ]),
                );
            }
            policy.burst = burst;
        } else if p.peek_is("wait") && !seen[1] {
            seen[1] = true;
            p.bump();
            policy.max_wait = p.duration("a maximum wait")?.0;
        } else if p.peek_is("per") && !seen[2] {
            seen[2] = true;
            p.bump();
            p.expect("key")?;
            policy.per_key = true;
        } else {
            let clauses = [("burst", "burst"), ("wait", "wait"), ("per key", "per")];
            let mut expected: Vec<String> = clauses
                .iter()
                .zip(seen)
                .filter(|(_, seen)| !seen)
                .map(|((text, _), _)| tick(text))
                .collect();
            expected.push("end of input".to_owned());
            let Some(t) = p.peek().cloned() else {
                break;
            };
            if let Some(((clause, _), _)) = clauses
                .iter()
                .zip(seen)
                .find(|((_, word), seen)| *seen && t.text == *word)
            {
                // The whole clause: `per key` is two words.
                let end = match p.peek_at(1) {
                    Some(next) if *clause == "per key" && next.text == "key" => next.span.end,
                    _ => t.span.end,
                };
                return Err(value_error(
                    src,
                    t.span.start..end,
                    format!("`{clause}` is given twice"),
                )
                .expected(expected));
            }
            let squashed: String = t
                .text
                .chars()
                .filter(|c| c.is_ascii_alphabetic())
                .collect::<String>()
                .to_ascii_lowercase();
            if squashed == "perkey" || t.text.eq_ignore_ascii_case("per") {
                return Err(
                    value_error(src, t.span, format!("unknown clause `{}`", t.text))
                        .expected(expected)
                        .help("did you mean `per key`?"),
                );
            }
            return Err(p.unexpected("clause", &expected, &["burst", "wait", "per"]));
        }
    }
    if !seen[0] && rate > MAX_BURST {
        return Err(value_error(
            src,
            count_span,
            format!("without `burst`, the burst is the count `{rate}`"),
        )
        .expected([format!(
            "a `burst` of at most {MAX_BURST}, such as `{} burst {MAX_BURST}`",
            t.text
        )]));
    }
    p.validated(policy, check_rate)
}

fn check_rate(policy: &RateLimitPolicy, errors: &mut Vec<FieldError>) {
    for m in policy.problems() {
        errors.push(FieldError::new(Field::RateLimit, m));
    }
}

impl FromStr for RateLimitPolicy {
    type Err = DslError;

    /// Parses and validates
    /// `rate = int "/" period [ "burst" int ] [ "wait" duration ] [ "per" "key" ]`:
    /// `100/s`, `5/100ms burst 1`, `1000/1m burst 50 wait 200ms`, `10/s per key`. Without
    /// `burst`, the burst is the rate (a period's worth at once); without `wait`, no wait;
    /// without `per key`, one limit for every call whatever its key.
    ///
    /// # Errors
    /// A [`DslError`] at the offending token (a rate of 0 at the count, a burst out of range
    /// at the burst).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_rate(s)
    }
}

// ---- hedge ----

pub(crate) fn parse_hedge(src: &str) -> Result<HedgePolicy, DslError> {
    let mut p = parser(src);
    p.record(Field::Hedge, 0..src.len());
    let mut max_hedges = 1;
    if let Some(t) = p.peek().cloned() {
        if let Some(n) = t.text.strip_suffix('x') {
            if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() {
                p.bump();
                let n = int_in(src, n, t.span.clone(), "hedge count")?;
                if !(1..=MAX_HEDGES).contains(&n) {
                    return Err(
                        value_error(src, t.span.clone(), format!("{n} hedges")).expected([
                            format!("1x to {MAX_HEDGES}x: the attempts beyond the first"),
                        ]),
                    );
                }
                max_hedges = n;
            }
        }
    }
    if !p.peek_is("after") {
        let mut expected = vec![tick("after")];
        if max_hedges == 1 && p.here() == 0 {
            expected.insert(0, "a hedge count such as `2x`".to_owned());
        }
        return Err(p.unexpected("", &expected, &["after"]));
    }
    p.bump();
    let delay = match p.peek().cloned() {
        Some(t) if t.text.starts_with('p') && t.text.len() > 1 => {
            p.bump();
            let text = &t.text[1..];
            let percentile: f64 = text.parse().map_err(|_| {
                value_error(src, t.span.clone(), format!("percentile `{}`", t.text))
                    .expected(["a percentile such as `p95` or `p99.9`".to_owned()])
            })?;
            if !(50.0..=99.9).contains(&percentile) {
                return Err(value_error(
                    src,
                    t.span.clone(),
                    format!("percentile {percentile} is out of range"),
                )
                .expected(["a percentile in `p50`..=`p99.9`".to_owned()]));
            }
            p.expect("in")?;
            let r = word(&mut p, "a range of delays", "10ms..200ms")?;
            let Some((lo, hi)) = r.text.split_once("..") else {
                return Err(
                    value_error(src, r.span.clone(), format!("range `{}`", r.text))
                        .expected(["a range of delays such as `10ms..200ms`".to_owned()]),
                );
            };
            let min = duration_in(src, lo, r.span.start)?;
            let max = duration_in(src, hi, r.span.start + lo.len() + 2)?;
            if min.is_zero() {
                return Err(value_error(src, r.span.clone(), "a shortest delay of 0s")
                    .expected(["a non-zero shortest delay such as `10ms..200ms`".to_owned()]));
            }
            if max < min {
                return Err(value_error(
                    src,
                    r.span.clone(),
                    format!("the longest delay ({hi}) is shorter than the shortest ({lo})"),
                )
                .expected([format!(
                    "a range from the shortest to the longest: `{hi}..{lo}`"
                )]));
            }
            HedgeDelay::Percentile {
                percentile,
                min,
                max,
            }
        }
        _ => {
            let (d, span) = p.duration("a delay (or a percentile such as `p95`)")?;
            if d.is_zero() {
                return Err(value_error(
                    src,
                    span,
                    "a hedge delay of 0s sends every call twice at once",
                )
                .expected(["a non-zero delay such as `50ms`".to_owned()]));
            }
            HedgeDelay::Fixed(d)
        }
    };
    p.finish(&["end of input".to_owned()])?;
    p.validated(HedgePolicy { delay, max_hedges }, |h, errors| {
        for m in h.problems() {
            errors.push(FieldError::new(Field::Hedge, m));
        }
    })
}

impl FromStr for HedgePolicy {
    type Err = DslError;

    /// Parses and validates `hedge = [ int "x" ] "after" ( duration | percentile "in" range )`:
    /// `after 50ms` (one hedge), `2x after 50ms`, `1x after p95 in 10ms..200ms`.
    ///
    /// # Errors
    /// A [`DslError`] at the offending token (`0x`, a zero delay, a percentile out of
    /// `p50..=p99.9`, a range whose end is before its start).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_hedge(s)
    }
}

// ---- adaptive ----

pub(crate) fn parse_adaptive(src: &str) -> Result<AdaptiveLimitPolicy, DslError> {
    let mut p = parser(src);
    p.record(Field::Adaptive, 0..src.len());
    let algorithms = ["aimd", "gradient2"];
    let mut algorithm = match p.peek().map(|t| t.text) {
        Some("aimd") => LimitAlgorithm::AIMD,
        Some("gradient2") => LimitAlgorithm::GRADIENT2,
        _ => {
            let expected: Vec<String> = algorithms.iter().map(|a| tick(a)).collect();
            return Err(p.unexpected("algorithm", &expected, &algorithms));
        }
    };
    p.bump();
    let r = word(&mut p, "a floor and a ceiling", "5..200")?;
    let Some((lo, hi)) = r.text.split_once("..") else {
        return Err(
            value_error(src, r.span.clone(), format!("range `{}`", r.text))
                .expected(["the floor and the ceiling of the limit, such as `5..200`".to_owned()]),
        );
    };
    let min = int_in(src, lo, r.span.start..r.span.start + lo.len(), "floor")?;
    let max = int_in(src, hi, r.span.start + lo.len() + 2..r.span.end, "ceiling")?;
    if min == 0 {
        return Err(
            value_error(src, r.span.clone(), "a floor of 0 would admit no call")
                .expected(["a floor of at least 1, such as `1..200`".to_owned()]),
        );
    }
    if max > MAX_CONCURRENT {
        return Err(
            value_error(src, r.span.clone(), format!("a ceiling of {max}"))
                .expected([format!("a ceiling of at most {MAX_CONCURRENT}")]),
        );
    }
    if min > max {
        return Err(value_error(
            src,
            r.span.clone(),
            format!("the floor ({min}) is above the ceiling ({max})"),
        )
        .expected([format!("the floor first: `{max}..{min}`")]));
    }
    let mut policy = AdaptiveLimitPolicy::new(algorithm, min, max);
    let mut seen = Vec::new();
    loop {
        let options: &[&str] = match algorithm {
            LimitAlgorithm::Aimd { .. } => &["from", "backoff", "slow"],
            LimitAlgorithm::Gradient2 { .. } => {
                &["from", "tolerance", "smoothing", "window", "queue"]
            }
        };
        let next = p.peek().cloned().filter(|t| options.contains(&t.text));
        let Some(option) = next.as_ref().map(|t| t.text).filter(|o| !seen.contains(o)) else {
            let mut expected: Vec<String> = options
                .iter()
                .filter(|o| !seen.contains(*o))
                .map(|o| tick(o))
                .collect();
            expected.push("end of input".to_owned());
            if let Some(t) = next {
                return Err(
                    value_error(src, t.span, format!("`{}` is given twice", t.text))
                        .expected(expected),
                );
            }
            if p.peek().is_some() {
                return Err(p.unexpected("parameter", &expected, options));
            }
            break;
        };
        seen.push(option);
        p.bump();
        match (option, &mut algorithm) {
            ("from", _) => {
                let (n, span) = p.int("an initial limit")?;
                if !(min..=max).contains(&n) {
                    return Err(value_error(src, span, format!("initial limit {n}"))
                        .expected([format!("an initial limit within {min}..={max}")]));
                }
                policy.initial_limit = n;
            }
            ("backoff", LimitAlgorithm::Aimd { backoff_ratio, .. }) => {
                *backoff_ratio = p.number("a backoff ratio", "0.5..1.0", "0.9")?.0;
            }
            ("slow", LimitAlgorithm::Aimd { slow_call, .. }) => {
                *slow_call = p.duration("a slow-call duration")?.0;
            }
            ("tolerance", LimitAlgorithm::Gradient2 { tolerance, .. }) => {
                *tolerance = p.number("a tolerance", "1.0..=10.0", "1.5")?.0;
            }
            ("smoothing", LimitAlgorithm::Gradient2 { smoothing, .. }) => {
                *smoothing = p.number("a smoothing factor", "0.0 < s <= 1.0", "0.2")?.0;
            }
            ("window", LimitAlgorithm::Gradient2 { long_window, .. }) => {
                *long_window = p.int("a number of samples")?.0;
            }
            ("queue", LimitAlgorithm::Gradient2 { queue_size, .. }) => {
                *queue_size = p.int("a queue size")?.0;
            }
            _ => unreachable!("options are the algorithm's"),
        }
    }
    policy.algorithm = algorithm;
    p.validated(policy, |a, errors| {
        for m in a.problems() {
            errors.push(FieldError::new(Field::Adaptive, m));
        }
    })
}

impl FromStr for AdaptiveLimitPolicy {
    type Err = DslError;

    /// Parses and validates `adaptive = algorithm floor ".." ceiling [ "from" int ]
    /// { parameter }`: `aimd 5..200`, `gradient2 10..500 from 50`, `aimd 1..100 backoff 0.8
    /// slow 2s`, `gradient2 5..200 tolerance 2 smoothing 0.1 window 300 queue 2`. Parameters
    /// left out take Netflix's defaults ([`LimitAlgorithm::AIMD`],
    /// [`LimitAlgorithm::GRADIENT2`]); without `from` the limit starts at 20 within the range.
    ///
    /// # Errors
    /// A [`DslError`] at the offending token (a floor above the ceiling at the range).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_adaptive(s)
    }
}

// ---- throttle ----

pub(crate) fn parse_throttle(src: &str) -> Result<ThrottlePolicy, DslError> {
    let mut p = parser(src);
    p.record(Field::Throttle, 0..src.len());
    p.expect("k")?;
    let (k, span) = p.number("the multiplier K", "1.0..=10.0", "2")?;
    if !(1.0..=10.0).contains(&k) {
        return Err(
            value_error(src, span, format!("k {k} is out of range")).expected([
                "a K in 1.0..=10.0 (below 1 the client would reject calls a healthy dependency \
             accepts)"
                    .to_owned(),
            ]),
        );
    }
    let mut policy = ThrottlePolicy {
        k,
        ..ThrottlePolicy::default()
    };
    if p.peek_is("over") {
        p.bump();
        let (window, span) = p.duration("a window")?;
        if !(MIN_WINDOW..=MAX_WINDOW).contains(&window) {
            return Err(value_error(
                src,
                span,
                format!("a window of {}", crate::syntax::compact(window)),
            )
            .expected(["a window in 1s..=1h".to_owned()]));
        }
        policy.window = window;
    }
    p.finish(&[tick("over"), "end of input".to_owned()])?;
    p.validated(policy, |t, errors| {
        for m in t.problems() {
            errors.push(FieldError::new(Field::Throttle, m));
        }
    })
}

impl FromStr for ThrottlePolicy {
    type Err = DslError;

    /// Parses and validates `throttle = "k" number [ "over" duration ]`: `k 2`,
    /// `k 1.5 over 1m`. Without `over`, the window is 2 minutes.
    ///
    /// # Errors
    /// A [`DslError`] at the offending token (a K out of `1.0..=10.0`, a window out of
    /// `1s..=1h`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_throttle(s)
    }
}

#[cfg(test)]
mod tests;
