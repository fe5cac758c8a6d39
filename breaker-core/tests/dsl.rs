//! The policy DSL: exact errors for case BR-38, BR-18 from the DSL side, round trips and
//! robustness.

use breaker_core::adaptive::AdaptiveLimitPolicy;
use breaker_core::breaker::{BreakerPolicy, NeutralProbe, SlidingWindow, SlowCall};
use breaker_core::dsl::{self, DslError, Order};
use breaker_core::hedge::HedgePolicy;
use breaker_core::layer::Layer;
use breaker_core::policy::BulkheadPolicy;
use breaker_core::ratelimit::RateLimitPolicy;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use breaker_core::scope::{Scope, StoreErrorMode};
use breaker_core::throttle::ThrottlePolicy;
use proptest::prelude::*;
use std::time::Duration;

/// Asserts the fragment, the span and the full text of an error.
#[track_caller]
fn assert_err(err: DslError, fragment: &str, span: std::ops::Range<usize>, text: &str) {
    assert_eq!(err.fragment, fragment, "fragment of {err}");
    assert_eq!(err.span, span, "span of {err}");
    assert_eq!(err.to_string(), text);
}

// ---- BR-38: unknown or misspelled tokens are errors naming the token and its position ----

#[test]
fn br_38_misspelled_jitter_is_named_with_its_span() {
    assert_err(
        dsl::parse_retry("3x exp jiter").unwrap_err(),
        "jiter",
        7..12,
        "unknown jitter `jiter` at 7..12; expected one of `(`, `jitter`, `full-jitter`, \
         `equal-jitter`, `decorrelated-jitter`, `additive-jitter` or end of input; \
         did you mean `jitter`?",
    );
}

#[test]
fn br_38_unknown_backoff_is_named_with_its_span() {
    assert_err(
        dsl::parse_retry("3x expo").unwrap_err(),
        "expo",
        3..7,
        "unknown backoff `expo` at 3..7; expected one of `fixed`, `linear`, `exp`, \
         `exponential`, `jitter`, `full-jitter`, `equal-jitter`, `decorrelated-jitter`, \
         `additive-jitter` or end of input; did you mean `exp`?",
    );
}

#[test]
fn br_38_space_inside_attempt_count_is_an_error() {
    assert_err(
        dsl::parse_retry("3 x exp").unwrap_err(),
        "3 x",
        0..3,
        "space between count and `x` in `3 x` at 0..3; expected `3x`",
    );
}

#[test]
fn br_38_duplicate_jitter_is_an_error_at_the_second() {
    assert_err(
        dsl::parse_retry("3x exp jitter jitter").unwrap_err(),
        "jitter",
        14..20,
        "duplicate jitter `jitter` at 14..20; expected end of input; \
         jitter is already set by `jitter` at 7..13",
    );
}

/// A number of hundreds of digits is out of range, not infinite: `inf%` would not parse back.
#[test]
fn a_number_too_large_for_a_float_is_out_of_range() {
    let huge = format!("{}50", "9".repeat(400));
    let e = dsl::parse_percent(&format!("{huge}%")).unwrap_err();
    assert_eq!(
        (e.fragment.as_str(), e.span.clone()),
        (&*format!("{huge}%"), 0..403)
    );
    assert_eq!(
        e.to_string(),
        format!(
            "a percentage `{huge}%` is out of range: too large for a number at 0..403; \
             expected a percentage such as `50%`"
        )
    );
    let e = format!("{huge}% of 100 calls")
        .parse::<BreakerPolicy>()
        .unwrap_err();
    assert!(e.message.starts_with("a failure rate `"), "{e}");
    let e = format!("5 consecutive, open 1s factor {huge}")
        .parse::<BreakerPolicy>()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("is out of range: too large for a number"),
        "{e}"
    );
    // The largest finite values still parse (the validators judge their range).
    assert!(dsl::parse_percent(&format!("{}%", "9".repeat(300))).is_ok());
}

