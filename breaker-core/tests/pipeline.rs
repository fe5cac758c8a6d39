//! Pipeline composition: declared orders, what each layer sees, order validation, errors.
//! Every test runs on tokio's paused clock.

use breaker_core::breaker::{BreakerPolicy, State};
use breaker_core::bulkhead::{Bulkhead, BulkheadPolicy};
use breaker_core::clock::Clock;
use breaker_core::layer::Layer;
use breaker_core::pipeline::{BuildError, Pipeline, PipelineBuilder};
use breaker_core::policy::Policy;
use breaker_core::retry::{Backoff, GiveUpReason, Jitter, RetryPolicy};
use breaker_core::timeout::TimeoutKind;
use breaker_core::{Error, Rejection};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq)]
struct Boom;

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}

impl std::error::Error for Boom {}

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

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Runs one logical call whose every attempt fails, counting invocations.
async fn failing_call(p: &Pipeline, calls: &AtomicU32) -> Result<(), Error<Boom>> {
    p.call(|| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(Boom) }
    })
    .await
}

/// BR-42 (a): retry declared outside the breaker. The breaker sees one outcome per attempt,
/// trips at the 5th attempt (2nd logical call), and its rejection is never retried.
#[tokio::test(start_paused = true)]
async fn br_42_retry_outside_breaker_counts_attempts_and_stops_on_rejection() {
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(consecutive(5))
        .clock(Clock::tokio())
        .retry(no_delay(3))
        .idempotent(true)
        .order([Layer::Retry, Layer::Breaker])
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);

    let r1 = failing_call(&p, &calls).await.unwrap_err();
    assert!(matches!(
        r1,
        Error::GaveUp { attempts: 3, reason: GiveUpReason::AttemptsExhausted, ref last }
            if matches!(**last, Error::Inner(Boom))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(p.breaker().unwrap().state(), State::Closed);

    let r2 = failing_call(&p, &calls).await.unwrap_err();
    assert!(
        matches!(r2, Error::Rejected(Rejection::Breaker(_))),
        "{r2:?}"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "tripped at the 5th attempt"
    );
    assert_eq!(p.breaker().unwrap().state(), State::Open);

    for _ in 0..2 {
        let r = failing_call(&p, &calls).await.unwrap_err();
        assert!(matches!(r, Error::Rejected(Rejection::Breaker(_))));
        assert_eq!(r.attempts(), 0);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    let totals = p.breaker().unwrap().snapshot().totals.unwrap();
    assert_eq!((totals.failed, totals.rejected), (5, 3));
}

/// BR-42 (b): breaker declared outside retry. One outcome per logical call: 4 failures, still
/// closed, 12 invocations.
#[tokio::test(start_paused = true)]
async fn br_42_breaker_outside_retry_counts_logical_calls() {
    let p = Pipeline::builder()
        .totals(true)
        .breaker_policy(consecutive(5))
        .clock(Clock::tokio())
        .retry(no_delay(3))
        .idempotent(true)
        .order([Layer::Breaker, Layer::Retry])
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    for _ in 0..4 {
        let e = failing_call(&p, &calls).await.unwrap_err();
        assert_eq!(e.give_up_reason(), Some(GiveUpReason::AttemptsExhausted));
        assert_eq!(e.attempts(), 3);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 12);
    let b = p.breaker().unwrap();
    assert_eq!(b.state(), State::Closed);
    let snap = b.snapshot();
    assert_eq!(snap.consecutive_failures, 4);
    assert_eq!(snap.totals.unwrap().failed, 4);
}

/// BR-42, the table: both orders, exact invocations and breaker state.
#[tokio::test(start_paused = true)]
async fn br_42_order_table() {
    let table = [
        ([Layer::Retry, Layer::Breaker], 5, State::Open),
        ([Layer::Breaker, Layer::Retry], 12, State::Closed),
    ];
    for (order, invocations, state) in table {
        let p = Pipeline::builder()
            .breaker_policy(consecutive(5))
            .clock(Clock::tokio())
            .retry(no_delay(3))
            .idempotent(true)
            .order(order)
            .build()
            .unwrap();
        let calls = AtomicU32::new(0);
        for _ in 0..4 {
            let _ = failing_call(&p, &calls).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), invocations, "{order:?}");
        assert_eq!(p.breaker().unwrap().state(), state, "{order:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn default_order_is_bulkhead_retry_breaker_timeout() {
    let p = Pipeline::builder()
        .timeout(secs(1))
        .breaker_policy(consecutive(5))
        .retry(no_delay(3))
        .idempotent(true)
        .bulkhead_policy(BulkheadPolicy {
            max_concurrent: 2,
            max_wait: Duration::ZERO,
        })
        .build()
        .unwrap();
    assert_eq!(
        p.order(),
        [
            Layer::Bulkhead,
            Layer::Retry,
            Layer::Breaker,
            Layer::Timeout
        ]
    );
    let p = Pipeline::builder()
        .timeout(secs(1))
        .retry(no_delay(3))
        .idempotent(true)
        .build()
        .unwrap();
    assert_eq!(p.order(), [Layer::Retry, Layer::Timeout]);
}

#[test]
fn from_policy_uses_default_or_declared_order() {
    let mut policy = Policy {
        breaker: Some(consecutive(5)),
        retry: Some(no_delay(3)),
        timeout: Some(secs(1)),
        deadline: Some(secs(10)),
        // A 3x retry in a policy is refused unless the policy is idempotent (case BR-35).
        idempotent: true,
        ..Policy::default()
    };
    let p = Pipeline::from_policy(&policy).unwrap();
    assert_eq!(p.order(), [Layer::Retry, Layer::Breaker, Layer::Timeout]);
    policy.order = Some(vec![Layer::Breaker, Layer::Timeout, Layer::Retry]);
    let p = Pipeline::from_policy(&policy).unwrap();
    assert_eq!(p.order(), [Layer::Breaker, Layer::Timeout, Layer::Retry]);
}

#[test]
fn invalid_orders_are_errors() {
    let base = || {
        Pipeline::builder()
            .breaker_policy(consecutive(5))
            .retry(no_delay(3))
            .idempotent(true)
    };
    let e = base()
        .order([Layer::Retry, Layer::Breaker, Layer::Retry])
        .build()
        .unwrap_err();
    assert!(matches!(e, BuildError::DuplicateLayer(Layer::Retry)));
    assert_eq!(
        e.to_string(),
        "layer `retry` appears more than once in the order"
    );

    let e = base()
        .order_names(["retry", "circuit", "breaker"])
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown layer `circuit`; expected one of `bulkhead`, `retry`, `breaker`, `hedge`, \
         `throttle`, `rate`, `adaptive`, `timeout`"
    );

    let e = base()
        .order([Layer::Retry, Layer::Breaker, Layer::Timeout])
        .build()
        .unwrap_err();
    assert!(matches!(e, BuildError::NotConfigured(Layer::Timeout)));
    assert_eq!(
        e.to_string(),
        "layer `timeout` is in the order but not configured"
    );

    let e = base().order([Layer::Breaker]).build().unwrap_err();
    assert!(matches!(e, BuildError::MissingFromOrder(Layer::Retry)));

    let ok = base().order_names(["breaker", "retry"]).build().unwrap();
    assert_eq!(ok.order(), [Layer::Breaker, Layer::Retry]);
}

#[test]
fn invalid_values_are_errors() {
    let e = Pipeline::builder()
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.to_string(), "invalid `timeout`: must be non-zero");
    let e = Pipeline::builder()
        .timeout(secs(5))
        .deadline(secs(1))
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid `deadline`: must be at least the timeout"
    );
    let e = Pipeline::builder().retry(no_delay(0)).build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid `retry.max_attempts`: must be at least 1"
    );
    let e = Pipeline::builder()
        .bulkhead_policy(BulkheadPolicy {
            max_concurrent: 0,
            max_wait: Duration::ZERO,
        })
        .build()
        .unwrap_err();
    assert!(matches!(e, BuildError::Bulkhead(_)));
    let e = PipelineBuilder::default()
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(0),
            ..BreakerPolicy::default()
        })
        .build()
        .unwrap_err();
    assert!(matches!(e, BuildError::Breaker(_)));
}

