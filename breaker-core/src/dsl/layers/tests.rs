//! The layers' DSLs: what parses, what prints back, and where each error points.

use super::*;

fn err(r: Result<impl std::fmt::Debug, DslError>) -> (String, Range<usize>, String) {
    let e = r.unwrap_err();
    (e.fragment.clone(), e.span.clone(), e.to_string())
}

#[test]
fn rates() {
    let p: RateLimitPolicy = "100/s".parse().unwrap();
    assert_eq!(p, RateLimitPolicy::per_second(100));
    let p: RateLimitPolicy = "5/100ms burst 1 wait 50ms".parse().unwrap();
    assert_eq!(
        (p.rate, p.per, p.burst, p.max_wait),
        (5, Duration::from_millis(100), 1, Duration::from_millis(50))
    );
    assert_eq!(p.to_string(), "5/100ms burst 1 wait 50ms");
    let keyed: RateLimitPolicy = "10/s per key burst 2".parse().unwrap();
    assert_eq!((keyed.rate, keyed.burst, keyed.per_key), (10, 2, true));
    assert_eq!(keyed.to_string(), "10/s burst 2 per key");
    assert_eq!(keyed.to_string().parse::<RateLimitPolicy>(), Ok(keyed));
    assert!(!"10/s".parse::<RateLimitPolicy>().unwrap().per_key);
    assert_eq!(
        err("0/s".parse::<RateLimitPolicy>()),
        (
            "0".to_owned(),
            0..1,
            "a rate of 0 admits no call at 0..1; expected at least 1 permit per period, \
             such as `1/s`; to stop every call, open the breaker instead"
                .to_owned()
        )
    );
    assert_eq!(err("100/s burst 0".parse::<RateLimitPolicy>()).1, 12..13);
    assert_eq!(err("100/parsec".parse::<RateLimitPolicy>()).1, 4..10);
    assert_eq!(err("100".parse::<RateLimitPolicy>()).1, 0..3);
    let (fragment, span, text) = err("100/s brust 5".parse::<RateLimitPolicy>());
    assert_eq!((fragment.as_str(), span), ("brust", 6..11));
    assert_eq!(
        text,
        "unknown clause `brust` at 6..11; expected one of `burst`, `wait`, `per key` or end \
         of input; did you mean `burst`?"
    );
    let (fragment, span, text) = err("10/s per host".parse::<RateLimitPolicy>());
    assert_eq!((fragment.as_str(), span), ("host", 9..13));
    assert!(text.contains("expected `key`"), "{text}");
    let (_, span, text) = err("10/s per key per key".parse::<RateLimitPolicy>());
    assert_eq!(span, 13..20);
    assert_eq!(
        text,
        "`per key` is given twice at 13..20; expected one of `burst`, `wait` or end of input"
    );
    let (_, span, text) = err("10/s burst 5 burst 6".parse::<RateLimitPolicy>());
    assert_eq!(span, 13..18);
    assert!(
        text.starts_with("`burst` is given twice at 13..18"),
        "{text}"
    );
    // A `/` with no period: the rate as written, not the `1` a bare unit gets.
    assert_eq!(
        err("100/".parse::<RateLimitPolicy>()),
        (
            "100/".to_owned(),
            0..4,
            "rate `100/` has no period at 0..4; expected a period right after the `/`, such \
             as `s`, `1m` or `100ms`"
                .to_owned()
        )
    );
    assert!(err("100/ s".parse::<RateLimitPolicy>())
        .2
        .ends_with("; write `100/s`, without a space"));
    // A rate above the largest burst needs its own: the default burst is the count.
    assert_eq!(
        err("2000000/s".parse::<RateLimitPolicy>()),
        (
            "2000000".to_owned(),
            0..7,
            "without `burst`, the burst is the count `2000000` at 0..7; expected a \
             `burst` of at most 1000000, such as `2000000/s burst 1000000`"
                .to_owned()
        )
    );
    let p: RateLimitPolicy = "2000000/s burst 1000000".parse().unwrap();
    assert_eq!((p.rate, p.burst), (2_000_000, 1_000_000));
    for spelling in ["perkey", "per-key", "per_key", "PER"] {
        let (_, _, text) = err(format!("10/s {spelling}").parse::<RateLimitPolicy>());
        assert!(
            text.ends_with("did you mean `per key`?"),
            "{spelling}: {text}"
        );
    }
}