/// A keyword of the grammar after a number is the next clause, not a misspelt unit: the number
/// lacks its unit (the grammars tell the shared tokenizer their keywords).
#[test]
fn a_keyword_after_a_number_is_not_taken_for_a_unit() {
    let e = dsl::parse_retry("3x fixed 100 jitter").unwrap_err();
    assert_eq!((e.fragment.as_str(), e.span.clone()), ("100", 9..12));
    assert!(
        e.to_string()
            .starts_with("duration `100` has no unit at 9..12"),
        "{e}"
    );
    // A word that is no keyword is taken for the unit it was meant to be.
    let e = dsl::parse_retry("3x fixed 100 parsecs").unwrap_err();
    assert_eq!(e.fragment, "parsecs");
}

#[test]
fn br_38_duration_without_unit_is_an_error() {
    assert_err(
        dsl::parse_duration("30").unwrap_err(),
        "30",
        0..2,
        "duration `30` has no unit at 0..2; expected one of `ns`, `us`, `ms`, `s`, `m`, `h`, \
         `d` or `w`",
    );
    // The same text as a retry policy: a count needs its `x`.
    assert_err(
        dsl::parse_retry("30").unwrap_err(),
        "30",
        0..2,
        "attempt count `30` has no `x` at 0..2; expected `30x`",
    );
}

#[test]
fn br_38_space_between_number_and_unit_is_an_error() {
    assert_err(
        dsl::parse_duration("30 s").unwrap_err(),
        "30 s",
        0..4,
        "space between number and unit in duration `30 s` at 0..4; expected `30s`",
    );
    // Inside a larger string the span is still exact.
    assert_err(
        dsl::parse_retry("3x fixed 30 s").unwrap_err(),
        "30 s",
        9..13,
        "space between number and unit in duration `30 s` at 9..13; expected `30s`",
    );
}

/// Issue 13: `"30 secs"` is a space before a unit humantime accepts (`secs`); it was taken
/// for an unknown unit, with the suggestion `30sec` and a list of fewer units than accepted.
#[test]
fn space_before_a_long_unit_says_to_remove_it() {
    assert_err(
        dsl::parse_duration("30 secs").unwrap_err(),
        "30 secs",
        0..7,
        "space between number and unit in duration `30 secs` at 0..7; expected `30secs`",
    );
    assert_eq!(dsl::parse_duration("30secs"), Ok(Duration::from_secs(30)));
    for unit in ["nanos", "millis", "mins", "hrs", "wk", "yrs"] {
        let src = format!("2 {unit}");
        let e = dsl::parse_duration(&src).unwrap_err();
        assert_eq!(
            e.message,
            format!("space between number and unit in duration `{src}`")
        );
    }
}

/// Issue 13: a fraction (`1.5s`) says how fractions are written, with the exact equivalent.
#[test]
fn fractional_duration_says_how_to_write_it() {
    assert_err(
        dsl::parse_duration("1.5s").unwrap_err(),
        "1.5s",
        0..4,
        "fractional duration `1.5s` at 0..4; expected `1s 500ms`; fractions are written with a \
         smaller unit",
    );
    assert_eq!(
        dsl::parse_duration("0.25h").unwrap_err().expected,
        ["`15m`"]
    );
    assert_eq!(
        dsl::parse_duration("2.5 m").unwrap_err().expected,
        ["`2m 30s`"]
    );
    // Inside a longer word too (humantime itself would take it).
    let e = dsl::parse_retry("3x fixed 1m1.5s").unwrap_err();
    assert_eq!(
        (e.fragment.as_str(), e.expected.clone()),
        ("1m1.5s", vec!["`1m 1s 500ms`".to_owned()])
    );
    // The same text in the attribute, a config file and the API: all use this parser.
    let e = "3x fixed 1.5s".parse::<RetryPolicy>().unwrap_err();
    assert_eq!(e.span, 9..13);
}

#[test]
fn br_38_negative_duration_is_an_error() {
    assert_err(
        dsl::parse_duration("-5s").unwrap_err(),
        "-5s",
        0..3,
        "negative duration `-5s` at 0..3; expected a positive duration such as `5s`",
    );
    assert_err(
        "5 consecutive, open -5s"
            .parse::<BreakerPolicy>()
            .unwrap_err(),
        "-5s",
        20..23,
        "negative duration `-5s` at 20..23; expected a positive duration such as `5s`",
    );
}