/// A timeout layer placed outside retry bounds all attempts and sleeps: attempts at 0, 4 and
/// 8 s; the next 3 s sleep would end at 12 s, past the 10 s limit.
#[tokio::test(start_paused = true)]
async fn timeout_outside_retry_bounds_the_whole_loop() {
    let p = Pipeline::builder()
        .timeout(secs(10))
        .retry(RetryPolicy {
            max_attempts: 100,
            backoff: Backoff::Fixed { delay: secs(3) },
            jitter: Jitter::None,
        })
        .idempotent(true)
        .order([Layer::Timeout, Layer::Retry])
        .build()
        .unwrap();
    let start = Instant::now();
    let starts = std::sync::Mutex::new(Vec::new());
    let e = p
        .call(|| {
            starts.lock().unwrap().push(start.elapsed());
            async {
                tokio::time::sleep(secs(1)).await;
                Err::<(), _>(Boom)
            }
        })
        .await
        .unwrap_err();
    assert_eq!(*starts.lock().unwrap(), [secs(0), secs(4), secs(8)]);
    assert_eq!(
        e.give_up_reason(),
        Some(GiveUpReason::DeadlineExhausted {
            next_delay: secs(3),
            remaining: secs(1)
        })
    );
    assert_eq!(start.elapsed(), secs(9));
}

