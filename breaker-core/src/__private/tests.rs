//! Unit tests of the attribute's policy (`inline.rs`): its rendering of the validator's errors.

use super::inline::InlinePolicy;
use crate::field::AttrOption;
use crate::layer::Layer;

#[test]
fn defaults_build() {
    let p = InlinePolicy::default().build().unwrap();
    assert_eq!(p.order, Some(vec![Layer::Breaker]));
    assert!(!p.idempotent);
}

fn messages(p: InlinePolicy<'_>) -> Vec<(Option<&'static str>, Option<usize>, String)> {
    p.build()
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.option.map(AttrOption::name), e.item, e.message))
        .collect()
}

/// A value that does not parse has one error: the layer it configures still counts as
/// configured for `order`, and the validator's rules about it are not applied to a
/// placeholder.
#[test]
fn a_value_that_does_not_parse_has_one_error() {
    let got = messages(InlinePolicy {
        retry: Some("3x expo"),
        timeout: Some("5 parsecs"),
        deadline: Some("1s"),
        order: Some(&["retry", "breaker", "timeout"]),
        ..InlinePolicy::default()
    });
    let options: Vec<_> = got.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(options, [Some("retry"), Some("timeout")], "{got:?}");
}

/// The validator's errors in the attribute's words, at the option (or item) that set them.
#[test]
fn validator_errors_are_worded_for_the_attribute() {
    let got = messages(InlinePolicy {
        timeout: Some("5s"),
        deadline: Some("2s"),
        ..InlinePolicy::default()
    });
    assert_eq!(
        got,
        [(
            Some("timeout"),
            None,
            "invalid `timeout`: attempt timeout (5s) must be <= deadline (2s)".to_owned()
        )]
    );
    let got = messages(InlinePolicy {
        order: Some(&["retry", "breaker"]),
        ..InlinePolicy::default()
    });
    assert_eq!(
        got,
        [(
            Some("order"),
            Some(0),
            "layer `retry` is in `order` but not configured; add `retry = \"3x exp \
             jitter\"` or remove `retry` from `order`"
                .to_owned()
        )]
    );
    let got = messages(InlinePolicy {
        timeout: Some("1s"),
        concurrency: Some(4),
        order: Some(&["breaker"]),
        ..InlinePolicy::default()
    });
    assert_eq!(
        got,
        [(
            Some("order"),
            None,
            "`order` must place every configured layer, outermost first; it leaves out \
             `bulkhead`, `timeout`"
                .to_owned()
        )]
    );
    let got = messages(InlinePolicy {
        retry: Some("3x"),
        idempotent: Some(false),
        ..InlinePolicy::default()
    });
    assert_eq!(got[0].0, Some("idempotent"));
    // One attempt retries nothing: no contradiction.
    let one = InlinePolicy {
        retry: Some("1x"),
        idempotent: Some(false),
        ..InlinePolicy::default()
    };
    assert!(one.build().is_ok());
}

/// The macro's error sits under the whole literal, so a DSL error says where in the literal
/// its fragment is, unless the fragment is the whole literal.
#[test]
fn a_dsl_error_names_its_fragment_and_where_it_is() {
    let got = messages(InlinePolicy {
        retry: Some("3x exp jiter"),
        cooldown: Some("1m 30parsecs"),
        timeout: Some("1.5s"),
        ..InlinePolicy::default()
    });
    assert_eq!(
        got,
        [
            (
                Some("cooldown"),
                None,
                "invalid cooldown `1m 30parsecs`: unknown duration unit `parsecs` in \
                 `30parsecs` at 5..12; expected one of `ns`, `us`, `ms`, `s`, `m`, `h`, `d` or \
                 `w`"
                .to_owned()
            ),
            (
                Some("retry"),
                None,
                "invalid retry `3x exp jiter`: unknown jitter `jiter` at 7..12; expected one of \
                 `(`, `jitter`, `full-jitter`, `equal-jitter`, `decorrelated-jitter`, \
                 `additive-jitter` or end of input; did you mean `jitter`?"
                    .to_owned()
            ),
            (
                Some("timeout"),
                None,
                "invalid timeout `1.5s`: fractional duration `1.5s`; expected `1s 500ms`; \
                 fractions are written with a smaller unit"
                    .to_owned()
            ),
        ]
    );
}

#[test]
fn every_error_at_once() {
    let errors = InlinePolicy {
        threshold: Some(0),
        cooldown: Some("30 parsecs"),
        retry: Some("3x expo"),
        order: Some(&["retry", "retry", "bogus"]),
        ..InlinePolicy::default()
    }
    .build()
    .unwrap_err();
    let options: Vec<_> = errors
        .iter()
        .map(|e| (e.option.map(AttrOption::name), e.item))
        .collect();
    assert_eq!(
        options,
        [
            (Some("cooldown"), None),
            (Some("retry"), None),
            (Some("order"), Some(1)),
            (Some("order"), Some(2)),
            (Some("threshold"), None),
        ]
    );
}

/// `window = ".."` reads a time window as a config file does (`60s`, `60s in 12 buckets`),
/// with the window's own checks.
#[test]
fn a_time_window_takes_its_buckets() {
    use crate::breaker::SlidingWindow;
    use std::time::Duration;
    let window = |src| {
        InlinePolicy {
            failure_rate: Some(50.0),
            window_time: Some(src),
            ..InlinePolicy::default()
        }
        .build()
        .map(|p| p.breaker.unwrap().window)
    };
    let time = |secs, buckets| SlidingWindow::Time {
        length: Duration::from_secs(secs),
        buckets,
    };
    assert_eq!(window("60s"), Ok(time(60, 10)));
    assert_eq!(window("60s in 12 buckets"), Ok(time(60, 12)));
    assert_eq!(window("1m in 600 buckets"), Ok(time(60, 600)));
    let message = |src| {
        messages(InlinePolicy {
            failure_rate: Some(50.0),
            window_time: Some(src),
            ..InlinePolicy::default()
        })
    };
    assert_eq!(
        message("60s in 0 buckets"),
        [(
            Some("window"),
            None,
            "invalid window `60s in 0 buckets`: `window`: time window needs 1..=600 buckets, \
             got 0"
                .to_owned()
        )]
    );
    assert_eq!(
        message("60s in 12 bucket"),
        [(
            Some("window"),
            None,
            "invalid window `60s in 12 bucket`: unexpected `bucket` at 10..16; expected `buckets`"
                .to_owned()
        )]
    );
}