#[test]
fn br_38_unknown_breaker_clause_and_layer_are_named() {
    assert_err(
        "5 consecutive, opne 1s"
            .parse::<BreakerPolicy>()
            .unwrap_err(),
        "opne",
        15..19,
        "unknown clause `opne` at 15..19; expected one of a trip rule such as `5 consecutive`, \
         `50% of 100 calls` or `slow 2s 80%`, `open`, `probes`, `close`, `probe-wait` or \
         `neutral-probe`; did you mean `open`?",
    );
    assert_err(
        dsl::parse_order("timeout > retyr > breaker").unwrap_err(),
        "retyr",
        10..15,
        "unknown layer `retyr` at 10..15; expected one of `timeout`, `retry`, `breaker`, \
         `bulkhead`, `rate`, `hedge`, `adaptive` or `throttle`; did you mean `retry`?",
    );
    assert_err(
        dsl::parse_order("retry > breaker > retry").unwrap_err(),
        "retry",
        18..23,
        "layer `retry` appears twice at 18..23; each layer may appear at most once; \
         `retry` is already at 0..5",
    );
}

#[test]
fn br_38_percent_needs_no_space_and_a_sign() {
    assert_err(
        "50 % of 10 calls".parse::<BreakerPolicy>().unwrap_err(),
        "50 %",
        0..4,
        "space before `%` in a failure rate `50 %` at 0..4; expected `50%`",
    );
}

#[test]
fn br_38_trailing_tokens_are_errors() {
    assert_err(
        "5 consecutive open 1s"
            .parse::<BreakerPolicy>()
            .unwrap_err(),
        "open",
        14..18,
        "unexpected `open` at 14..18; expected one of `,` or end of input",
    );
    assert_err(
        dsl::parse_duration("30s later").unwrap_err(),
        "later",
        4..9,
        "unexpected `later` at 4..9; expected end of input",
    );
}

#[test]
fn br_38_end_of_input_is_reported_at_the_end() {
    assert_err(
        dsl::parse_retry("3x exp(100ms, max 2s").unwrap_err(),
        "",
        20..20,
        "unexpected end of input at 20..20; expected `)`",
    );
}

// ---- BR-18 from the DSL: min_calls larger than a count window ----

#[test]
fn br_18_min_calls_above_count_window_from_dsl() {
    assert_err(
        "50% of 5 calls min 10"
            .parse::<BreakerPolicy>()
            .unwrap_err(),
        "min 10",
        15..21,
        "`min_calls`: min_calls (10) must be <= the count window size (5) at 15..21; the \
         window can never hold more than 5 calls",
    );
    // Inclusive bound: equal is fine; time windows have no such limit.
    let p: BreakerPolicy = "50% of 5 calls min 5".parse().unwrap();
    assert_eq!((p.window, p.min_calls), (SlidingWindow::Count(5), 5));
    let p: BreakerPolicy = "50% over 10s min 1000".parse().unwrap();
    assert_eq!(p.min_calls, 1000);
}

// ---- the accepted forms ----

