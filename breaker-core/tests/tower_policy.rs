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

/// A rate limit `per key` is never silently one shared limit, and a key's limiter never
/// silently unused: a pipeline called without a key's limiter, or given one it has no rate
/// layer for, panics naming what to do.
#[tokio::test]
async fn a_limit_per_key_without_the_keys_limiter_is_a_loud_mistake() {
    use breaker_core::pipeline::{AllErrors, KeyLayers, Pipeline};
    use breaker_core::ratelimit::{RateLimitPolicy, RateLimiter};

    /// The panic message of `call` on `pipeline`, run as a task.
    async fn panic_of(pipeline: Pipeline, limiter: Option<RateLimiter>) -> String {
        let task = tokio::spawn(async move {
            let key = match &limiter {
                Some(l) => KeyLayers::new().rate_limiter(l),
                None => KeyLayers::new(),
            };
            let r: Result<(), Error<std::io::Error>> = match limiter {
                Some(_) => {
                    pipeline
                        .call_keyed(key, &AllErrors, || async { Ok(()) })
                        .await
                }
                None => pipeline.call(|| async { Ok(()) }).await,
            };
            r
        });
        let panic = task.await.expect_err("expected a panic").into_panic();
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_else(|| panic.downcast_ref::<String>().cloned().unwrap_or_default())
    }

    let per_key = RateLimitPolicy::per_second(1).burst(1).per_key();
    let keyed = Pipeline::builder().rate_limit(per_key).build().unwrap();
    assert!(panic_of(keyed.clone(), None).await.starts_with(
        "this pipeline's rate limit is `per key`, but the call gave no key's rate limiter"
    ));
    let limiter = RateLimiter::new(per_key).unwrap();
    let plain = Pipeline::builder().build().unwrap();
    assert!(panic_of(plain, Some(limiter.clone()))
        .await
        .starts_with("a key's rate limiter was given to a pipeline with no rate limit"));

    // With the key's limiter, the call runs under it: its one permit, then a refusal.
    for admitted in [true, false] {
        let r: Result<(), Error<std::io::Error>> = keyed
            .call_keyed(
                KeyLayers::new().rate_limiter(&limiter),
                &AllErrors,
                || async { Ok(()) },
            )
            .await;
        assert_eq!(r.is_ok(), admitted);
    }
}

/// A `KeyedPolicyLayer` over a policy limiting `per key` limits each key with no registry
/// given: it makes one of the policy, bounded as the attribute's.
#[tokio::test(start_paused = true)]
async fn a_keyed_policy_layer_makes_the_keys_limiters_of_a_per_key_policy() {
    use breaker_core::ratelimit::RateLimitPolicy;
    use breaker_core::tower::policy::KeyedPolicyLayer;

    let policy = Policy {
        rate_limit: Some(RateLimitPolicy::per_second(1).burst(1).per_key()),
        ..Policy::default()
    };
    let mut svc = KeyedPolicyLayer::new(&policy, |req: &(&'static str, u32)| req.0.to_owned())
        .unwrap()
        .layer(service_fn(|(_, n): (&'static str, u32)| async move {
            Ok::<_, std::io::Error>(n)
        }));
    for (key, admitted) in [("a", true), ("a", false), ("b", true)] {
        let r = svc.ready().await.unwrap().call((key, 1)).await;
        assert_eq!(r.is_ok(), admitted, "{key}: {r:?}");
    }
}
