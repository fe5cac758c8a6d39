//! The rate limit, hedge, adaptive limit and throttle layers in a pipeline: what each order
//! means, with retry, breaker, timeout and deadline. Every test runs on tokio's paused clock.

use breaker_core::adaptive::{AdaptiveLimitPolicy, LimitAlgorithm};
use breaker_core::breaker::{BreakerPolicy, State};
use breaker_core::bulkhead::BulkheadPolicy;
use breaker_core::clock::Clock;
use breaker_core::hedge::HedgePolicy;
use breaker_core::layer::{Layer, OrderError};
use breaker_core::pipeline::{BuildError, Pipeline, PipelineBuilder};
use breaker_core::policy::{Policy, Rule};
use breaker_core::ratelimit::{RateLimitPolicy, RateLimited};
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use breaker_core::throttle::ThrottlePolicy;
use breaker_core::timeout::TimeoutKind;
use breaker_core::{Error, Rejection};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::{sleep, Instant};

#[derive(Debug, PartialEq)]
struct Boom;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn consecutive(n: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(n),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

fn no_delay(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        backoff: Backoff::Fixed {
            delay: Duration::ZERO,
        },
        jitter: Jitter::None,
    }
}

fn builder() -> PipelineBuilder {
    Pipeline::builder().clock(Clock::tokio()).seed(1)
}

/// Counts the attempt futures dropped, finished or not.
struct Dropped<'a>(&'a AtomicU32);
impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

// --- rate limit ---

#[tokio::test(start_paused = true)]
async fn a_rate_limited_call_is_rejected_with_the_time_to_the_next_permit() {
    let pipeline = builder()
        .breaker_policy(consecutive(1))
        .rate_limit(RateLimitPolicy::per_second(10).burst(1))
        .build()
        .unwrap();
    assert_eq!(pipeline.order(), [Layer::Breaker, Layer::RateLimit]);
    let calls = AtomicU32::new(0);
    let op = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Boom>(())
    };
    pipeline.call(op).await.unwrap();
    let err = pipeline.call(op).await.unwrap_err();
    let rejection = err.rejection().unwrap();
    assert_eq!(
        *rejection,
        Rejection::RateLimited(RateLimited {
            retry_after: ms(100),
            waited: Duration::ZERO
        })
    );
    assert_eq!(rejection.retry_after(), Some(ms(100)));
    assert_eq!(rejection.layer(), Layer::RateLimit);
    // The dependency was not called, and the breaker (outside the limit) did not count the
    // rejection as a failure of it: a breaker of one failure is still closed.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(pipeline.breaker().unwrap().state(), State::Closed);
    sleep(ms(100)).await;
    pipeline.call(op).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_with_a_wait_spaces_calls_out() {
    let pipeline = builder()
        .rate_limit(RateLimitPolicy::per_second(10).burst(1).max_wait(ms(500)))
        .build()
        .unwrap();
    let start = Instant::now();
    for _ in 0..4 {
        pipeline.call(|| async { Ok::<_, Boom>(()) }).await.unwrap();
    }
    assert_eq!(start.elapsed(), ms(300));
}

/// The deadline bounds the wait: a permit due after it is refused at once.
#[tokio::test(start_paused = true)]
async fn a_rate_limit_wait_never_outlasts_the_deadline() {
    let pipeline = builder()
        .rate_limit(
            RateLimitPolicy::per_second(1)
                .burst(1)
                .max_wait(Duration::from_secs(5)),
        )
        .deadline(ms(300))
        .build()
        .unwrap();
    pipeline.call(|| async { Ok::<_, Boom>(()) }).await.unwrap();
    let start = Instant::now();
    let err = pipeline
        .call(|| async { Ok::<_, Boom>(()) })
        .await
        .unwrap_err();
    assert!(matches!(err.rejection(), Some(Rejection::RateLimited(_))));
    assert_eq!(start.elapsed(), Duration::ZERO);
}

