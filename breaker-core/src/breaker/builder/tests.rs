//! `CircuitBreaker::new`'s defaults and its per-thread configuration cache.

use super::*;
use crate::breaker::{NeutralProbe, SlidingWindow, SlowCall};
use std::time::Duration;

fn shared_of(b: &CircuitBreaker) -> *const Shared {
    Arc::as_ptr(&b.inner.shared)
}

/// Issue 16: lifetime totals are opt-in, so a breaker from `new` is one block of state.
#[test]
fn new_keeps_no_totals_and_is_one_block() {
    let b = CircuitBreaker::new(BreakerPolicy::default()).unwrap();
    b.try_acquire().unwrap().failure();
    let _ = b.try_acquire().map(|p| p.success());
    assert_eq!(b.snapshot().totals, None);
    assert!(
        b.inner.heavy().is_none(),
        "no second heap block without totals"
    );
    // The handle (8), the reference count (8) and the state block (56: the word, its two
    // stamps, the failure counter, the open hint, the configuration and the optional parts).
    assert_eq!(b.memory_bytes(), 72);

    let built = CircuitBreaker::builder(BreakerPolicy::default())
        .build()
        .unwrap();
    assert_eq!(built.snapshot().totals, None, "the builder's default too");

    // A named breaker (a pipeline's, an annotated function's) can be shared with a fleet
    // store, but keeps no block for the hook until one is installed.
    let named = CircuitBreaker::builder(BreakerPolicy::default())
        .name("named")
        .build()
        .unwrap();
    assert!(named.inner.heavy().is_none());
    assert_eq!(named.memory_bytes(), 72);
    assert_eq!(named.fleet_hook_room(), Ok(()));

    let counted = CircuitBreaker::builder(BreakerPolicy::default())
        .totals(true)
        .build()
        .unwrap();
    counted.try_acquire().unwrap().failure();
    let t = counted.snapshot().totals.expect("asked for");
    assert_eq!((t.admitted, t.failed), (1, 1));
}

#[test]
fn new_shares_a_block_only_for_the_same_policy_and_totals() {
    let p = BreakerPolicy {
        consecutive_failures: Some(7),
        ..BreakerPolicy::default()
    };
    let a = CircuitBreaker::new(p.clone()).unwrap();
    let b = CircuitBreaker::new(p.clone()).unwrap();
    assert_eq!(shared_of(&a), shared_of(&b));
    let counted = CircuitBreaker::builder(p.clone())
        .totals(true)
        .build()
        .unwrap();
    assert_ne!(shared_of(&a), shared_of(&counted));
    assert!(counted.snapshot().totals.is_some());
    let other = CircuitBreaker::new(BreakerPolicy {
        consecutive_failures: Some(8),
        ..p.clone()
    })
    .unwrap();
    assert_ne!(shared_of(&a), shared_of(&other));
    assert_eq!(other.policy().consecutive_failures, Some(8));
    // Breakers sharing a block still keep their own state.
    a.try_acquire().unwrap().failure();
    assert_eq!(
        (
            a.snapshot().consecutive_failures,
            b.snapshot().consecutive_failures
        ),
        (1, 0)
    );
}

#[test]
fn an_invalid_policy_is_refused_whatever_is_cached() {
    let valid = BreakerPolicy::default();
    let _warm = CircuitBreaker::new(valid.clone()).unwrap();
    let zero = BreakerPolicy {
        consecutive_failures: Some(0),
        ..valid.clone()
    };
    let err = CircuitBreaker::new(zero).unwrap_err().to_string();
    assert!(err.contains("consecutive_failures"), "{err}");
    // A NaN compares unequal to itself with `==` but equal bit for bit: it is never cached,
    // so it is refused on every try, not just the first.
    let nan = BreakerPolicy {
        cooldown_jitter: f64::NAN,
        ..valid.clone()
    };
    assert!(CircuitBreaker::new(nan.clone()).is_err());
    assert!(CircuitBreaker::new(nan).is_err());
    // The cached block is still the valid one.
    let again = CircuitBreaker::new(valid).unwrap();
    assert_eq!(shared_of(&_warm), shared_of(&again));
}