#[test]
fn retry_forms() {
    let ms = Duration::from_millis;
    let cases: [(&str, RetryPolicy); 6] = [
        ("none", RetryPolicy::NONE),
        (
            "3x exp jitter",
            RetryPolicy {
                max_attempts: 3,
                backoff: Backoff::Exponential {
                    base: ms(100),
                    factor: 2.0,
                    max: ms(10_000),
                },
                jitter: Jitter::Full,
            },
        ),
        (
            "5x exp(100ms, max 2s) full-jitter",
            RetryPolicy {
                max_attempts: 5,
                backoff: Backoff::Exponential {
                    base: ms(100),
                    factor: 2.0,
                    max: ms(2000),
                },
                jitter: Jitter::Full,
            },
        ),
        (
            "4x fixed 200ms",
            RetryPolicy {
                max_attempts: 4,
                backoff: Backoff::Fixed { delay: ms(200) },
                jitter: Jitter::None,
            },
        ),
        (
            " 2x  linear( 50ms,step 25ms ,max 1s )equal-jitter ",
            RetryPolicy {
                max_attempts: 2,
                backoff: Backoff::Linear {
                    base: ms(50),
                    step: ms(25),
                    max: ms(1000),
                },
                jitter: Jitter::Equal,
            },
        ),
        (
            "6x exponential(1s, factor 1.5) additive-jitter 1m 30s",
            RetryPolicy {
                max_attempts: 6,
                backoff: Backoff::Exponential {
                    base: ms(1000),
                    factor: 1.5,
                    max: ms(10_000),
                },
                jitter: Jitter::Additive { spread: ms(90_000) },
            },
        ),
    ];
    for (src, want) in cases {
        assert_eq!(dsl::parse_retry(src), Ok(want), "{src}");
    }
    assert_eq!(
        dsl::parse_retry("3x").unwrap().to_string(),
        "3x exp(100ms, factor 2, max 10s)"
    );
    // A base above the default cap raises the cap.
    assert_eq!(
        dsl::parse_retry("3x exp(30s)").unwrap().to_string(),
        "3x exp(30s, factor 2, max 30s)"
    );
}

#[test]
fn retry_value_errors_point_at_the_token() {
    assert_err(
        dsl::parse_retry("0x").unwrap_err(),
        "0x",
        0..2,
        "`max_attempts`: must be in 1..=100 (attempts in total, the first included), got 0 at 0..2",
    );
    assert_err(
        dsl::parse_retry("3x exp(1s, max 1ms) jitter").unwrap_err(),
        "exp(1s, max 1ms)",
        3..19,
        "`backoff`: max (1ms) must be >= the base delay (1s) at 3..19",
    );
}

#[test]
fn breaker_forms() {
    let p: BreakerPolicy =
        "50% over 60s min 10, slow 2s 80%, open 10s factor 2 max 5m jitter 0.25, probes 3, \
         close after 2, probe-wait 20s, neutral-probe count-as-success"
            .parse()
            .unwrap();
    assert_eq!(
        p,
        BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            slow_call: Some(SlowCall {
                duration: Duration::from_secs(2),
                rate_percent: 80.0
            }),
            window: SlidingWindow::Time {
                length: Duration::from_secs(60),
                buckets: 10
            },
            min_calls: 10,
            cooldown: Duration::from_secs(10),
            cooldown_multiplier: 2.0,
            cooldown_max: Duration::from_secs(300),
            cooldown_jitter: 0.25,
            half_open_probes: 3,
            successes_to_close: 2,
            max_probe_wait: Some(Duration::from_secs(20)),
            neutral_probe: NeutralProbe::CountAsSuccess,
        }
    );
    assert_eq!(
        p.to_string(),
        "50% over 1m min 10, slow 2s 80%, open 10s factor 2 max 5m jitter 0.25, probes 3, \
         close after 2, probe-wait 20s, neutral-probe count-as-success"
    );
    // Defaults: a count window's `min` is its size; `factor` without `max` grows to 10x.
    let p: BreakerPolicy = "5 consecutive, 50% of 20 calls, open 1s factor 2"
        .parse()
        .unwrap();
    assert_eq!((p.min_calls, p.cooldown_max), (20, Duration::from_secs(10)));
    assert_eq!(
        "slow 1s 50% of 10 calls, 50% of 20 calls"
            .parse::<BreakerPolicy>()
            .unwrap_err()
            .to_string(),
        "conflicting window: the failure-rate and slow-call rules share one window at 29..40; \
         the window is already set at 12..23; write it once"
    );
    assert_err(
        "5 consecutive, 5 consecutive"
            .parse::<BreakerPolicy>()
            .unwrap_err(),
        "5 consecutive",
        15..28,
        "duplicate `consecutive` clause at 15..28; `consecutive` is already set at 0..13",
    );
}

