//! `retry`, `backoff` and `jitter`: see the grammar in the [module docs](super).

use super::parser;
use crate::policy::defaults::{self, BACKOFF_BASE, BACKOFF_FACTOR};
use crate::policy::{check_retry, Field};
use crate::retry::{Backoff, Jitter, RetryPolicy};
use crate::syntax::{fmt_duration, shown_span, tick, DslError, Parser};
use std::fmt;
use std::str::FromStr;

pub(super) const BACKOFFS: [&str; 4] = ["fixed", "linear", "exp", "exponential"];
pub(super) const JITTERS: [&str; 6] = [
    "jitter",
    "full-jitter",
    "equal-jitter",
    "decorrelated-jitter",
    "additive-jitter",
    "no-jitter",
];

fn ticks(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| tick(w)).collect()
}

fn end() -> String {
    "end of input".to_owned()
}

/// Whether `word` starts a jitter.
pub(crate) fn is_jitter_word(word: &str) -> bool {
    JITTERS.contains(&word)
}

/// `jitter`, the caller having peeked a jitter word.
fn jitter(p: &mut Parser<'_>) -> Result<Jitter, DslError> {
    let t = p.bump().expect("caller peeked a jitter word");
    let j = match t.text {
        "jitter" | "full-jitter" => Jitter::Full,
        "equal-jitter" => Jitter::Equal,
        "decorrelated-jitter" => Jitter::Decorrelated,
        "additive-jitter" => Jitter::Additive {
            spread: p.duration("a spread")?.0,
        },
        "no-jitter" => Jitter::None,
        _ => unreachable!("caller checked the word"),
    };
    p.record(Field::Jitter, t.span.start..p.last_end());
    Ok(j)
}

fn backoff(p: &mut Parser<'_>) -> Result<Backoff, DslError> {
    let kw = p.bump().expect("caller peeked a backoff keyword");
    let start = kw.span.start;
    let b = match kw.text {
        "fixed" => {
            let (delay, _) = p.duration("a delay")?;
            Backoff::Fixed { delay }
        }
        "linear" | "exp" | "exponential" => {
            let linear = kw.text == "linear";
            let mut base = BACKOFF_BASE;
            let mut step = None;
            let mut factor = BACKOFF_FACTOR;
            let mut max = None;
            if p.peek_is("(") {
                p.bump();
                base = p.duration("a base delay")?.0;
                let mut keys: Vec<&str> = if linear {
                    vec!["step", "max"]
                } else {
                    vec!["factor", "max"]
                };
                while p.peek_is(",") {
                    p.bump();
                    let expected = ticks(&keys);
                    let Some(key) = p.peek().filter(|t| keys.contains(&t.text)).cloned() else {
                        return Err(p.unexpected(
                            &format!("{} argument", kw.text),
                            &expected,
                            &keys,
                        ));
                    };
                    p.bump();
                    // Arguments come in the documented order, each at most once.
                    let at = keys.iter().position(|k| *k == key.text).expect("filtered");
                    keys.drain(..=at);
                    match key.text {
                        "step" => step = Some(p.duration("a step")?.0),
                        "factor" => factor = p.number("a factor", "1.0..=100.0", "2")?.0,
                        _ => max = Some(p.duration("a maximum delay")?.0),
                    }
                }
                if !p.peek_is(")") {
                    let mut expected = Vec::new();
                    if !keys.is_empty() {
                        expected.push(tick(","));
                    }
                    expected.push(tick(")"));
                    return Err(p.unexpected("", &expected, &[]));
                }
                p.bump();
            }
            let max = max.unwrap_or_else(|| defaults::backoff_max(base));
            if linear {
                Backoff::Linear {
                    base,
                    step: step.unwrap_or(base),
                    max,
                }
            } else {
                Backoff::Exponential { base, factor, max }
            }
        }
        _ => unreachable!("caller checked the keyword"),
    };
    p.record(Field::Backoff, start..p.last_end());
    Ok(b)
}

