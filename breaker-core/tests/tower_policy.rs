//! `PolicyLayer` / `PolicyService` (feature `tower`): a whole policy, in its declared order,
//! around a tower service, with exact invocation and breaker counts.
#![cfg(all(feature = "tower", feature = "tokio"))]

use breaker_core::breaker::{BreakerPolicy, State};
use breaker_core::error::Rejection;
use breaker_core::layer::Layer as PipelineLayer;
use breaker_core::policy::Policy;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use breaker_core::tower::policy::PolicyLayer;
use breaker_core::Error;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

fn policy(order: Option<Vec<PipelineLayer>>) -> Policy {
    Policy {
        breaker: Some(BreakerPolicy {
            consecutive_failures: Some(2),
            ..BreakerPolicy::default()
        }),
        retry: Some(RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Fixed {
                delay: Duration::from_millis(10),
            },
            jitter: Jitter::None,
        }),
        timeout: Some(Duration::from_secs(1)),
        order,
        idempotent: true,
        ..Policy::default()
    }
}

/// Always fails; counts invocations.
fn failing(
    calls: &Arc<AtomicU32>,
) -> impl Service<
    u32,
    Response = u32,
    Error = String,
    Future = impl Future<Output = Result<u32, String>> + Send,
> + Clone
       + Send {
    let calls = Arc::clone(calls);
    service_fn(move |_: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<u32, _>("down".to_string()) }
    })
}

#[tokio::test(start_paused = true)]
async fn retry_outside_breaker_stops_at_the_open_breaker() {
    let calls = Arc::default();
    let layer = PolicyLayer::new(&policy(None)).unwrap();
    let svc = layer.layer(failing(&calls));

    // Attempts 1 and 2 fail and open the breaker; attempt 3 is rejected and not retried.
    let err = svc.clone().oneshot(1).await.unwrap_err();
    assert!(
        matches!(err, Error::Rejected(Rejection::Breaker(_))),
        "{err:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(layer.pipeline().breaker().unwrap().state(), State::Open);

    // The next call is rejected without invoking the service.
    let err = svc.oneshot(2).await.unwrap_err();
    assert!(
        matches!(err, Error::Rejected(Rejection::Breaker(_))),
        "{err:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn breaker_outside_retry_counts_one_failure_per_call() {
    let calls = Arc::default();
    let order = vec![
        PipelineLayer::Breaker,
        PipelineLayer::Retry,
        PipelineLayer::Timeout,
    ];
    let layer = PolicyLayer::new(&policy(Some(order))).unwrap();
    let svc = layer.layer(failing(&calls));

    for expected_calls in [3, 6] {
        let err = svc.clone().oneshot(1).await.unwrap_err();
        assert!(matches!(err, Error::GaveUp { attempts: 3, .. }), "{err:?}");
        assert_eq!(calls.load(Ordering::SeqCst), expected_calls);
    }
    // Two logical calls, two failures: the breaker (2 in a row) is now open.
    assert_eq!(layer.pipeline().breaker().unwrap().state(), State::Open);
    assert!(matches!(
        svc.oneshot(1).await,
        Err(Error::Rejected(Rejection::Breaker(_)))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_policy_attempts_once() {
    let calls = Arc::default();
    let policy = Policy {
        idempotent: false,
        breaker: None,
        ..policy(None)
    };
    // A policy whose retry could never retry is refused whole (case BR-35) ...
    let refused = PolicyLayer::new(&policy).unwrap_err();
    assert!(refused
        .to_string()
        .contains("only operations declared idempotent"));
    // ... and so is it on the builder, even when `idempotent(false)` is said again ...
    let restated = breaker_core::pipeline::PipelineBuilder::from_policy(&policy)
        .idempotent(false)
        .build()
        .unwrap_err();
    assert!(restated
        .to_string()
        .contains("call `.idempotent(true)` on the builder"));
    // ... so a non-idempotent policy has no retry, and makes one attempt.
    let once = Policy {
        retry: None,
        ..policy
    };
    let layer = PolicyLayer::new(&once).unwrap();
    let err = layer.layer(failing(&calls)).oneshot(1).await.unwrap_err();
    assert!(matches!(err, Error::Inner(ref e) if e == "down"), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// `KeyedPolicyLayer`: each key of the request has its own breaker and rate limiter, from
/// bounded registries; a full registry refuses a new key without calling the service; a
/// `PolicyLayer` refuses a rate limit `per key`, which it could not key.
#[tokio::test(start_paused = true)]
async fn a_keyed_policy_layer_gives_each_key_its_breaker_and_rate_limit() {
    use breaker_core::breaker::CircuitBreaker;
    use breaker_core::clock::Clock;
    use breaker_core::ratelimit::{RateLimitPolicy, RateLimiters};
    use breaker_core::registry::Registry;
    use breaker_core::tower::policy::KeyedPolicyLayer;

    let per_host = RateLimitPolicy::per_second(1).burst(3).per_key();
    let breaker = BreakerPolicy {
        consecutive_failures: Some(2),
        ..BreakerPolicy::default()
    };
    let policy = Policy {
        breaker: Some(breaker.clone()),
        rate_limit: Some(per_host),
        ..Policy::default()
    };
    let err = PolicyLayer::new(&policy).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid rate limit: `per key`: a `PolicyLayer` has one rate limit for every request; \
         use a `KeyedPolicyLayer` with `RateLimiters` to limit each key"
    );

    let factory = CircuitBreaker::builder(breaker)
        .clock(Clock::tokio())
        .build_factory()
        .unwrap();
    let hosts: Registry<String> = Registry::builder(factory).max_keys(2).build();
    let limiters: RateLimiters<String> = RateLimiters::builder(per_host)
        .clock(Clock::tokio())
        .max_keys(2)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    // Requests are (host, ok); host `down` always fails.
    let mut svc = KeyedPolicyLayer::new(&policy, |req: &(&'static str, bool)| req.0.to_owned())
        .unwrap()
        .breakers(hosts.clone())
        .rate_limiters(limiters.clone())
        .layer(service_fn(move |(_, ok): (&'static str, bool)| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if ok {
                    Ok(())
                } else {
                    Err("down")
                }
            }
        }));
    macro_rules! send {
        ($req:expr) => {
            svc.ready().await.unwrap().call($req).await
        };
    }
    // `down` fails twice: its breaker opens; its third call is refused by it.
    assert!(matches!(send!(("down", false)), Err(Error::Inner("down"))));
    assert!(matches!(send!(("down", false)), Err(Error::Inner("down"))));
    assert!(matches!(
        send!(("down", false)),
        Err(Error::Rejected(Rejection::Breaker(_)))
    ));
    assert_eq!(hosts.get("down").unwrap().state(), State::Open);
    // `up` has its own breaker (closed) and its own burst of 3.
    for _ in 0..3 {
        assert!(send!(("up", true)).is_ok());
    }
    assert!(matches!(
        send!(("up", true)),
        Err(Error::Rejected(Rejection::RateLimited(_)))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    // A third host: both registries hold 2 keys, none evictable (no idle TTL).
    let Err(Error::Rejected(Rejection::Keys(full))) = send!(("third", true)) else {
        panic!("a third host: expected a full registry")
    };
    assert_eq!(full.max_keys(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}
