//! The policy DSL: short strings for durations, retry, breaker trip rules, bulkheads and layer
//! order.
//!
//! # Why
//! A policy is written in three places: the `#[circuit_breaker(..)]` attribute, config files and
//! plain Rust. This module is the one parser all of them use, so `"3x exp jitter"` means the
//! same thing everywhere and a typo gets the same error everywhere: the offending token, its
//! byte range, and what would have been accepted (case BR-38). Parsing a policy also validates
//! it with the same validator as the Rust API ([`BreakerPolicy::validate`],
//! [`Policy::validate`](crate::policy::Policy::validate)); a value error points at the token
//! that set the value.
//!
//! Every policy type prints itself back in the DSL (`Display`, the canonical form below) and
//! parses it again (`FromStr`) to the same value.
//!
//! This module needs no optional feature (no tokio, no serde): the proc-macro crate uses it at
//! compile time.
//!
//! # Examples
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::BreakerPolicy;
//! use breaker::dsl::{self, Order};
//! use breaker::retry::RetryPolicy;
//! use std::time::Duration;
//!
//! assert_eq!(dsl::parse_duration("1m 30s")?, Duration::from_secs(90));
//! let retry: RetryPolicy = "4x fixed 200ms".parse()?;
//! assert_eq!(retry.to_string(), "4x fixed 200ms");
//! let breaker: BreakerPolicy = "5 consecutive, open 30s".parse()?;
//! assert_eq!(breaker.to_string(), "5 consecutive, open 30s, probes 1, close after 1");
//! let order: Order = "timeout > retry > breaker".parse()?;
//! assert_eq!(order.0.len(), 3);
//!
//! let err = "3x expo".parse::<RetryPolicy>().unwrap_err();
//! assert_eq!((err.fragment.as_str(), err.span.clone()), ("expo", 3..7));
//! # Ok::<(), breaker::dsl::DslError>(())
//! ```
//!
//! # Grammar
//!
//! In ISO EBNF. Every string is one of `duration`, `retry`, `backoff`, `jitter`, `breaker`,
//! `window-size`, `bulkhead`, `order`, `rate`, `hedge`, `adaptive` or `throttle`, and must be
//! matched in full.
//!
//! ```text
//! (* lexical: tokens *)
//! token       = punct | word ;
//! punct       = "(" | ")" | "," | ">" ;
//! word        = word-char , { word-char } ;          (* longest match *)
//! word-char   = ? any character except ASCII whitespace and punct ? ;
//! int         = digit , { digit } ;                   (* one word; at most 4294967295 *)
//! number      = int , [ "." , int ] ;                  (* one word: "2", "1.5" *)
//! percent     = number , "%" ;                         (* one word: "50%", "12.5%" *)
//! attempts    = int , "x" ;                            (* one word: "3x" *)
//!
//! (* durations, parsed by the humantime crate *)
//! duration    = duration-part , { duration-part } ;   (* "250ms", "30s", "1m 30s" *)
//! duration-part = int , unit , { int , unit } ;        (* one word: "1m30s" is one part *)
//! unit        = "ns" | "us" | "ms" | "s" | "m" | "h" | "d" | "w"
//!             | ? humantime's other forms: "sec", "secs", "min", "hours", "M", "y", ... ? ;
//!                                                     (* no fractions: "1s 500ms", not "1.5s" *)
//!
//! (* retry; "3x" = 3 attempts in total, the first included *)
//! retry       = "none" | attempts , [ backoff ] , [ jitter ] ;
//! backoff     = "fixed" , duration
//!             | "linear" , [ "(" , duration , [ "," , "step" , duration ]
//!                                 , [ "," , "max" , duration ] , ")" ]
//!             | ( "exp" | "exponential" ) , [ "(" , duration , [ "," , "factor" , number ]
//!                                 , [ "," , "max" , duration ] , ")" ] ;
//! jitter      = "jitter" | "full-jitter" | "equal-jitter" | "decorrelated-jitter"
//!             | "additive-jitter" , duration             (* ± spread *)
//!             | "no-jitter" ;
//!
//! (* circuit breaker: clauses in any order, each at most once *)
//! breaker     = clause , { "," , clause } ;
//! clause      = int , "consecutive"                       (* trip after N failures in a row *)
//!             | percent , [ window ]                      (* trip at a failure rate *)
//!             | "slow" , duration , percent , [ window ]  (* trip at a slow-call rate *)
//!             | "open" , duration , [ "factor" , number ] , [ "max" , duration ]
//!                      , [ "jitter" , number ]             (* cooldown; jitter is a fraction *)
//!             | "probes" , int                            (* half-open probes in flight *)
//!             | "close" , "after" , int                   (* successful probes to close *)
//!             | "probe-wait" , duration                   (* a hung probe stops blocking *)
//!             | "neutral-probe" , ( "release" | "count-as-success" ) ;
//! window      = ( "of" | "over" ) , window-size , [ "min" , int ] ;
//! window-size = int , "calls" | duration , [ "in" , int , "buckets" ] ;
//!
//! bulkhead    = int , "concurrent" , [ "wait" , duration ] ;
//! order       = layer , { ">" , layer } ;                 (* outermost first *)
//! layer       = "timeout" | "retry" | "breaker" | "bulkhead"
//!             | "rate" | "hedge" | "adaptive" | "throttle" ;
//!                                                         (* `hedge` never outside `retry` *)
//!
//! (* rate limit: GCRA, `rate` permits per period, `burst` at once *)
//! rate        = int , "/" , period , [ "burst" , int ] , [ "wait" , duration ] ;
//!                                                         (* one word: "100/s", "5/100ms" *)
//! period      = unit | duration-part ;                    (* "s" is "1s" *)
//!
//! (* hedging: attempts beyond the first, and when each starts *)
//! hedge       = [ int , "x" ] , "after" , ( duration | percentile , "in" , delay-range ) ;
//! percentile  = "p" , number ;                            (* one word: "p95", "p99.9" *)
//! delay-range = duration-part , ".." , duration-part ;    (* one word: "10ms..200ms" *)
//!
//! (* adaptive concurrency limit: its floor and ceiling, then the algorithm's parameters *)
//! adaptive    = ( "aimd" , limits , { "from" , int | "backoff" , number | "slow" , duration }
//!               | "gradient2" , limits , { "from" , int | "tolerance" , number
//!                 | "smoothing" , number | "window" , int | "queue" , int } ) ;
//! limits      = int , ".." , int ;                        (* one word: "5..200" *)
//!
//! (* client-side adaptive throttling (SRE book): K, over a window *)
//! throttle    = "k" , number , [ "over" , duration ] ;
//! ```
//!
//! **Whitespace.** ASCII whitespace (space, tab, CR, LF) separates words and is otherwise
//! ignored: any amount is allowed between tokens, before the first and after the last, and
//! none is needed around `( ) , >`. Whitespace is *not* allowed inside a word, so `"3 x"`,
//! `"30 s"`, `"30 secs"` and `"50 %"` are errors that say so (and what to write). A fraction
//! (`"1.5s"`) is an error that names its equivalent in whole units (`1s 500ms`). Keywords are lowercase and case-sensitive.
//! Non-ASCII whitespace is part of a word (and so an error).
//!
//! **Defaults** of what is left out (the one table of them is [`crate::policy::defaults`]):
//! - retry: the backoff is `exp(100ms, factor 2, max 10s)`; no jitter. `linear` without
//!   arguments is `linear(100ms, step 100ms, max 10s)`; a missing `step` equals the base; a
//!   missing `max` is 10 s, or the base if that is larger ([`DEFAULT_BASE`],
//!   [`DEFAULT_FACTOR`], [`DEFAULT_MAX`]). `none` is [`RetryPolicy::NONE`](crate::retry::RetryPolicy::NONE).
//! - breaker: the values of [`BreakerPolicy::default`] except that only the trip rules written
//!   are set (at least one is required). Without a window a rate rule uses
//!   `of 100 calls min 100`; a window without `min` uses [`default_min_calls`] (the size of a
//!   count window, 10 for a time window); a time window has 10 buckets. The failure-rate and
//!   slow-call rules share one window: write it on one of them, or the same on both. `open`
//!   without `max` has `max` = the cooldown, or 10 × the cooldown when a `factor` is given.
//! - bulkhead: `wait 0s` (reject at once when full).
//! - rate: a burst of the rate (a period's worth at once), no wait.
//! - hedge: one hedge (`1x`).
//! - adaptive: the limit starts at 20 within the range; the algorithm's parameters are
//!   Netflix's defaults.
//! - throttle: a window of 2 minutes.
//!
//! **Canonical form** (`Display`): durations in humantime's format (`1m 30s`); retry
//! `{n}x {backoff}[ {jitter}]` with the backoff's arguments all written
//! (`exp(100ms, factor 2, max 10s)`) and `full-jitter` for `jitter`; breaker clauses in the
//! order of the grammar, with the window and its `min` on the first rate rule and `open`,
//! `probes`, `close after` always written (see [`BreakerPolicy`]'s `Display`).
//!
//! **Errors.** Parsing stops at the first token that does not fit, with a [`DslError`]:
//! ``unknown jitter `jiter` at 7..12; expected one of `(`, `jitter`, ... or end of input;
//! did you mean `jitter`?``. Value errors found by validation point at the clause that set the
//! value: ``min_calls (10) must be <= the count window size (5)`` points at `min 10`.

