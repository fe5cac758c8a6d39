//! The breaker DSL: trip rules, window, cooldown and probes. See the grammar in the
//! [module docs](super).

use super::parser;
use crate::breaker::{BreakerPolicy, NeutralProbe, SlidingWindow, SlowCall};
use crate::policy::defaults::{self, default_min_calls};
use crate::policy::Field;
use crate::syntax::{fmt_duration, shown_span, tick, DslError, Parser};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

pub(super) const KEYWORDS: [&str; 7] = [
    "consecutive",
    "slow",
    "open",
    "probes",
    "close",
    "probe-wait",
    "neutral-probe",
];

fn clause_expected() -> Vec<String> {
    vec![
        "a trip rule such as `5 consecutive`, `50% of 100 calls` or `slow 2s 80%`".to_owned(),
        tick("open"),
        tick("probes"),
        tick("close"),
        tick("probe-wait"),
        tick("neutral-probe"),
    ]
}

/// `window-size = int , "calls" | duration , [ "in" , int , "buckets" ] ;`
fn window_size(p: &mut Parser<'_>) -> Result<SlidingWindow, DslError> {
    if p.at_duration_part() {
        let (length, _) = p.duration("a window length")?;
        let mut buckets = SlidingWindow::DEFAULT_BUCKETS;
        if p.peek_is("in") {
            p.bump();
            buckets = p.int("a bucket count")?.0;
            p.expect("buckets")?;
        }
        Ok(SlidingWindow::Time { length, buckets })
    } else {
        let (n, _) = p.int("a window size")?;
        if !p.peek_is("calls") {
            return Err(p.unexpected("", &[tick("calls")], &["calls"]));
        }
        p.bump();
        Ok(SlidingWindow::Count(n))
    }
}

/// A window with its minimum, as written after a rate rule.
#[derive(Clone)]
struct WindowSpec {
    window: SlidingWindow,
    min_calls: u32,
    span: Range<usize>,
}

/// `window = ( "of" | "over" ) , window-size , [ "min" , int ] ;`
fn window(p: &mut Parser<'_>) -> Result<Option<WindowSpec>, DslError> {
    if !(p.peek_is("of") || p.peek_is("over")) {
        return Ok(None);
    }
    let start = p.bump().expect("peeked").span.start;
    let window = window_size(p)?;
    let span = start..p.last_end();
    p.record(Field::Window, span.clone());
    let mut min_calls = default_min_calls(window);
    if p.peek_is("min") {
        let min_start = p.bump().expect("peeked").span.start;
        min_calls = p.int("a minimum number of calls")?.0;
        p.record(Field::MinCalls, min_start..p.last_end());
    }
    Ok(Some(WindowSpec {
        window,
        min_calls,
        span,
    }))
}