/// A rate-limit rejection is a local rejection: retry around it does not retry it.
#[tokio::test(start_paused = true)]
async fn retry_does_not_retry_a_rate_limit_rejection() {
    let pipeline = builder()
        .retry(no_delay(3))
        .idempotent(true)
        .rate_limit(RateLimitPolicy::per_second(1).burst(1))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let op = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<(), _>(Boom)
    };
    // The first attempt fails and is retried; the retry finds no permit and stops there.
    let err = pipeline.call(op).await.unwrap_err();
    assert!(matches!(err.rejection(), Some(Rejection::RateLimited(_))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// --- hedging ---

fn hedged(order: Option<&[Layer]>) -> PipelineBuilder {
    let b = builder()
        .breaker_policy(consecutive(2))
        .hedge(HedgePolicy::after(ms(50)))
        .idempotent(true);
    match order {
        Some(o) => b.order(o.iter().copied()),
        None => b,
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_answers_for_a_slow_first_attempt_and_the_loser_is_cancelled() {
    let pipeline = hedged(None).build().unwrap();
    assert_eq!(pipeline.order(), [Layer::Breaker, Layer::Hedge]);
    let (started, dropped) = (AtomicU32::new(0), AtomicU32::new(0));
    let start = Instant::now();
    let r = pipeline
        .call(|| {
            let n = started.fetch_add(1, Ordering::SeqCst);
            let guard = Dropped(&dropped);
            async move {
                let _guard = guard;
                sleep(ms(if n == 0 { 5_000 } else { 20 })).await;
                Ok::<_, Boom>(n)
            }
        })
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(start.elapsed(), ms(70));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2,
        "the slow attempt was dropped"
    );
}

/// `breaker > hedge` (the default): the breaker sees one outcome per hedged group. Two
/// attempts that both fail are one failure, so a breaker of 2 consecutive failures stays
/// closed after one call.
#[tokio::test(start_paused = true)]
async fn a_breaker_outside_the_hedge_sees_one_outcome_per_call() {
    let pipeline = hedged(None).build().unwrap();
    let calls = AtomicU32::new(0);
    let op = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        sleep(ms(10)).await;
        Err::<(), _>(Boom)
    };
    assert_eq!(pipeline.call(op).await, Err(Error::Inner(Boom)));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the failure sent the hedge at once"
    );
    assert_eq!(pipeline.breaker().unwrap().state(), State::Closed);
    assert_eq!(pipeline.call(op).await, Err(Error::Inner(Boom)));
    assert_eq!(pipeline.breaker().unwrap().state(), State::Open);
}

/// `hedge > breaker`: each hedge is an attempt the breaker sees, with its own permit. Two
/// failed attempts of one call open a breaker of 2; the loser of a won race is a
/// cancellation, which the breaker does not count.
#[tokio::test(start_paused = true)]
async fn a_breaker_inside_the_hedge_sees_each_attempt() {
    let pipeline = hedged(Some(&[Layer::Hedge, Layer::Breaker]))
        .totals(true)
        .build()
        .unwrap();
    let started = AtomicU32::new(0);
    let r = pipeline
        .call(|| {
            let n = started.fetch_add(1, Ordering::SeqCst);
            async move {
                sleep(ms(if n == 0 { 1_000 } else { 10 })).await;
                Ok::<_, Boom>(n)
            }
        })
        .await;
    assert_eq!(r, Ok(1));
    let totals = pipeline.breaker().unwrap().snapshot().totals.unwrap();
    assert_eq!(
        (
            totals.admitted,
            totals.succeeded,
            totals.cancelled,
            totals.failed
        ),
        (2, 1, 1, 0)
    );
    let err = pipeline
        .call(|| async {
            sleep(ms(10)).await;
            Err::<(), _>(Boom)
        })
        .await;
    assert_eq!(err, Err(Error::Inner(Boom)));
    assert_eq!(pipeline.breaker().unwrap().state(), State::Open);
    // Open inside the hedge: every attempt is refused, and the call ends with the refusal.
    let err = pipeline
        .call(|| async { Ok::<_, Boom>(9) })
        .await
        .unwrap_err();
    assert!(matches!(err.rejection(), Some(Rejection::Breaker(_))));
}

/// `hedge > timeout`: each hedge has its own timeout (a hedge sent at 50 ms may run its full
/// 100 ms). `timeout > hedge`: one limit for the group, and no hedge starts at or after it.
#[tokio::test(start_paused = true)]
async fn a_timeout_inside_the_hedge_limits_each_attempt_and_outside_the_group() {
    let op = |started: &AtomicU32| {
        let n = started.fetch_add(1, Ordering::SeqCst);
        async move {
            sleep(ms(if n == 0 { 1_000 } else { 90 })).await;
            Ok::<_, Boom>(n)
        }
    };
    let inside = hedged(Some(&[Layer::Breaker, Layer::Hedge, Layer::Timeout]))
        .timeout(ms(100))
        .build()
        .unwrap();
    let started = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(inside.call(|| op(&started)).await, Ok(1));
    assert_eq!(start.elapsed(), ms(140));

    let outside = hedged(Some(&[Layer::Breaker, Layer::Timeout, Layer::Hedge]))
        .timeout(ms(100))
        .build()
        .unwrap();
    let started = AtomicU32::new(0);
    let start = Instant::now();
    let err = outside.call(|| op(&started)).await.unwrap_err();
    assert_eq!(err.timeout(), Some(TimeoutKind::Attempt));
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

/// A deadline shorter than the hedge delay: no hedge is ever sent.
#[tokio::test(start_paused = true)]
async fn no_hedge_starts_past_the_deadline() {
    let pipeline = hedged(None).deadline(ms(40)).build().unwrap();
    let started = AtomicU32::new(0);
    let err = pipeline
        .call(|| {
            started.fetch_add(1, Ordering::SeqCst);
            async {
                sleep(ms(1_000)).await;
                Ok::<_, Boom>(())
            }
        })
        .await
        .unwrap_err();
    assert_eq!(err.timeout(), Some(TimeoutKind::Deadline));
    assert_eq!(started.load(Ordering::SeqCst), 1);
}

/// `retry > hedge`: each retry attempt is one hedged group of up to two attempts.
#[tokio::test(start_paused = true)]
async fn retry_around_the_hedge_retries_whole_groups() {
    let pipeline = builder()
        .retry(no_delay(2))
        .hedge(HedgePolicy::after(ms(50)))
        .idempotent(true)
        .build()
        .unwrap();
    assert_eq!(pipeline.order(), [Layer::Retry, Layer::Hedge]);
    let calls = AtomicU32::new(0);
    let err = pipeline
        .call(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(Boom)
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::GaveUp { attempts: 2, .. }));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// The same guard as retry: an operation not declared idempotent is never hedged. A pipeline
/// that hedges one is refused when built, whether `idempotent(false)` was said or nothing
/// was (it used to build and silently make one attempt), as a policy that hedges one is.
#[tokio::test(start_paused = true)]
async fn only_idempotent_operations_are_hedged() {
    for stated in [Some(false), None] {
        let mut b = builder().hedge(HedgePolicy::after(ms(50)));
        if let Some(i) = stated {
            b = b.idempotent(i);
        }
        let e = b.build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid policy: `hedge`: hedging sends a call more than once, but only operations \
             declared idempotent are hedged and this pipeline is not; call `.idempotent(true)` on the \
             builder, or remove the hedge",
            "{stated:?}"
        );
    }
    assert!(builder()
        .hedge(HedgePolicy::after(ms(50)))
        .idempotent(true)
        .build()
        .is_ok());

    let policy = Policy {
        hedge: Some(HedgePolicy::after(ms(50))),
        ..Policy::default()
    };
    let err = policy.validate().unwrap_err();
    assert_eq!(err.errors.len(), 1);
    assert_eq!(err.errors[0].rule, Rule::Idempotent);
    assert!(Pipeline::from_policy(&policy).is_err());
}

#[test]
fn hedge_outside_retry_is_an_order_that_cannot_work() {
    let err = Pipeline::builder()
        .retry(no_delay(2))
        .hedge(HedgePolicy::after(ms(50)))
        .idempotent(true)
        .order([Layer::Hedge, Layer::Retry])
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        BuildError::Order(OrderError::HedgeOutsideRetry { at: 0, inner: 1 })
    ));
    assert!(
        err.to_string().contains("put `hedge` inside `retry`"),
        "{err}"
    );
}