fn retry(p: &mut Parser<'_>) -> Result<RetryPolicy, DslError> {
    let attempts_expected = [tick("none"), "an attempt count such as `3x`".to_owned()];
    let Some(first) = p.peek().cloned() else {
        return Err(p.unexpected("", &attempts_expected, &[]));
    };
    if first.text == "none" {
        p.bump();
        // `none` writes one attempt; a backoff and a jitter for one attempt mean nothing, so
        // they stay unwritten (a policy over a `none` default that sets the attempts gets the
        // default backoff, not a zero delay).
        p.record(Field::MaxAttempts, first.span.clone());
        p.finish(&[end()])?;
        return Ok(RetryPolicy::NONE);
    }
    let max_attempts = match first.text.strip_suffix('x') {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            n.parse::<u32>().map_err(|_| {
                DslError::new(
                    p.src,
                    first.span.clone(),
                    format!("attempt count `{}` is too large", first.text),
                )
                .expected([format!("at most `{}x`", crate::policy::MAX_ATTEMPTS)])
            })?
        }
        _ if !first.text.is_empty() && first.text.bytes().all(|b| b.is_ascii_digit()) => {
            let err = match p.peek_at(1).filter(|t| t.text.starts_with('x')) {
                Some(x) if x.text == "x" => DslError::new(
                    p.src,
                    first.span.start..x.span.end,
                    format!(
                        "space between count and `x` in `{}`",
                        &p.src[first.span.start..x.span.end]
                    ),
                ),
                _ => DslError::new(
                    p.src,
                    first.span.clone(),
                    format!("attempt count `{}` has no `x`", first.text),
                ),
            };
            return Err(err.expected([format!("`{}x`", first.text)]));
        }
        _ => return Err(p.unexpected("", &attempts_expected, &["none"])),
    };
    p.bump();
    p.record(Field::MaxAttempts, first.span.clone());
    let mut policy = RetryPolicy {
        max_attempts,
        ..defaults::RETRY
    };
    let mut expected: Vec<&str> = BACKOFFS.iter().chain(JITTERS.iter()).copied().collect();
    if p.peek().is_some_and(|t| BACKOFFS.contains(&t.text)) {
        policy.backoff = backoff(p)?;
        expected = JITTERS.to_vec();
        if matches!(
            policy.backoff,
            Backoff::Exponential { .. } | Backoff::Linear { .. }
        ) && !p.src[..p.last_end()].ends_with(')')
        {
            expected.insert(0, "(");
        }
    }
    if let Some(t) = p.peek().cloned() {
        if is_jitter_word(t.text) {
            policy.jitter = jitter(p)?;
            if let Some(again) = p.peek().filter(|n| is_jitter_word(n.text)) {
                return Err(DslError::new(
                    p.src,
                    again.span.clone(),
                    format!("duplicate jitter `{}`", again.text),
                )
                .expected([end()])
                .help(format!(
                    "jitter is already set by `{}` at {}",
                    t.text,
                    shown_span(p.src, &t.span)
                )));
            }
            expected.clear();
        } else {
            let what = if t.text.contains("jit") || expected.len() <= JITTERS.len() + 1 {
                "jitter"
            } else {
                "backoff"
            };
            let mut list = ticks(
                &expected
                    .iter()
                    .filter(|w| **w != "no-jitter")
                    .copied()
                    .collect::<Vec<_>>(),
            );
            list.push(end());
            return Err(p.unexpected(what, &list, &expected));
        }
    }
    p.finish(&[end()])?;
    Ok(policy)
}

/// Parses a retry policy and validates it (see the [module docs](super) for the grammar).
pub(crate) fn parse_retry(src: &str) -> Result<RetryPolicy, DslError> {
    let mut p = parser(src);
    let policy = retry(&mut p)?;
    p.validated(policy, check_retry)
}

/// Parses a retry policy written in a config file: the policy (defaults for what it does not
/// write) and the fields it writes (see `Parser::written_validated`).
pub(crate) fn parse_retry_written(src: &str) -> Result<(RetryPolicy, Vec<Field>), DslError> {
    let mut p = parser(src);
    let policy = retry(&mut p)?;
    p.written_validated(policy, check_retry)
}

/// Parses a backoff alone: `fixed 200ms`, `exp(100ms, max 2s)`.
pub(crate) fn parse_backoff(src: &str) -> Result<Backoff, DslError> {
    let mut p = parser(src);
    if !p.peek().is_some_and(|t| BACKOFFS.contains(&t.text)) {
        return Err(p.unexpected("backoff", &ticks(&BACKOFFS), &BACKOFFS));
    }
    let b = backoff(&mut p)?;
    p.finish(&[end()])?;
    p.validated(b, |&backoff, errors| {
        let policy = RetryPolicy {
            backoff,
            ..RetryPolicy::NONE
        };
        check_retry(&policy, errors)
    })
}

