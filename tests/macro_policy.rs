//! `#[circuit_breaker(policy = "..", config = "..")]` with no registry installed: the function
//! runs the named policy of the config file checked at compile time, and behaves exactly like
//! the pipeline built by hand from that file (the same invocation counts, errors and breaker
//! state). Every test runs on tokio's paused clock.
//!
//! `tests/fixtures/breaker.toml`: `inventory` trips after 3 consecutive failures, stays open
//! 10 s, and retries twice in all with a fixed 100 ms backoff, outside the breaker; `payments`
//! trips after 2 failures and stays open 30 s. Each test uses its own policy: functions naming
//! the same policy share its breaker.

use breaker::breaker::State;
use breaker::circuit_breaker;
use breaker::clock::Clock;
use breaker::config::{Loader, PolicyRegistry};
use breaker::layer::Layer;
use breaker::pipeline::Pipeline;
use breaker::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/breaker.toml");

#[derive(Debug, Clone, PartialEq)]
struct Down;

fn kind<T, E>(r: &Result<T, Error<E>>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::Inner(_)) => "inner",
        Err(Error::Rejected(_)) => "rejected",
        Err(Error::Timeout(_)) => "timeout",
        Err(Error::GaveUp { .. }) => "gave_up",
        Err(_) => "other",
    }
}

/// What a run of calls looked like: invocations of the operation, each call's result and the
/// breaker's state afterwards.
#[derive(Debug, PartialEq)]
struct Trace {
    invocations: u32,
    results: Vec<&'static str>,
    state: State,
}

static INVENTORY_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(
    policy = "inventory",
    config = "tests/fixtures/breaker.toml",
    name = "policy_inventory"
)]
async fn inventory(fail: bool) -> Result<u32, Down> {
    INVENTORY_CALLS.fetch_add(1, Ordering::SeqCst);
    if fail {
        Err(Down)
    } else {
        Ok(7)
    }
}

/// Three failing calls, then a successful one after the cooldown.
#[tokio::test(start_paused = true)]
async fn named_policy_uses_the_files_thresholds() {
    let mut results = Vec::new();
    for _ in 0..3 {
        results.push(kind(&inventory(true).await));
    }
    let breaker = breaker::annotated::breaker("policy_inventory").unwrap();
    let open = Trace {
        invocations: INVENTORY_CALLS.load(Ordering::SeqCst),
        results,
        state: breaker.state(),
    };
    // Call 1: two attempts fail (2 failures). Call 2: the first attempt is the third failure
    // and trips the breaker, which rejects the retry. Call 3: rejected.
    let expected = Trace {
        invocations: 3,
        results: vec!["gave_up", "rejected", "rejected"],
        state: State::Open,
    };
    assert_eq!(open, expected);

    // It opened at 100 ms (call 2's first attempt, after call 1's backoff) and it is now
    // 200 ms (call 2's backoff before the rejected retry): still open just before the file's
    // 10 s cooldown ends, half-open when it does.
    tokio::time::advance(Duration::from_millis(9_800)).await;
    assert_eq!(kind(&inventory(false).await), "rejected");
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(inventory(false).await.unwrap(), 7);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(INVENTORY_CALLS.load(Ordering::SeqCst), 4);

    // The same run through the pipeline built by hand from the same file.
    let policies = Loader::file(FIXTURE).no_env().load().unwrap();
    let policy = policies.get("inventory").unwrap();
    assert_eq!(
        policy.order.as_deref(),
        Some(&[Layer::Retry, Layer::Breaker, Layer::Timeout][..])
    );
    let by_hand = breaker::pipeline::PipelineBuilder::from_policy(&policy)
        .clock(Clock::tokio())
        .build()
        .unwrap();
    assert_eq!(trace(&by_hand, 3).await, expected);
}

async fn trace(pipeline: &Pipeline, calls: u32) -> Trace {
    let count = AtomicU32::new(0);
    let mut results = Vec::new();
    for _ in 0..calls {
        let r: Result<u32, Error<Down>> = pipeline
            .call(|| async {
                count.fetch_add(1, Ordering::SeqCst);
                Err(Down)
            })
            .await;
        results.push(kind(&r));
    }
    Trace {
        invocations: count.load(Ordering::SeqCst),
        results,
        state: pipeline.breaker().unwrap().state(),
    }
}

static PAYMENTS_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(policy = "payments", config = "tests/fixtures/breaker.toml", key = tenant)]
async fn charge(tenant: &str, fail: bool) -> Result<u64, Down> {
    let _ = tenant;
    PAYMENTS_CALLS.fetch_add(1, Ordering::SeqCst);
    if fail {
        Err(Down)
    } else {
        Ok(100)
    }
}

/// `key` with a named policy: one breaker per tenant, each with the file's threshold of 2.
#[tokio::test(start_paused = true)]
async fn named_policy_with_key_keeps_one_breaker_per_key() {
    assert_eq!(kind(&charge("acme", true).await), "inner");
    assert_eq!(kind(&charge("acme", true).await), "inner");
    assert_eq!(kind(&charge("acme", false).await), "rejected");
    assert_eq!(charge("globex", false).await.unwrap(), 100);
    assert_eq!(PAYMENTS_CALLS.load(Ordering::SeqCst), 3);
    // The file's 30 s cooldown.
    tokio::time::advance(Duration::from_secs(29)).await;
    assert_eq!(kind(&charge("acme", false).await), "rejected");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(charge("acme", false).await.unwrap(), 100);
    assert_eq!(PAYMENTS_CALLS.load(Ordering::SeqCst), 4);
}

/// The registry behind an embedded file is the same loader's output as reading the file.
#[test]
fn embedded_file_loads_like_the_file() {
    let registry = PolicyRegistry::load(Loader::file(FIXTURE).no_env()).unwrap();
    assert_eq!(registry.names(), ["inventory", "payments"]);
}