#[test]
fn order_and_bulkhead_forms() {
    assert_eq!(
        "timeout>retry > breaker".parse::<Order>().unwrap().0,
        [Layer::Timeout, Layer::Retry, Layer::Breaker]
    );
    assert_eq!(
        "retry > breaker > hedge > throttle > rate > adaptive"
            .parse::<Order>()
            .unwrap()
            .0,
        [
            Layer::Retry,
            Layer::Breaker,
            Layer::Hedge,
            Layer::Throttle,
            Layer::RateLimit,
            Layer::Adaptive
        ]
    );
    // An order that cannot work: `hedge` outside `retry`, named at `hedge`.
    let err = "breaker > hedge > retry".parse::<Order>().unwrap_err();
    assert_err(
        err.clone(),
        "hedge",
        10..15,
        "layer `hedge` is outside `retry`: each hedge would run a retry loop of its own (up to \
         attempts × hedges calls) at 10..15; put `hedge` inside `retry` (`retry > .. > \
         hedge`), so each retry attempt is one hedged group; `retry` is at 18..23",
    );
    // The position follows what is wrong; the fix and the other layer's place are the help.
    assert_eq!(
        err.help.as_deref(),
        Some(
            "put `hedge` inside `retry` (`retry > .. > hedge`), so each retry attempt is one \
             hedged group; `retry` is at 18..23"
        )
    );
    assert_eq!(
        dsl::parse_bulkhead("10 concurrent wait 100ms"),
        Ok(BulkheadPolicy {
            max_concurrent: 10,
            max_wait: Duration::from_millis(100)
        })
    );
    assert_err(
        dsl::parse_bulkhead("0 concurrent").unwrap_err(),
        "0 concurrent",
        0..12,
        "`max_concurrent`: must be in 1..=1000000, got 0 at 0..12",
    );
    assert_eq!(
        dsl::parse_window("1m in 12 buckets").unwrap().to_string(),
        "1m in 12 buckets"
    );
    assert_err(
        dsl::parse_window("0 calls").unwrap_err(),
        "0 calls",
        0..7,
        "`window`: count window must hold 1..=1000000 calls, got 0 at 0..7",
    );
}

// ---- round trips and robustness ----

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..100_000).prop_map(Duration::from_millis),
        (0u64..30 * 86_400_000_000_000).prop_map(Duration::from_nanos),
    ]
}

fn nonzero_duration() -> impl Strategy<Value = Duration> {
    duration().prop_filter("non-zero", |d| !d.is_zero())
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        duration().prop_map(|delay| Backoff::Fixed { delay }),
        (duration(), duration(), duration()).prop_map(|(base, step, extra)| Backoff::Linear {
            base,
            step,
            max: base.saturating_add(extra)
        }),
        (nonzero_duration(), 1.0f64..=100.0, duration()).prop_map(|(base, factor, extra)| {
            Backoff::Exponential {
                base,
                factor,
                max: base.saturating_add(extra),
            }
        }),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
        duration().prop_map(|spread| Jitter::Additive { spread }),
    ]
}

fn retry() -> impl Strategy<Value = RetryPolicy> {
    (1u32..=100, backoff(), jitter()).prop_map(|(max_attempts, backoff, jitter)| RetryPolicy {
        max_attempts,
        backoff,
        jitter,
    })
}

fn percent() -> impl Strategy<Value = f64> {
    prop_oneof![(1u32..=100).prop_map(f64::from), (0.001f64..=100.0)]
}

fn window() -> impl Strategy<Value = SlidingWindow> {
    prop_oneof![
        (1u32..=1_000_000).prop_map(SlidingWindow::Count),
        ((1u64..=86_400_000), 1u32..=600).prop_map(|(ms, buckets)| SlidingWindow::Time {
            length: Duration::from_millis(ms),
            buckets
        }),
    ]
}