/// Our timeout is a breaker failure in every order, the timeout layer outside the breaker
/// included; the caller dropping the call is a cancellation.
#[tokio::test(start_paused = true)]
async fn timeout_is_a_breaker_failure_in_every_order_and_drop_is_a_cancellation() {
    for order in [
        [Layer::Breaker, Layer::Timeout],
        [Layer::Timeout, Layer::Breaker],
    ] {
        let p = Pipeline::builder()
            .totals(true)
            .breaker_policy(consecutive(5))
            .clock(Clock::tokio())
            .timeout(secs(1))
            .order(order)
            .build()
            .unwrap();
        let e = p
            .call(|| async {
                tokio::time::sleep(secs(5)).await;
                Ok::<(), Boom>(())
            })
            .await
            .unwrap_err();
        assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
        assert_eq!(e.to_string(), "attempt timed out after 1s");
        let t = p.breaker().unwrap().snapshot().totals.unwrap();
        assert_eq!((t.failed, t.cancelled), (1, 0), "{order:?}");

        // The caller gives up after 500 ms: a cancellation, not a failure.
        let call = p.call(|| async {
            tokio::time::sleep(secs(5)).await;
            Ok::<(), Boom>(())
        });
        assert!(tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err());
        let t = p.breaker().unwrap().snapshot().totals.unwrap();
        assert_eq!((t.failed, t.cancelled), (1, 1), "{order:?}");
    }
}

/// The total deadline ends an attempt that the per-attempt timeout would have let run, and is
/// reported as the deadline; it is not retried.
#[tokio::test(start_paused = true)]
async fn deadline_cuts_an_attempt_and_is_not_retried() {
    let p = Pipeline::builder()
        .retry(no_delay(5))
        .idempotent(true)
        .timeout(secs(4))
        .deadline(secs(6))
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let e = p
        .call(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(secs(100)).await;
                Ok::<(), Boom>(())
            }
        })
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Timeout(t) if t.kind == TimeoutKind::Deadline && t.after == secs(6))
    );
    assert_eq!(e.to_string(), "deadline of 6s elapsed");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "timed out at 4 s, cut at 6 s"
    );
    assert_eq!(start.elapsed(), secs(6));
}

/// A full bulkhead is a local rejection; a bounded wait admits the call when a slot frees.
#[tokio::test(start_paused = true)]
async fn bulkhead_rejects_when_full_and_waits_when_allowed() {
    for (max_wait, expect_ok) in [(Duration::ZERO, false), (secs(2), true)] {
        let bulkhead = Bulkhead::new(BulkheadPolicy {
            max_concurrent: 1,
            max_wait,
        })
        .unwrap();
        let p = Pipeline::builder()
            .bulkhead(bulkhead.clone())
            .build()
            .unwrap();
        let first = p.call(|| async {
            tokio::time::sleep(secs(1)).await;
            Ok::<u32, Boom>(1)
        });
        let second = async {
            tokio::task::yield_now().await;
            assert_eq!(bulkhead.available(), 0);
            p.call(|| async { Ok::<u32, Boom>(2) }).await
        };
        let (a, b) = tokio::join!(first, second);
        assert_eq!(a.unwrap(), 1);
        if expect_ok {
            assert_eq!(b.unwrap(), 2);
        } else {
            let e = b.unwrap_err();
            assert!(matches!(e, Error::Rejected(Rejection::Bulkhead(_))));
            assert_eq!(e.rejection().unwrap().layer(), Layer::Bulkhead);
            assert_eq!(e.to_string(), "bulkhead full: 1 calls in flight");
        }
        assert_eq!(bulkhead.available(), 1);
    }
}

/// A bulkhead wait is bounded by the deadline too, and reported as the deadline.
#[tokio::test(start_paused = true)]
async fn bulkhead_wait_is_bounded_by_the_deadline() {
    let bulkhead = Bulkhead::new(BulkheadPolicy {
        max_concurrent: 1,
        max_wait: secs(10),
    })
    .unwrap();
    let p = Pipeline::builder()
        .bulkhead(bulkhead.clone())
        .deadline(secs(3))
        .build()
        .unwrap();
    let _held = bulkhead.try_acquire().unwrap();
    let start = Instant::now();
    let e = p.call(|| async { Ok::<(), Boom>(()) }).await.unwrap_err();
    assert_eq!(e.timeout(), Some(TimeoutKind::Deadline));
    assert_eq!(start.elapsed(), secs(3));
}