mod breaker;
mod layers;
mod order;
mod retry;

pub use crate::policy::defaults::{
    default_min_calls, BACKOFF_BASE as DEFAULT_BASE, BACKOFF_FACTOR as DEFAULT_FACTOR,
    BACKOFF_MAX as DEFAULT_MAX, TIME_WINDOW_MIN_CALLS as DEFAULT_TIME_WINDOW_MIN_CALLS,
};
pub use crate::syntax::DslError;
pub use order::Order;

use crate::breaker::{BreakerPolicy, SlidingWindow};
use crate::layer::Layer;
use crate::policy::BulkheadPolicy;
use crate::retry::RetryPolicy;
use crate::syntax::{self, Parser};
use std::time::Duration;

/// A parser of `src` for the grammars here, which knows their keywords.
fn parser(src: &str) -> Parser<'_> {
    Parser::new(src).keywords(is_keyword)
}

/// Whether `word` is a word of one of the grammars, which may follow a number: never taken
/// for a misspelt duration unit.
fn is_keyword(word: &str) -> bool {
    const OTHERS: [&str; 4] = ["max", "factor", "step", "after"];
    retry::BACKOFFS.contains(&word)
        || retry::JITTERS.contains(&word)
        || breaker::KEYWORDS.contains(&word)
        || layers::KEYWORDS.contains(&word)
        || OTHERS.contains(&word)
}