prop_compose! {
    fn breaker_policy()(
        consecutive in proptest::option::of(1u32..1000),
        rate in proptest::option::of(percent()),
        slow in proptest::option::of((nonzero_duration(), percent())),
        window in window(),
        min in 1u32..=2000,
        cooldown in nonzero_duration(),
        multiplier in prop_oneof![Just(1.0f64), 1.0f64..=1000.0],
        extra in prop_oneof![Just(Duration::ZERO), duration()],
        cooldown_jitter in prop_oneof![Just(0.0f64), 0.0f64..=1.0],
        probes in 1u32..=65_535,
        close in 1u32..=8_191,
        wait in proptest::option::of(nonzero_duration()),
        neutral in prop_oneof![Just(NeutralProbe::Release), Just(NeutralProbe::CountAsSuccess)],
    ) -> BreakerPolicy {
        let uses_window = rate.is_some() || slow.is_some();
        let (window, min_calls) = if uses_window {
            let min = match window { SlidingWindow::Count(n) => min.min(n), _ => min };
            (window, min)
        } else {
            (SlidingWindow::Count(100), 100)
        };
        let consecutive = if consecutive.is_none() && !uses_window { Some(5) } else { consecutive };
        BreakerPolicy {
            consecutive_failures: consecutive,
            failure_rate_percent: rate,
            slow_call: slow.map(|(duration, rate_percent)| SlowCall { duration, rate_percent }),
            window,
            min_calls,
            cooldown,
            cooldown_multiplier: multiplier,
            cooldown_max: cooldown.saturating_add(extra),
            cooldown_jitter,
            half_open_probes: probes,
            successes_to_close: close,
            max_probe_wait: wait,
            neutral_probe: neutral,
        }
    }
}

/// Every entry point, so that one input exercises them all.
fn parse_all(s: &str) -> Vec<Result<String, DslError>> {
    vec![
        dsl::parse_duration(s).map(dsl::format_duration),
        dsl::parse_retry(s).map(|p| p.to_string()),
        dsl::parse_breaker(s).map(|p| p.to_string()),
        dsl::parse_window(s).map(|p| p.to_string()),
        dsl::parse_bulkhead(s).map(|p| p.to_string()),
        dsl::parse_order(s).map(|p| Order(p).to_string()),
        s.parse::<Backoff>().map(|p| p.to_string()),
        s.parse::<Jitter>().map(|p| p.to_string()),
        s.parse::<NeutralProbe>().map(|p| p.to_string()),
        s.parse::<RateLimitPolicy>().map(|p| p.to_string()),
        s.parse::<HedgePolicy>().map(|p| p.to_string()),
        s.parse::<AdaptiveLimitPolicy>().map(|p| p.to_string()),
        s.parse::<ThrottlePolicy>().map(|p| p.to_string()),
        s.parse::<Scope>().map(|p| p.to_string()),
        s.parse::<StoreErrorMode>().map(|p| p.to_string()),
    ]
}

#[track_caller]
fn check_error_spans(s: &str) {
    for result in parse_all(s) {
        if let Err(e) = result {
            assert!(
                e.span.start <= e.span.end && e.span.end <= s.len(),
                "{e} in {s:?}"
            );
            assert_eq!(
                s.get(e.span.clone()),
                Some(e.fragment.as_str()),
                "{e} in {s:?}"
            );
            assert!(!e.message.is_empty());
            // The text shows the span in characters.
            let start = s[..e.span.start].chars().count();
            let chars = start..start + e.fragment.chars().count();
            assert_eq!(e.chars(), chars, "{e} in {s:?}");
            assert!(
                e.to_string()
                    .contains(&format!(" at {}..{}", chars.start, chars.end)),
                "{e} in {s:?}"
            );
        }
    }
}

/// An error's text counts characters, as a person does and as config files' columns do; its
/// `span` stays the byte range to slice the input with.
#[test]
fn an_error_shows_where_its_fragment_is_in_characters() {
    let e = dsl::parse_retry("3x éxp").unwrap_err();
    assert_eq!(
        (e.fragment.as_str(), e.span.clone(), e.chars()),
        ("éxp", 3..7, 3..6)
    );
    assert!(
        e.to_string().starts_with("unknown backoff `éxp` at 3..6;"),
        "{e}"
    );
    let e = dsl::parse_duration("тридцать").unwrap_err();
    assert_eq!((e.span.clone(), e.chars()), (0..16, 0..8));
    assert!(e.to_string().contains("`тридцать` at 0..8;"), "{e}");
    // A fragment read inside a larger string: moved by the characters before it.
    let e = "closed(1é)".parse::<StoreErrorMode>().unwrap_err();
    assert_eq!(
        (e.fragment.as_str(), e.span.clone(), e.chars()),
        ("1é", 7..10, 7..9)
    );
    assert!(e.to_string().contains(" at 7..9"), "{e}");
}