struct Seen(Vec<(&'static str, Range<usize>)>);

impl Seen {
    /// Set-once: a clause may appear at most once; the second is the error.
    fn once(
        &mut self,
        src: &str,
        clause: &'static str,
        span: Range<usize>,
    ) -> Result<(), DslError> {
        if let Some((_, first)) = self.0.iter().find(|(c, _)| *c == clause) {
            return Err(
                DslError::new(src, span, format!("duplicate `{clause}` clause")).help(format!(
                    "`{clause}` is already set at {}",
                    shown_span(src, first)
                )),
            );
        }
        self.0.push((clause, span));
        Ok(())
    }
}

fn breaker(p: &mut Parser<'_>) -> Result<BreakerPolicy, DslError> {
    let mut policy = BreakerPolicy {
        consecutive_failures: None,
        ..BreakerPolicy::default()
    };
    let mut seen = Seen(Vec::new());
    let mut shared_window: Option<WindowSpec> = None;
    let mut cooldown_max = None;
    loop {
        let Some(t) = p.peek().cloned() else {
            return Err(p.unexpected("", &clause_expected(), &[]));
        };
        let start = t.span.start;
        let mut window_of_rule = None;
        let space_before_percent = p.peek_at(1).is_some_and(|n| n.text.starts_with('%'));
        if t.text.bytes().all(|b| b.is_ascii_digit()) && !t.text.is_empty() && !space_before_percent
        {
            let (n, _) = p.int("a failure count")?;
            if !p.peek_is("consecutive") {
                return Err(p.unexpected("", &[tick("consecutive")], &["consecutive"]));
            }
            p.bump();
            seen.once(p.src, "consecutive", start..p.last_end())?;
            p.record(Field::ConsecutiveFailures, start..p.last_end());
            policy.consecutive_failures = Some(n);
        } else if t.text.ends_with('%') || space_before_percent {
            let (rate, span) = p.percent("a failure rate")?;
            seen.once(p.src, "failure rate", span.clone())?;
            p.record(Field::FailureRate, span);
            policy.failure_rate_percent = Some(rate);
            window_of_rule = Some(window(p)?);
        } else {
            match t.text {
                "slow" => {
                    p.bump();
                    seen.once(p.src, "slow", t.span.clone())?;
                    let (duration, dspan) = p.duration("a slow-call duration")?;
                    p.record(Field::SlowCallDuration, dspan);
                    let (rate_percent, rspan) = p.percent("a slow-call rate")?;
                    p.record(Field::SlowCallRate, rspan);
                    policy.slow_call = Some(SlowCall {
                        duration,
                        rate_percent,
                    });
                    window_of_rule = Some(window(p)?);
                }
                "open" => {
                    p.bump();
                    seen.once(p.src, "open", t.span.clone())?;
                    let (cooldown, span) = p.duration("a cooldown")?;
                    p.record(Field::Cooldown, span);
                    policy.cooldown = cooldown;
                    if p.peek_is("factor") {
                        let s = p.bump().expect("peeked").span.start;
                        policy.cooldown_multiplier = p.number("a factor", "1.0..=1000.0", "2")?.0;
                        p.record(Field::CooldownMultiplier, s..p.last_end());
                    }
                    if p.peek_is("max") {
                        let s = p.bump().expect("peeked").span.start;
                        cooldown_max = Some(p.duration("a maximum cooldown")?.0);
                        p.record(Field::CooldownMax, s..p.last_end());
                    }
                    if p.peek_is("jitter") {
                        let s = p.bump().expect("peeked").span.start;
                        policy.cooldown_jitter =
                            p.number("a jitter fraction", "0.0..=1.0", "0.1")?.0;
                        p.record(Field::CooldownJitter, s..p.last_end());
                    }
                }
                "probes" => {
                    p.bump();
                    seen.once(p.src, "probes", t.span.clone())?;
                    policy.half_open_probes = p.int("a probe count")?.0;
                    p.record(Field::HalfOpenProbes, start..p.last_end());
                }
                "close" => {
                    p.bump();
                    seen.once(p.src, "close", t.span.clone())?;
                    p.expect("after")?;
                    policy.successes_to_close = p.int("a success count")?.0;
                    p.record(Field::SuccessesToClose, start..p.last_end());
                }
                "probe-wait" => {
                    p.bump();
                    seen.once(p.src, "probe-wait", t.span.clone())?;
                    policy.max_probe_wait = Some(p.duration("a probe wait")?.0);
                    p.record(Field::MaxProbeWait, start..p.last_end());
                }
                "neutral-probe" => {
                    p.bump();
                    seen.once(p.src, "neutral-probe", t.span.clone())?;
                    policy.neutral_probe = neutral(p)?;
                    p.record(Field::NeutralProbe, t.span.start..p.last_end());
                }
                _ => {
                    let what = if t.text.starts_with(|c: char| c.is_ascii_alphabetic()) {
                        "clause"
                    } else {
                        ""
                    };
                    return Err(p.unexpected(what, &clause_expected(), &KEYWORDS));
                }
            }
        }
        if let Some(Some(spec)) = window_of_rule {
            match &shared_window {
                Some(first) if (first.window, first.min_calls) != (spec.window, spec.min_calls) => {
                    return Err(DslError::new(
                        p.src,
                        spec.span.clone(),
                        "conflicting window: the failure-rate and slow-call rules share one window",
                    )
                    .help(format!(
                        "the window is already set at {}; write it once",
                        shown_span(p.src, &first.span)
                    )));
                }
                Some(_) => {}
                None => shared_window = Some(spec),
            }
        }
        if p.peek_is(",") {
            p.bump();
            continue;
        }
        p.finish(&[tick(","), "end of input".to_owned()])?;
        break;
    }
    if let Some(spec) = shared_window {
        policy.window = spec.window;
        policy.min_calls = spec.min_calls;
    }
    policy.cooldown_max = cooldown_max
        .unwrap_or_else(|| defaults::cooldown_max(policy.cooldown, policy.cooldown_multiplier));
    Ok(policy)
}

fn neutral(p: &mut Parser<'_>) -> Result<NeutralProbe, DslError> {
    const WORDS: [&str; 2] = ["release", "count-as-success"];
    let got = match p.peek().map(|t| t.text) {
        Some("release") => NeutralProbe::Release,
        Some("count-as-success") => NeutralProbe::CountAsSuccess,
        _ => {
            return Err(p.unexpected(
                "neutral-probe mode",
                &WORDS.iter().map(|w| tick(w)).collect::<Vec<_>>(),
                &WORDS,
            ))
        }
    };
    p.bump();
    Ok(got)
}

/// Parses and validates a breaker policy.
pub(crate) fn parse_breaker(src: &str) -> Result<BreakerPolicy, DslError> {
    let mut p = parser(src);
    let policy = breaker(&mut p)?;
    p.validated(policy, |policy, errors| {
        if let Err(e) = policy.validate() {
            errors.extend(e.errors);
        }
    })
}

/// Parses a breaker policy written in a config file: the policy (defaults for what it does
/// not write) and the fields it writes (see `Parser::written_validated`).
pub(crate) fn parse_breaker_written(src: &str) -> Result<(BreakerPolicy, Vec<Field>), DslError> {
    let mut p = parser(src);
    let policy = breaker(&mut p)?;
    p.written_validated(policy, |policy, errors| {
        if let Err(e) = policy.validate() {
            errors.extend(e.errors);
        }
    })
}

/// Parses and checks a window alone: `100 calls`, `60s`, `1m in 12 buckets`.
pub(crate) fn parse_window(src: &str) -> Result<SlidingWindow, DslError> {
    let mut p = parser(src);
    let start = p.here();
    let window = window_size(&mut p)?;
    p.record(Field::Window, start..p.last_end());
    p.finish(&["end of input".to_owned()])?;
    // The breaker validator is the one place that knows the window's bounds.
    p.validated(window, |&window, errors| {
        let probe = BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window,
            min_calls: 1,
            ..BreakerPolicy::default()
        };
        if let Err(e) = probe.validate() {
            errors.extend(e.errors.into_iter().filter(|f| f.field == Field::Window));
        }
    })
}

/// Parses `release` or `count-as-success`.
pub(crate) fn parse_neutral(src: &str) -> Result<NeutralProbe, DslError> {
    let mut p = parser(src);
    let got = neutral(&mut p)?;
    p.finish(&["end of input".to_owned()])?;
    Ok(got)
}

impl fmt::Display for SlidingWindow {
    /// `100 calls`, `1m`, or `1m in 12 buckets` (buckets only when not the default 10).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SlidingWindow::Count(n) => write!(f, "{n} calls"),
            SlidingWindow::Time { length, buckets } => {
                write!(f, "{}", fmt_duration(length))?;
                if buckets != SlidingWindow::DEFAULT_BUCKETS {
                    write!(f, " in {buckets} buckets")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for NeutralProbe {
    /// `release` or `count-as-success`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NeutralProbe::Release => "release",
            NeutralProbe::CountAsSuccess => "count-as-success",
        })
    }
}

struct WindowClause<'a>(&'a BreakerPolicy);