/// Permits taken inside the hedge layer are released by the losers: a bulkhead of 2 inside
/// the hedge is free again once the call returns.
#[tokio::test(start_paused = true)]
async fn losing_hedges_release_their_permits() {
    let pipeline = hedged(Some(&[
        Layer::Breaker,
        Layer::Hedge,
        Layer::Bulkhead,
        Layer::Adaptive,
    ]))
    .bulkhead_policy(BulkheadPolicy {
        max_concurrent: 2,
        max_wait: Duration::ZERO,
    })
    .adaptive_limit(AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 10).initial(5))
    .build()
    .unwrap();
    let started = AtomicU32::new(0);
    let r = pipeline
        .call(|| {
            let n = started.fetch_add(1, Ordering::SeqCst);
            async move {
                sleep(ms(if n == 0 { 1_000 } else { 10 })).await;
                Ok::<_, Boom>(n)
            }
        })
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(pipeline.bulkhead().unwrap().available(), 2);
    let adaptive = pipeline.adaptive_limiter().unwrap();
    assert_eq!(adaptive.in_flight(), 0);
}

// --- adaptive limit ---

#[tokio::test(start_paused = true)]
async fn the_adaptive_limit_rejects_over_its_limit_and_learns_from_outcomes() {
    let pipeline = builder()
        .adaptive_limit(AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 10).initial(2))
        .build()
        .unwrap();
    let slow = || async {
        sleep(ms(100)).await;
        Ok::<_, Boom>(())
    };
    let (a, b, c) = tokio::join!(pipeline.call(slow), pipeline.call(slow), async {
        pipeline.call(slow).await
    });
    assert_eq!((a, b), (Ok(()), Ok(())));
    assert!(matches!(
        c.unwrap_err().rejection(),
        Some(Rejection::Limit(l)) if l.limit == 2 && l.in_flight == 2
    ));
    // Both admitted calls ran with the limit fully used: each raised it by one.
    let limiter = pipeline.adaptive_limiter().unwrap();
    assert_eq!(limiter.limit(), 3);
    // A failure is a drop: 3 × 0.9 rounds down to 2.
    let _ = pipeline.call(|| async { Err::<(), _>(Boom) }).await;
    assert_eq!(limiter.limit(), 2);
}