/// Every field takes part in the cache's comparison: a policy that differs in any one of
/// them is not the same.
#[test]
fn same_policy_compares_every_field() {
    let base = BreakerPolicy {
        failure_rate_percent: Some(50.0),
        slow_call: Some(SlowCall {
            duration: Duration::from_secs(1),
            rate_percent: 80.0,
        }),
        max_probe_wait: Some(Duration::from_secs(5)),
        ..BreakerPolicy::default()
    };
    assert!(same_policy(&base, &base.clone()));
    let changed: Vec<(&str, BreakerPolicy)> = vec![
        (
            "consecutive_failures",
            BreakerPolicy {
                consecutive_failures: None,
                ..base.clone()
            },
        ),
        (
            "failure_rate_percent",
            BreakerPolicy {
                failure_rate_percent: Some(51.0),
                ..base.clone()
            },
        ),
        (
            "failure_rate_percent none",
            BreakerPolicy {
                failure_rate_percent: None,
                ..base.clone()
            },
        ),
        (
            "slow_call duration",
            BreakerPolicy {
                slow_call: Some(SlowCall {
                    duration: Duration::from_secs(2),
                    rate_percent: 80.0,
                }),
                ..base.clone()
            },
        ),
        (
            "slow_call rate",
            BreakerPolicy {
                slow_call: Some(SlowCall {
                    duration: Duration::from_secs(1),
                    rate_percent: 81.0,
                }),
                ..base.clone()
            },
        ),
        (
            "slow_call none",
            BreakerPolicy {
                slow_call: None,
                ..base.clone()
            },
        ),
        (
            "window count",
            BreakerPolicy {
                window: SlidingWindow::Count(99),
                ..base.clone()
            },
        ),
        (
            "window kind",
            BreakerPolicy {
                window: SlidingWindow::Time {
                    length: Duration::from_secs(100),
                    buckets: 10,
                },
                ..base.clone()
            },
        ),
        (
            "min_calls",
            BreakerPolicy {
                min_calls: 99,
                ..base.clone()
            },
        ),
        (
            "cooldown",
            BreakerPolicy {
                cooldown: Duration::from_secs(31),
                ..base.clone()
            },
        ),
        (
            "cooldown nanos",
            BreakerPolicy {
                cooldown: Duration::new(30, 1),
                ..base.clone()
            },
        ),
        (
            "cooldown_multiplier",
            BreakerPolicy {
                cooldown_multiplier: 2.0,
                ..base.clone()
            },
        ),
        (
            "cooldown_max",
            BreakerPolicy {
                cooldown_max: Duration::from_secs(60),
                ..base.clone()
            },
        ),
        (
            "cooldown_jitter",
            BreakerPolicy {
                cooldown_jitter: 0.5,
                ..base.clone()
            },
        ),
        (
            "cooldown_jitter sign",
            BreakerPolicy {
                cooldown_jitter: -0.0,
                ..base.clone()
            },
        ),
        (
            "half_open_probes",
            BreakerPolicy {
                half_open_probes: 2,
                ..base.clone()
            },
        ),
        (
            "successes_to_close",
            BreakerPolicy {
                successes_to_close: 2,
                ..base.clone()
            },
        ),
        (
            "max_probe_wait",
            BreakerPolicy {
                max_probe_wait: Some(Duration::from_secs(6)),
                ..base.clone()
            },
        ),
        (
            "max_probe_wait none",
            BreakerPolicy {
                max_probe_wait: None,
                ..base.clone()
            },
        ),
        (
            "neutral_probe",
            BreakerPolicy {
                neutral_probe: NeutralProbe::CountAsSuccess,
                ..base.clone()
            },
        ),
    ];
    for (field, p) in changed {
        assert!(!same_policy(&base, &p), "{field}: differs, yet the same");
        assert!(!same_policy(&p, &base), "{field}: differs, yet the same");
    }
}