impl fmt::Display for WindowClause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kw = match self.0.window {
            SlidingWindow::Count(_) => "of",
            SlidingWindow::Time { .. } => "over",
        };
        write!(f, " {kw} {} min {}", self.0.window, self.0.min_calls)
    }
}

impl fmt::Display for BreakerPolicy {
    /// The canonical DSL form: the trip rules, the window (on the first rate rule, with its
    /// `min`), then `open`, `probes` and `close after` always, and the other settings when they
    /// differ from their defaults:
    /// `5 consecutive, 50% of 100 calls min 20, open 30s factor 2 max 5m, probes 1, close after 1`.
    ///
    /// A policy without rate rules does not print its window: it parses back with the default
    /// window (`of 100 calls min 100`), which no rule looks at.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut clauses = Vec::new();
        if let Some(n) = self.consecutive_failures {
            clauses.push(format!("{n} consecutive"));
        }
        if let Some(rate) = self.failure_rate_percent {
            clauses.push(format!("{rate}%{}", WindowClause(self)));
        }
        if let Some(slow) = self.slow_call {
            let mut s = format!(
                "slow {} {}%",
                fmt_duration(slow.duration),
                slow.rate_percent
            );
            if self.failure_rate_percent.is_none() {
                s.push_str(&WindowClause(self).to_string());
            }
            clauses.push(s);
        }
        let mut open = format!("open {}", fmt_duration(self.cooldown));
        if self.cooldown_multiplier != 1.0 {
            open.push_str(&format!(" factor {}", self.cooldown_multiplier));
        }
        if self.cooldown_multiplier != 1.0 || self.cooldown_max != self.cooldown {
            open.push_str(&format!(" max {}", fmt_duration(self.cooldown_max)));
        }
        if self.cooldown_jitter != 0.0 {
            open.push_str(&format!(" jitter {}", self.cooldown_jitter));
        }
        clauses.push(open);
        clauses.push(format!("probes {}", self.half_open_probes));
        clauses.push(format!("close after {}", self.successes_to_close));
        if let Some(wait) = self.max_probe_wait {
            clauses.push(format!("probe-wait {}", fmt_duration(wait)));
        }
        if self.neutral_probe != NeutralProbe::Release {
            clauses.push(format!("neutral-probe {}", self.neutral_probe));
        }
        f.write_str(&clauses.join(", "))
    }
}