/// Parses a duration: one or more parts such as `250ms`, `30s`, `1m 30s` (humantime units).
/// Zero (`0s`) is accepted here; the validators reject it where it makes no sense.
///
/// # Errors
/// A [`DslError`] for a missing unit (`30`), a space before the unit (`30 s`), a negative value
/// (`-5s`), an unknown unit or trailing text.
///
/// # Examples
/// ```
/// # use breaker_core as breaker;
/// use std::time::Duration;
/// assert_eq!(breaker::dsl::parse_duration("1m 30s")?, Duration::from_secs(90));
/// let err = breaker::dsl::parse_duration("30").unwrap_err();
/// assert_eq!(err.to_string(),
///     "duration `30` has no unit at 0..2; expected one of `ns`, `us`, `ms`, `s`, `m`, `h`, `d` or `w`");
/// # Ok::<(), breaker::dsl::DslError>(())
/// ```
pub fn parse_duration(src: &str) -> Result<Duration, DslError> {
    parser(src).whole_duration()
}

/// Writes a duration in the DSL's canonical form (`1m 30s`, `250ms`, `0s`);
/// [`parse_duration`] reads it back exactly.
pub fn format_duration(d: Duration) -> String {
    syntax::fmt_duration(d).to_string()
}

/// Parses and validates a retry policy; the same as `src.parse::<RetryPolicy>()`.
///
/// # Errors
/// See [`RetryPolicy`'s `FromStr`](RetryPolicy#impl-FromStr-for-RetryPolicy).
pub fn parse_retry(src: &str) -> Result<RetryPolicy, DslError> {
    retry::parse_retry(src)
}

/// Parses and validates a breaker policy; the same as `src.parse::<BreakerPolicy>()`.
///
/// # Errors
/// See [`BreakerPolicy`'s `FromStr`](BreakerPolicy#impl-FromStr-for-BreakerPolicy).
pub fn parse_breaker(src: &str) -> Result<BreakerPolicy, DslError> {
    breaker::parse_breaker(src)
}

pub(crate) use breaker::parse_breaker_written;
pub(crate) use order::parse_bulkhead_written;
pub(crate) use retry::parse_retry_written;

/// Parses and validates a backoff alone (`fixed 200ms`, `exp(100ms, max 2s)`), as written in
/// the `backoff` field of a config file's retry table.
///
/// # Errors
/// A [`DslError`] naming the offending token or the invalid value; an empty string is an error.
pub fn parse_backoff(src: &str) -> Result<crate::retry::Backoff, DslError> {
    retry::parse_backoff(src)
}

