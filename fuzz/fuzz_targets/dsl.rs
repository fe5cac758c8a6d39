//! Fuzzes every entry point of the policy DSL: no input may panic, every error's span must lie
//! on the input's char boundaries, and every accepted policy must print and parse back to
//! itself.
#![no_main]

use breaker_core::breaker::BreakerPolicy;
use breaker_core::dsl::{self, DslError};
use breaker_core::retry::RetryPolicy;
use libfuzzer_sys::fuzz_target;

fn check_span(s: &str, e: &DslError) {
    assert!(e.span.end <= s.len());
    assert_eq!(s.get(e.span.clone()), Some(e.fragment.as_str()));
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match dsl::parse_duration(s) {
        Ok(d) => assert_eq!(dsl::parse_duration(&dsl::format_duration(d)), Ok(d)),
        Err(e) => check_span(s, &e),
    }
    match s.parse::<RetryPolicy>() {
        Ok(p) => assert_eq!(p.to_string().parse::<RetryPolicy>(), Ok(p)),
        Err(e) => check_span(s, &e),
    }
    match s.parse::<BreakerPolicy>() {
        Ok(p) => {
            let again: BreakerPolicy = p.to_string().parse().expect("printed policy parses");
            assert_eq!(again.to_string(), p.to_string());
        }
        Err(e) => check_span(s, &e),
    }
    for r in [
        dsl::parse_order(s).map(drop),
        dsl::parse_bulkhead(s).map(drop),
        dsl::parse_window(s).map(drop),
        dsl::parse_backoff(s).map(drop),
    ] {
        if let Err(e) = r {
            check_span(s, &e);
        }
    }
});
