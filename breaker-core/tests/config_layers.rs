//! The rate limit, hedge, adaptive limit and throttle layers in config files: the same keys
//! in TOML, YAML and JSON, every mistake at once at its position, and a reload that reaches
//! them. On tokio's paused clock.
#![cfg(feature = "config")]

use breaker_core::adaptive::{AdaptiveLimitPolicy, LimitAlgorithm};
use breaker_core::clock::Clock;
use breaker_core::config::{self, Format, Loader, PolicyRegistry};
use breaker_core::hedge::HedgePolicy;
use breaker_core::layer::Layer;
use breaker_core::ratelimit::RateLimitPolicy;
use breaker_core::throttle::ThrottlePolicy;
use breaker_core::{Error, Rejection};
use std::time::Duration;

const TOML: &str = r#"[policies.search]
retry = "2x fixed 10ms"
idempotent = true
rate = "100/s burst 20"
hedge = "1x after p95 in 10ms..200ms"
adaptive = "gradient2 5..200 from 50"
throttle = "k 1.5 over 1m"
"#;

const YAML: &str = r#"policies:
  search:
    retry: "2x fixed 10ms"
    idempotent: true
    rate: "100/s burst 20"
    hedge: "1x after p95 in 10ms..200ms"
    adaptive: "gradient2 5..200 from 50"
    throttle: "k 1.5 over 1m"
"#;

const JSON: &str = r#"{
  "policies": {
    "search": {
      "retry": "2x fixed 10ms",
      "idempotent": true,
      "rate": "100/s burst 20",
      "hedge": "1x after p95 in 10ms..200ms",
      "adaptive": "gradient2 5..200 from 50",
      "throttle": "k 1.5 over 1m"
    }
  }
}"#;

#[test]
fn the_same_layers_load_from_toml_yaml_and_json() {
    for (text, format) in [
        (TOML, Format::Toml),
        (YAML, Format::Yaml),
        (JSON, Format::Json),
    ] {
        let policies = config::load_str(text, format).unwrap();
        let p = policies.get("search").unwrap();
        assert_eq!(
            p.rate_limit,
            Some(RateLimitPolicy::per_second(100).burst(20))
        );
        assert_eq!(
            p.hedge,
            Some(HedgePolicy::percentile(
                95.0,
                Duration::from_millis(10),
                Duration::from_millis(200)
            ))
        );
        assert_eq!(
            p.adaptive,
            Some(AdaptiveLimitPolicy::new(LimitAlgorithm::GRADIENT2, 5, 200).initial(50))
        );
        assert_eq!(
            p.throttle,
            Some(ThrottlePolicy {
                k: 1.5,
                window: Duration::from_secs(60)
            })
        );
        let pipeline = policies.pipeline("search").unwrap();
        assert_eq!(
            pipeline.order(),
            [
                Layer::Retry,
                Layer::Hedge,
                Layer::Throttle,
                Layer::RateLimit,
                Layer::Adaptive
            ]
        );
    }
}

/// A rate of zero, a floor above the ceiling, a hedge of a policy not declared idempotent, an
/// order with `hedge` outside `retry` and a misspelt throttle: every one at its line and column.
#[test]
fn every_mistake_of_the_new_layers_at_once() {
    let text = r#"[policies.a]
rate = "0/s"
adaptive = "aimd 50..10"
throttle = "k2"

[policies.b]
hedge = "after 50ms"

[policies.c]
retry = "3x"
idempotent = true
hedge = "after 50ms"
order = "hedge > retry"
"#;
    let err = Loader::text(text, Format::Toml).load().unwrap_err();
    let got: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "2:8: policies.a.rate: a rate of 0 admits no call at 0..1; expected at least 1 \
             permit per period, such as `1/s`; to stop every call, open the breaker instead (in \
             \"0/s\")",
            "3:12: policies.a.adaptive: the floor (50) is above the ceiling (10) at 5..11; \
             expected the floor first: `10..50` (in \"aimd 50..10\")",
            "4:12: policies.a.throttle: unexpected `k2` at 0..2; expected `k`",
            "7:9: policies.b.hedge: hedging sends a call more than once, but only operations \
             declared idempotent are hedged and this policy is not; add `idempotent = true`, \
             or remove the hedge",
            "13:9: policies.c.order: layer `hedge` is outside `retry`: each hedge would run a \
             retry loop of its own (up to attempts × hedges calls) at 0..5; put `hedge` inside \
             `retry` (`retry > .. > hedge`), so each retry attempt is one hedged group; `retry` \
             is at 8..13 (in \"hedge > retry\")",
        ]
    );
}

/// A reload changes the rate limit of new calls in place: 1 permit a second, then 100.
#[tokio::test(start_paused = true)]
async fn a_reload_reaches_the_rate_limit() {
    let load = |rate: &str| {
        config::load_str(&format!("[policies.p]\nrate = \"{rate}\"\n"), Format::Toml).unwrap()
    };
    let registry =
        PolicyRegistry::from_policies_with_clock(load("1/s burst 1"), Some(Clock::tokio()));
    let p = registry.pipeline("p").unwrap();
    let ok = || async { Ok::<_, &str>(()) };
    p.call(ok).await.unwrap();
    let err = p.call(ok).await.unwrap_err();
    assert!(
        matches!(err, Error::Rejected(Rejection::RateLimited(r)) if r.retry_after == Duration::from_secs(1))
    );
    registry.reload_from(load("100/s burst 5")).unwrap();
    for _ in 0..5 {
        p.call(ok).await.unwrap();
    }
    assert!(p.call(ok).await.is_err());
    // A reload that leaves the rate as it was keeps the limiter and its spent burst: no
    // fresh burst for free.
    let same_rate = config::load_str(
        "[policies.p]\nrate = \"100/s burst 5\"\ntimeout = \"1s\"\n",
        Format::Toml,
    )
    .unwrap();
    registry.reload_from(same_rate).unwrap();
    assert!(p.call(ok).await.is_err());
    tokio::time::advance(Duration::from_millis(10)).await;
    p.call(ok).await.unwrap();
}