/// Parses a sliding window alone (`100 calls`, `60s`, `1m in 12 buckets`), as written in config
/// files.
///
/// # Errors
/// A [`DslError`] naming the offending token or the invalid size.
pub fn parse_window(src: &str) -> Result<SlidingWindow, DslError> {
    breaker::parse_window(src)
}

/// Parses and validates a bulkhead (`10 concurrent`, `10 concurrent wait 100ms`).
///
/// # Errors
/// A [`DslError`] naming the offending token or the invalid count.
pub fn parse_bulkhead(src: &str) -> Result<BulkheadPolicy, DslError> {
    order::parse_bulkhead(src)
}

/// Parses and validates a rate limit (`100/s`, `5/100ms burst 1 wait 50ms`); the same as
/// `src.parse::<RateLimitPolicy>()`.
///
/// # Errors
/// See [`RateLimitPolicy`'s `FromStr`](crate::ratelimit::RateLimitPolicy#impl-FromStr-for-RateLimitPolicy).
pub fn parse_rate(src: &str) -> Result<crate::ratelimit::RateLimitPolicy, DslError> {
    layers::parse_rate(src)
}

/// Parses and validates hedging (`after 50ms`, `2x after p95 in 10ms..200ms`); the same as
/// `src.parse::<HedgePolicy>()`.
///
/// # Errors
/// See [`HedgePolicy`'s `FromStr`](crate::hedge::HedgePolicy#impl-FromStr-for-HedgePolicy).
pub fn parse_hedge(src: &str) -> Result<crate::hedge::HedgePolicy, DslError> {
    layers::parse_hedge(src)
}

/// Parses and validates an adaptive concurrency limit (`aimd 5..200`,
/// `gradient2 10..500 from 50`); the same as `src.parse::<AdaptiveLimitPolicy>()`.
///
/// # Errors
/// See [`AdaptiveLimitPolicy`'s `FromStr`](crate::adaptive::AdaptiveLimitPolicy#impl-FromStr-for-AdaptiveLimitPolicy).
pub fn parse_adaptive(src: &str) -> Result<crate::adaptive::AdaptiveLimitPolicy, DslError> {
    layers::parse_adaptive(src)
}

/// Parses and validates client-side adaptive throttling (`k 2`, `k 1.5 over 1m`); the same
/// as `src.parse::<ThrottlePolicy>()`.
///
/// # Errors
/// See [`ThrottlePolicy`'s `FromStr`](crate::throttle::ThrottlePolicy#impl-FromStr-for-ThrottlePolicy).
pub fn parse_throttle(src: &str) -> Result<crate::throttle::ThrottlePolicy, DslError> {
    layers::parse_throttle(src)
}

/// Parses a percentage such as `50%` or `12.5%` (the `%` is required; the range is checked by
/// the validators that use it).
///
/// # Errors
/// A [`DslError`] naming the offending token.
pub fn parse_percent(src: &str) -> Result<f64, DslError> {
    let mut p = parser(src);
    let (v, _) = p.percent("a percentage")?;
    p.finish(&["end of input".to_owned()])?;
    Ok(v)
}

/// Why a bare number `v` (a config file's number, an attribute's float literal) is refused as
/// a percentage, if it is: a value between 0 and 1 reads as a ratio (Polly's `FailureRatio`);
/// taken as a percent it would trip at a hundredth of the rate meant. A string keeps its `%`
/// (`"0.5%"`), so half a percent can still be written.
pub(crate) fn ratio_not_percent(v: f64) -> Option<String> {
    (v > 0.0 && v < 1.0).then(|| {
        // The percent meant, without the float's tail (`0.07 * 100` is `7.000000000000001`).
        let meant = (v * 1e8).round() / 1e6;
        format!(
            "`{v}` would be {v} %, not {meant} %: a rate is a percent, not a ratio; write \
             {meant} for {meant} %, or \"{v}%\" for {v} %"
        )
    })
}

/// Parses a layer order (`timeout > retry > breaker`, outermost first). Whether the named
/// layers are configured is checked by [`Policy::validate`](crate::policy::Policy::validate).
///
/// # Errors
/// A [`DslError`] at an unknown layer or a layer named twice.
pub fn parse_order(src: &str) -> Result<Vec<Layer>, DslError> {
    order::parse_order(src)
}