/// Errors keep the layers apart, display in lowercase and chain their sources.
#[tokio::test(start_paused = true)]
async fn error_display_and_source_chain() {
    let p = Pipeline::builder()
        .retry(no_delay(3))
        .idempotent(true)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let e = failing_call(&p, &calls).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "gave up after 3 attempts: attempts exhausted; last error: boom"
    );
    let source = std::error::Error::source(&e).unwrap();
    assert_eq!(source.to_string(), "boom");
    assert_eq!(e.inner(), Some(&Boom));
    assert_eq!(e.into_inner(), Some(Boom));
}

/// Clones share the breaker: the probe limit and counts apply across all of them.
#[tokio::test(start_paused = true)]
async fn clones_share_state_and_futures_are_send() {
    let p = Pipeline::builder()
        .breaker_policy(consecutive(2))
        .clock(Clock::tokio())
        .build()
        .unwrap();
    let q = p.clone();
    let task = tokio::spawn(async move { q.call(|| async { Err::<(), _>(Boom) }).await });
    assert!(task.await.unwrap().is_err());
    let _ = p.call(|| async { Err::<(), _>(Boom) }).await;
    assert_eq!(p.breaker().unwrap().state(), State::Open);
    let e = p.call(|| async { Ok::<(), Boom>(()) }).await.unwrap_err();
    assert_eq!(e.rejection().unwrap().retry_after(), Some(secs(30)));
    let _ = Arc::new(p);
}