impl FromStr for BreakerPolicy {
    type Err = DslError;

    /// Parses and validates a breaker policy; see the grammar in [`crate::dsl`]. Settings not
    /// written take the defaults of [`BreakerPolicy::default`], except the trip rules: only
    /// the rules written are set, and at least one is required.
    ///
    /// # Errors
    /// A [`DslError`] at the first token that does not follow the grammar, or at the clause
    /// that set an invalid value; for example `min 10` in `50% of 5 calls min 10` (case BR-18).
    ///
    /// # Examples
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::breaker::{BreakerPolicy, SlidingWindow};
    /// let p: BreakerPolicy = "50% of 100 calls min 20, open 10s".parse()?;
    /// assert_eq!(p.failure_rate_percent, Some(50.0));
    /// assert_eq!(p.window, SlidingWindow::Count(100));
    /// assert_eq!(p.min_calls, 20);
    /// assert_eq!(p.consecutive_failures, None);
    ///
    /// let err = "50% of 5 calls min 10".parse::<BreakerPolicy>().unwrap_err();
    /// assert_eq!(err.span, 15..21); // `min 10`
    /// # Ok::<(), breaker::dsl::DslError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_breaker(s)
    }
}

impl FromStr for SlidingWindow {
    type Err = DslError;

    /// Parses and checks a window alone: `100 calls`, `60s`, `1m in 12 buckets`.
    ///
    /// # Errors
    /// A [`DslError`] naming the offending token, or the `window` error of
    /// [`BreakerPolicy::validate`] (for example `0 calls`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_window(s)
    }
}

impl FromStr for NeutralProbe {
    type Err = DslError;

    /// Parses `release` or `count-as-success`.
    ///
    /// # Errors
    /// A [`DslError`] naming the offending token.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_neutral(s)
    }
}