#[test]
fn hedges() {
    let p: HedgePolicy = "after 50ms".parse().unwrap();
    assert_eq!(p, HedgePolicy::after(Duration::from_millis(50)));
    let p: HedgePolicy = "2x after p95 in 10ms..200ms".parse().unwrap();
    assert_eq!(
        p,
        HedgePolicy::percentile(95.0, Duration::from_millis(10), Duration::from_millis(200))
            .max_hedges(2)
    );
    assert_eq!(p.to_string(), "2x after p95 in 10ms..200ms");
    assert_eq!(err("0x after 5ms".parse::<HedgePolicy>()).1, 0..2);
    assert_eq!(err("after 0s".parse::<HedgePolicy>()).1, 6..8);
    assert_eq!(err("after p20 in 1ms..2ms".parse::<HedgePolicy>()).1, 6..9);
    let (_, span, text) = err("after p95 in 200ms..10ms".parse::<HedgePolicy>());
    assert_eq!(span, 13..24);
    assert!(text.contains("`10ms..200ms`"), "{text}");
}

#[test]
fn adaptive_limits() {
    let p: AdaptiveLimitPolicy = "aimd 5..200".parse().unwrap();
    assert_eq!(p, AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 5, 200));
    assert_eq!(p.to_string(), "aimd 5..200 from 20");
    let text = "gradient2 10..500 from 50 tolerance 2 queue 2";
    let p: AdaptiveLimitPolicy = text.parse().unwrap();
    assert_eq!(p.to_string(), text);
    let (fragment, span, message) = err("aimd 50..10".parse::<AdaptiveLimitPolicy>());
    assert_eq!((fragment.as_str(), span), ("50..10", 5..11));
    assert_eq!(
        message,
        "the floor (50) is above the ceiling (10) at 5..11; expected the floor first: \
         `10..50`"
    );
    assert_eq!(
        err("aimd 5..20 from 30".parse::<AdaptiveLimitPolicy>()).1,
        16..18
    );
    // A parameter of the other algorithm is not one of this one's.
    assert_eq!(
        err("aimd 5..20 tolerance 2".parse::<AdaptiveLimitPolicy>()).1,
        11..20
    );
    assert_eq!(
        err("aimd 5..20 backoff 0.2".parse::<AdaptiveLimitPolicy>()).1,
        0..22
    );
    assert_eq!(err("vegas 1..2".parse::<AdaptiveLimitPolicy>()).1, 0..5);
    // A parameter given twice is said so, not called unknown.
    assert_eq!(
        err("aimd 5..200 from 20 from 30".parse::<AdaptiveLimitPolicy>()),
        (
            "from".to_owned(),
            20..24,
            "`from` is given twice at 20..24; expected one of `backoff`, `slow` or end of \
             input"
                .to_owned()
        )
    );
    // What a number is expected to be names its range and a value in it.
    assert_eq!(
        err("aimd 5..200 backoff -0.5".parse::<AdaptiveLimitPolicy>()).2,
        "unexpected `-0.5` at 20..24; expected a backoff ratio in 0.5..1.0, such as `0.9`"
    );
    assert_eq!(
        err("gradient2 5..200 smoothing x".parse::<AdaptiveLimitPolicy>()).2,
        "unexpected `x` at 27..28; expected a smoothing factor in 0.0 < s <= 1.0, such as \
         `0.2`"
    );
}

#[test]
fn throttles() {
    let p: ThrottlePolicy = "k 2".parse().unwrap();
    assert_eq!(p, ThrottlePolicy::default());
    assert_eq!(p.to_string(), "k 2 over 2m");
    let p: ThrottlePolicy = "k 1.5 over 1m".parse().unwrap();
    assert_eq!(p.to_string(), "k 1.5 over 1m");
    assert_eq!(err("k 0.5".parse::<ThrottlePolicy>()).1, 2..5);
    assert_eq!(err("k 2 over 10ms".parse::<ThrottlePolicy>()).1, 9..13);
}