// --- throttling ---

/// A dependency that rejects everything: throttling sheds calls locally, and a breaker
/// outside it does not count its local rejections as failures of the dependency.
#[tokio::test(start_paused = true)]
async fn throttling_sheds_calls_an_overloaded_dependency_rejects() {
    let pipeline = builder()
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(1_000),
            ..consecutive(1_000)
        })
        .totals(true)
        .throttle(ThrottlePolicy::default())
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let mut throttled = 0;
    for _ in 0..100 {
        let r = pipeline
            .call(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(Boom)
            })
            .await;
        if let Err(Error::Rejected(Rejection::Throttled(t))) = &r {
            assert!(t.probability() > 0.0);
            throttled += 1;
        }
    }
    let reached = calls.load(Ordering::SeqCst);
    assert_eq!(reached + throttled, 100);
    assert!(throttled > 80, "{throttled} of 100 shed locally");
    let totals = pipeline.breaker().unwrap().snapshot().totals.unwrap();
    assert_eq!(totals.failed, u64::from(reached));
    assert_eq!(totals.ignored, throttled as u64);
}

/// The same layers as tower middleware: a `PolicyLayer` of a policy with a hedge and a rate
/// limit hedges a slow first call to a clone of the service.
#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn a_tower_policy_layer_hedges_and_rate_limits() {
    use breaker_core::tower::policy::PolicyLayer;
    use tower::{service_fn, Layer as _, ServiceExt};
    let policy = Policy {
        hedge: Some(HedgePolicy::after(ms(50))),
        rate_limit: Some(RateLimitPolicy::per_second(1).burst(2)),
        idempotent: true,
        ..Policy::default()
    };
    let started = std::sync::Arc::new(AtomicU32::new(0));
    let counter = std::sync::Arc::clone(&started);
    let svc = PolicyLayer::new(&policy)
        .unwrap()
        .layer(service_fn(move |n: u32| {
            let attempt = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                sleep(ms(if attempt == 0 { 5_000 } else { 10 })).await;
                Ok::<_, std::io::Error>(n * 2)
            }
        }));
    let start = Instant::now();
    assert_eq!(svc.clone().oneshot(21).await.unwrap(), 42);
    assert_eq!(start.elapsed(), ms(60));
    // Both attempts took a permit of the burst of 2: the next call is refused.
    let err = svc.oneshot(1).await.unwrap_err();
    assert!(matches!(err.rejection(), Some(Rejection::RateLimited(_))));
    assert_eq!(started.load(Ordering::SeqCst), 2);
}