/// One pipeline, a breaker per key: `call_with_breaker` and `with_breaker` put the key's breaker
/// in the breaker layer's place and leave the pipeline's own breaker alone.
#[tokio::test(start_paused = true)]
async fn a_key_breaker_takes_the_place_of_the_pipeline_breaker() {
    let pipeline = Pipeline::builder()
        .breaker_policy(consecutive(2))
        .clock(Clock::tokio())
        .retry(no_delay(3))
        .idempotent(true)
        .build()
        .unwrap();
    let key = || {
        breaker_core::breaker::CircuitBreaker::builder(consecutive(2))
            .clock(Clock::tokio())
            .build()
            .unwrap()
    };
    let (key_a, key_b) = (key(), key());
    let class = breaker_core::pipeline::AllErrors;
    let calls = AtomicU32::new(0);
    let fail = || async {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<(), _>(Boom)
    };
    // Key A: 2 failed attempts trip its breaker; the 3rd attempt is rejected, not made.
    let r = pipeline.call_with_breaker(&key_a, &class, fail).await;
    assert!(matches!(r, Err(Error::Rejected(_))), "{r:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(key_a.state(), State::Open);
    // Key B and the pipeline's own breaker saw nothing.
    assert_eq!(key_b.state(), State::Closed);
    assert_eq!(pipeline.breaker().unwrap().state(), State::Closed);
    // The same through `with_breaker`: key B trips, the pipeline's own breaker stays closed.
    let r = pipeline.with_breaker(key_b.clone()).call(fail).await;
    assert!(matches!(r, Err(Error::Rejected(_))), "{r:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(key_b.state(), State::Open);
    assert_eq!(pipeline.breaker().unwrap().state(), State::Closed);
    // A pipeline without a breaker layer ignores the key's breaker: 3 attempts, no rejection.
    let plain = Pipeline::builder()
        .retry(no_delay(3))
        .idempotent(true)
        .build()
        .unwrap();
    let r = plain.call_with_breaker(&key_a, &class, fail).await;
    assert!(matches!(r, Err(Error::GaveUp { attempts: 3, .. })), "{r:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 7);
}

/// A policy written as a struct literal with a long constant cooldown is valid (the default
/// `cooldown_max` bounds only a growing cooldown), and an invalid one says why in its message.
#[test]
fn build_errors_name_the_field_and_a_long_constant_cooldown_is_valid() {
    let long = Pipeline::builder()
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(3),
            cooldown: Duration::from_secs(600),
            ..BreakerPolicy::default()
        })
        .build();
    assert!(long.is_ok(), "{:?}", long.err());
    let growing = Pipeline::builder()
        .breaker_policy(BreakerPolicy {
            cooldown: Duration::from_secs(600),
            cooldown_multiplier: 2.0,
            ..BreakerPolicy::default()
        })
        .build()
        .unwrap_err();
    assert_eq!(
        growing.to_string(),
        "invalid breaker policy: `cooldown_max`: must be >= cooldown (600s), got 30s"
    );
    assert!(std::error::Error::source(&growing).is_none());
}

/// The pipeline breaker's lifetime totals: (succeeded, failed, cancelled, rejected).
fn outcomes(p: &Pipeline) -> (u64, u64, u64, u64) {
    let t = p.breaker().unwrap().snapshot().totals.unwrap();
    (t.succeeded, t.failed, t.cancelled, t.rejected)
}

/// Two pipelines of `policy` with lifetime totals: one breaker alone (the direct path) and the
/// same with a timeout far beyond any test (the general path, with no outcome changed; as
/// long as the probe wait, the cooldown).
fn both_paths(policy: BreakerPolicy) -> [Pipeline; 2] {
    let builder = || {
        Pipeline::builder()
            .totals(true)
            .breaker_policy(policy.clone())
    };
    let general = builder().timeout(policy.max_probe_wait.unwrap_or(policy.cooldown));
    [builder().build().unwrap(), general.build().unwrap()]
}

/// Both paths record each admitted call's outcome exactly once however it ends: at its first
/// poll, after pending, by an error after pending, or by a panic in the operation (in the
/// closure, in the future's first poll, after pending), which is a failure.
#[tokio::test(start_paused = true)]
async fn every_admitted_call_is_recorded_once_however_it_ends() {
    let [direct, general] = both_paths(consecutive(10));
    for p in [direct, general] {
        assert_eq!(p.call(|| async { Ok::<u32, Boom>(1) }).await.unwrap(), 1);
        let later = p
            .call(|| async {
                tokio::task::yield_now().await;
                Ok::<u32, Boom>(2)
            })
            .await;
        assert_eq!(later.unwrap(), 2);
        let failed_later = p
            .call(|| async {
                tokio::task::yield_now().await;
                Err::<u32, Boom>(Boom)
            })
            .await;
        assert!(matches!(failed_later, Err(Error::Inner(Boom))));
        let spawned = |pipeline: Pipeline, pend: bool| {
            tokio::spawn(async move {
                pipeline
                    .call(move || async move {
                        if pend {
                            tokio::task::yield_now().await;
                        }
                        panic!("the operation panics");
                        #[allow(unreachable_code)]
                        Ok::<u32, Boom>(0)
                    })
                    .await
            })
        };
        assert!(spawned(p.clone(), false).await.unwrap_err().is_panic());
        assert!(spawned(p.clone(), true).await.unwrap_err().is_panic());
        let in_closure = p.clone();
        let closure_panics = tokio::spawn(async move {
            in_closure
                .call(|| -> std::future::Ready<Result<u32, Boom>> { panic!("the closure panics") })
                .await
        });
        assert!(closure_panics.await.unwrap_err().is_panic());
        assert_eq!(outcomes(&p), (2, 4, 0, 0), "{:?}", p.order());
        assert_eq!(p.breaker().unwrap().state(), State::Closed);
    }
}

/// A pipeline of one breaker takes a shorter path than one with more layers; both must give
/// the same results, the same breaker state and totals, and neither may call the operation
/// once the breaker rejects. (A timeout far beyond the test keeps the second pipeline on the
/// general path without changing any outcome.)
#[tokio::test(start_paused = true)]
async fn breaker_only_pipeline_behaves_as_the_general_path() {
    let [direct, general] = both_paths(consecutive(2));
    for p in [&direct, &general] {
        let calls = AtomicU32::new(0);
        let op = |ok: bool| {
            let calls = &calls;
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if ok {
                        Ok::<u32, Boom>(7)
                    } else {
                        Err(Boom)
                    }
                }
            }
        };
        assert_eq!(p.call(op(true)).await.unwrap(), 7);
        assert!(matches!(p.call(op(false)).await, Err(Error::Inner(Boom))));
        // A call dropped after it started is a cancellation, not a failure.
        let pending = p.call(std::future::pending::<Result<u32, Boom>>);
        assert!(tokio::time::timeout(Duration::from_millis(1), pending)
            .await
            .is_err());
        assert_eq!(p.breaker().unwrap().state(), State::Closed);
        assert!(matches!(p.call(op(false)).await, Err(Error::Inner(Boom))));
        assert_eq!(p.breaker().unwrap().state(), State::Open);
        assert!(matches!(
            p.call(op(true)).await,
            Err(Error::Rejected(Rejection::Breaker(_)))
        ));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "a rejected call never runs"
        );
        assert_eq!(outcomes(p), (1, 2, 1, 1));
    }
}
