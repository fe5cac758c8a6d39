//! One validator for every way of building a pipeline: the builder, `Pipeline::from_policy`,
//! tower's `PolicyLayer`, config files, the DSL and the attribute apply the same rules
//! ([`Policy::validate`]). Each test here is a rule one of those paths used to skip.
#![cfg(feature = "tokio")]

use breaker_core::pipeline::{Pipeline, PipelineBuilder};
use breaker_core::policy::Policy;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use std::time::Duration;

fn retry(max_attempts: u32, backoff: Backoff) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        backoff,
        jitter: Jitter::None,
    }
}

fn exp(factor: f64) -> Backoff {
    Backoff::Exponential {
        base: Duration::from_millis(100),
        factor,
        max: Duration::from_secs(10),
    }
}

/// The builder ran only its own checks (zero attempts), not the retry rules of the validator:
/// a 1,000-attempt retry built.
#[test]
fn builder_refuses_more_than_100_attempts() {
    let e = Pipeline::builder()
        .retry(retry(1000, exp(2.0)))
        .idempotent(true)
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid retry policy: `max_attempts`: must be in 1..=100 (attempts in total, the first \
         included), got 1000"
    );
    assert!(Pipeline::builder()
        .retry(retry(100, exp(2.0)))
        .idempotent(true)
        .build()
        .is_ok());
}

/// ... nor an exponential backoff that shrinks (factor 0.5).
#[test]
fn builder_refuses_a_shrinking_exponential_backoff() {
    let e = Pipeline::builder()
        .retry(retry(3, exp(0.5)))
        .idempotent(true)
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid retry policy: `backoff`: factor must be in 1.0..=100.0, got 0.5"
    );
}

/// Case BR-35 through `Pipeline::from_policy`: a hand-built policy with a 3x retry that is not
/// declared idempotent silently made one attempt; now it is refused like in a config file.
#[test]
fn br_35_from_policy_refuses_a_retry_that_could_never_retry() {
    let policy = Policy {
        retry: Some(retry(3, exp(2.0))),
        ..Policy::default()
    };
    let e = Pipeline::from_policy(&policy).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid retry policy: `max_attempts`: 3 attempts, but only operations declared \
         idempotent are retried and this policy is not; add `idempotent = true`, or \
         `retry = \"none\"`"
    );
    // `PipelineBuilder::from_policy` takes the policy whole, too.
    assert!(PipelineBuilder::from_policy(&policy).build().is_err());
    // Restating it on the builder changes nothing: a retry that could never retry is refused,
    // in the builder's words.
    let e = PipelineBuilder::from_policy(&policy)
        .idempotent(false)
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid retry policy: `max_attempts`: 3 attempts, but only operations declared \
         idempotent are retried and this pipeline is not; call `.idempotent(true)` on the \
         builder, or remove the retry"
    );
    assert!(PipelineBuilder::from_policy(&policy)
        .idempotent(true)
        .build()
        .is_ok());
    let ok = Policy {
        idempotent: true,
        ..policy.clone()
    };
    assert!(Pipeline::from_policy(&ok).is_ok());
}

/// Case BR-35 through tower's `PolicyLayer::new`, which builds with `Pipeline::from_policy`.
#[cfg(feature = "tower")]
#[test]
fn br_35_policy_layer_refuses_a_retry_that_could_never_retry() {
    use breaker_core::tower::policy::PolicyLayer;
    let policy = Policy {
        retry: Some(retry(3, exp(2.0))),
        ..Policy::default()
    };
    let e = PolicyLayer::new(&policy).unwrap_err();
    assert!(
        e.to_string()
            .contains("only operations declared idempotent"),
        "{e}"
    );
}

/// `RetryPolicy::default()` is what `"3x"` means in the DSL and what an omitted `retry`
/// table key means in a config file: one defaults table (it used to have full jitter, while
/// the DSL and config files have none).
#[test]
fn retry_default_is_the_dsl_default() {
    let dsl: RetryPolicy = "3x".parse().unwrap();
    assert_eq!(RetryPolicy::default(), dsl);
    assert_eq!(RetryPolicy::default().jitter, Jitter::None);
    let file = breaker_core::config::load_str(
        "[policies.a]\nidempotent = true\n[policies.a.retry]\n",
        breaker_core::config::Format::Toml,
    )
    .unwrap();
    assert_eq!(file.get("a").unwrap().retry, Some(RetryPolicy::default()));
}

/// A timeout longer than the breaker's probe wait is accepted on every path (issue 26 item 4).
/// It was refused while a probe slower than the wait was taken over by a new half-open period
/// and its result ignored (the breaker never closed while calls took that long); a probe held
/// past the wait now lets one more in *in the same period*, and its late result still counts
/// (`br_04_slow_probes_close_the_breaker_when_every_call_outlasts_the_wait`).
#[test]
fn a_timeout_longer_than_the_probe_wait_is_accepted() {
    let policy = Policy {
        breaker: Some("1 consecutive, open 1s".parse().unwrap()),
        timeout: Some(Duration::from_secs(2)),
        ..Policy::default()
    };
    assert_eq!(policy.validate(), Ok(()));
    assert!(Pipeline::from_policy(&policy).is_ok());
    assert!(Pipeline::builder()
        .breaker_policy("1 consecutive, open 1s".parse().unwrap())
        .timeout(Duration::from_secs(2))
        .build()
        .is_ok());
}