const VOCABULARY: &[&str] = &[
    "3x",
    "0x",
    "101x",
    "none",
    "exp",
    "exponential",
    "linear",
    "fixed",
    "jitter",
    "full-jitter",
    "equal-jitter",
    "decorrelated-jitter",
    "additive-jitter",
    "no-jitter",
    "(",
    ")",
    ",",
    ">",
    "factor",
    "max",
    "step",
    "2",
    "1.5",
    "30s",
    "1m",
    "250ms",
    "0s",
    "-5s",
    "30",
    "s",
    "%",
    "50%",
    "101%",
    "0%",
    "consecutive",
    "of",
    "over",
    "calls",
    "in",
    "buckets",
    "min",
    "slow",
    "open",
    "probes",
    "close",
    "after",
    "probe-wait",
    "neutral-probe",
    "release",
    "count-as-success",
    "timeout",
    "retry",
    "breaker",
    "bulkhead",
    "concurrent",
    "wait",
    "é",
    "99999999999",
    "99999999999999999999s",
    "1d",
    "x",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn duration_round_trips(d in duration()) {
        prop_assert_eq!(dsl::parse_duration(&dsl::format_duration(d)), Ok(d));
    }

    #[test]
    fn retry_round_trips(p in retry()) {
        prop_assert_eq!(p.to_string().parse::<RetryPolicy>(), Ok(p));
    }

    #[test]
    fn breaker_round_trips(p in breaker_policy()) {
        prop_assume!(p.validate().is_ok());
        let text = p.to_string();
        prop_assert_eq!(text.parse::<BreakerPolicy>(), Ok(p), "{}", text);
    }

    #[test]
    fn order_round_trips(layers in Just(Layer::DEFAULT_ORDER.to_vec()).prop_shuffle(), n in 1usize..=4) {
        let order = Order(layers[..n].to_vec());
        // `hedge > retry` is refused by the order's own rule (tested below).
        prop_assume!(breaker_core::layer::check_order(&order.0, &order.0).is_empty());
        prop_assert_eq!(order.to_string().parse::<Order>(), Ok(order));
    }

    #[test]
    fn bulkhead_round_trips(max_concurrent in 1u32..=1_000_000, max_wait in duration()) {
        let p = BulkheadPolicy { max_concurrent, max_wait };
        prop_assert_eq!(p.to_string().parse::<BulkheadPolicy>(), Ok(p));
    }

    /// The parser never panics, and every error's span lies on the input's char boundaries.
    #[test]
    fn parser_never_panics_on_arbitrary_strings(s in "\\PC*") {
        check_error_spans(&s);
    }

    /// The same over strings made of the grammar's own words, which reach deeper.
    #[test]
    fn parser_never_panics_on_token_soup(
        words in proptest::collection::vec((proptest::sample::select(VOCABULARY), "[ \t]{0,2}"), 0..12)
    ) {
        let s: String = words.into_iter().map(|(w, ws)| format!("{w}{ws}")).collect();
        check_error_spans(&s);
    }
}

/// Suggestions name what was meant, once: a doubled unit letter is the unit (`10ss` ->
/// `s`, not `ns`), and a misspelled keyword that is the only thing expected is not also
/// offered as "did you mean" (found by a README-only new-user trial).
#[test]
fn suggestions_name_what_was_meant_once() {
    let e = dsl::parse_duration("10ss").unwrap_err().to_string();
    assert!(e.contains("did you mean `s`?"), "{e}");
    let e = dsl::parse_breaker("5 consecutiv").unwrap_err().describe();
    assert_eq!(e.matches("`consecutive`").count(), 1, "{e}");
}