/// Parses a jitter alone: `jitter`, `full-jitter`, `equal-jitter`, `decorrelated-jitter`,
/// `additive-jitter 100ms`, `no-jitter`.
pub(crate) fn parse_jitter(src: &str) -> Result<Jitter, DslError> {
    let mut p = parser(src);
    if !p.peek().is_some_and(|t| is_jitter_word(t.text)) {
        return Err(p.unexpected("jitter", &ticks(&JITTERS), &JITTERS));
    }
    let j = jitter(&mut p)?;
    p.finish(&[end()])?;
    Ok(j)
}

impl fmt::Display for Backoff {
    /// The canonical DSL form with every argument written out: `fixed 200ms`,
    /// `linear(100ms, step 50ms, max 10s)`, `exp(100ms, factor 2, max 10s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Backoff::Fixed { delay } => write!(f, "fixed {}", fmt_duration(delay)),
            Backoff::Linear { base, step, max } => write!(
                f,
                "linear({}, step {}, max {})",
                fmt_duration(base),
                fmt_duration(step),
                fmt_duration(max)
            ),
            Backoff::Exponential { base, factor, max } => write!(
                f,
                "exp({}, factor {factor}, max {})",
                fmt_duration(base),
                fmt_duration(max)
            ),
        }
    }
}

impl fmt::Display for Jitter {
    /// `no-jitter`, `full-jitter`, `equal-jitter`, `decorrelated-jitter` or
    /// `additive-jitter {spread}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Jitter::None => "no-jitter",
            Jitter::Full => "full-jitter",
            Jitter::Equal => "equal-jitter",
            Jitter::Decorrelated => "decorrelated-jitter",
            Jitter::Additive { spread } => {
                return write!(f, "additive-jitter {}", fmt_duration(*spread));
            }
        })
    }
}

impl fmt::Display for RetryPolicy {
    /// `none` for [`RetryPolicy::NONE`], else `{n}x {backoff}` followed by the jitter unless it
    /// is [`Jitter::None`]: `3x exp(100ms, factor 2, max 10s) full-jitter`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == RetryPolicy::NONE {
            return f.write_str("none");
        }
        write!(f, "{}x {}", self.max_attempts, self.backoff)?;
        if self.jitter != Jitter::None {
            write!(f, " {}", self.jitter)?;
        }
        Ok(())
    }
}

impl FromStr for RetryPolicy {
    type Err = DslError;

    /// Parses and validates a retry policy; see the grammar in [`crate::dsl`].
    ///
    /// # Errors
    /// A [`DslError`] at the first token that does not follow the grammar, or at the token
    /// that set an invalid value (`0x`, `exp(100ms, factor 500)`).
    ///
    /// # Examples
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::retry::{Backoff, Jitter, RetryPolicy};
    /// use std::time::Duration;
    /// let p: RetryPolicy = "5x exp(100ms, max 2s) full-jitter".parse()?;
    /// assert_eq!(p.max_attempts, 5);
    /// assert_eq!(p.jitter, Jitter::Full);
    /// assert_eq!(
    ///     p.backoff,
    ///     Backoff::Exponential {
    ///         base: Duration::from_millis(100),
    ///         factor: 2.0,
    ///         max: Duration::from_secs(2)
    ///     }
    /// );
    /// assert_eq!(p.to_string(), "5x exp(100ms, factor 2, max 2s) full-jitter");
    /// # Ok::<(), breaker::dsl::DslError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_retry(s)
    }
}

impl FromStr for Backoff {
    type Err = DslError;

    /// Parses and validates a backoff alone (`fixed 200ms`, `exp(100ms, max 2s)`).
    ///
    /// # Errors
    /// A [`DslError`] naming the offending token.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_backoff(s)
    }
}

impl FromStr for Jitter {
    type Err = DslError;

    /// Parses one jitter word (`jitter` is short for `full-jitter`).
    ///
    /// # Errors
    /// A [`DslError`] naming the offending token.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_jitter(s)
    }
}
