//! `BreakerLayer` / `BreakerService` (feature `tower`): admission in `call`, nothing reserved
//! by `poll_ready`, classification, cancellation, and the `'static` response future.
#![cfg(feature = "tower")]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State};
use breaker_core::classify::from_fn;
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::error::Rejection;
use breaker_core::tower::breaker::BreakerLayer;
use breaker_core::{Error, Outcome};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

fn breaker(time: &ManualClock, probes: u32) -> CircuitBreaker {
    CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(2),
        cooldown: Duration::from_secs(5),
        cooldown_max: Duration::from_secs(5),
        half_open_probes: probes,
        ..BreakerPolicy::default()
    })
    .name("svc")
    .clock(Clock::manual(time))
    .totals(true)
    .build()
    .unwrap()
}

/// A service that counts its invocations; `Err` for negative requests.
fn counting(calls: &Arc<AtomicU32>) -> impl Service<i32, Response = i32, Error = String> + Clone {
    let calls = Arc::clone(calls);
    service_fn(move |n: i32| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 0 {
                Err(format!("bad {n}"))
            } else {
                Ok(n)
            }
        }
    })
}

fn is_static<T: 'static>(_: &T) {}

#[tokio::test]
async fn open_breaker_rejects_without_calling_the_inner_service() {
    let time = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let svc = BreakerLayer::new(breaker(&time, 1)).layer(counting(&calls));

    assert_eq!(svc.clone().oneshot(1).await, Ok(1));
    assert_eq!(
        svc.clone().oneshot(-1).await,
        Err(Error::Inner("bad -1".to_string()))
    );
    assert!(svc.clone().oneshot(-2).await.is_err());
    assert_eq!(svc.breaker().state(), State::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    for _ in 0..5 {
        match svc.clone().oneshot(7).await {
            Err(Error::Rejected(Rejection::Breaker(r))) => {
                assert_eq!(r.reason(), RejectReason::Open);
                assert_eq!(r.retry_after(), Some(Duration::from_secs(5)));
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "inner service never called while open"
    );

    time.advance(Duration::from_secs(5));
    assert_eq!(svc.clone().oneshot(2).await, Ok(2)); // the probe closes it
    assert_eq!(svc.breaker().state(), State::Closed);
}

#[tokio::test]
async fn poll_ready_reserves_no_permit_and_clones_share_the_probe_limit() {
    let time = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let layer = BreakerLayer::new(breaker(&time, 1));
    let mut a = layer.layer(counting(&calls));
    let mut b = layer.layer(counting(&calls));
    for _ in 0..2 {
        layer.breaker().try_acquire().unwrap().failure();
    }
    time.advance(Duration::from_secs(5));

    // Both services are ready; readiness took nothing from the breaker.
    a.ready().await.unwrap();
    b.ready().await.unwrap();
    assert_eq!(layer.breaker().snapshot().probes_in_flight, 0);

    // b's call takes the single probe slot (the breaker goes half-open) ...
    let fb = b.call(5);
    assert_eq!(layer.breaker().state(), State::HalfOpen);
    assert_eq!(layer.breaker().snapshot().probes_in_flight, 1);
    // ... so a's call is rejected although a was ready first.
    match a.call(6).await {
        Err(Error::Rejected(Rejection::Breaker(r))) => {
            assert_eq!(r.reason(), RejectReason::HalfOpenFull)
        }
        other => panic!("expected half_open_full, got {other:?}"),
    }
    assert_eq!(fb.await, Ok(5));
    assert_eq!(layer.breaker().state(), State::Closed);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dropped_response_future_releases_the_probe_and_records_nothing() {
    let time = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = BreakerLayer::new(breaker(&time, 1)).layer(counting(&calls));
    for _ in 0..2 {
        svc.breaker().try_acquire().unwrap().failure();
    }
    time.advance(Duration::from_secs(5));

    svc.ready().await.unwrap();
    let probe = svc.call(1); // admitted, never polled
    is_static(&probe);
    assert_eq!(svc.breaker().snapshot().probes_in_flight, 1);
    drop(probe);
    let snap = svc.breaker().snapshot();
    assert_eq!(snap.state, State::HalfOpen);
    assert_eq!(snap.probes_in_flight, 0);
    assert_eq!(snap.probe_successes, 0);
    assert_eq!(snap.totals.unwrap().cancelled, 1);

    assert_eq!(svc.oneshot(3).await, Ok(3)); // admitted as the next probe
}

#[tokio::test]
async fn classifier_decides_the_outcome() {
    let time = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    // Negative requests are "client errors": neutral, never trip the breaker.
    let svc = BreakerLayer::new(breaker(&time, 1))
        .with_classifier(from_fn(|r: Result<&i32, &String>| match r {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Ignored,
        }))
        .layer(counting(&calls));
    for i in 1..=10 {
        assert!(svc
            .clone()
            .oneshot(-i)
            .await
            .unwrap_err()
            .into_inner()
            .is_some());
    }
    assert_eq!(svc.breaker().state(), State::Closed);
    assert_eq!(svc.breaker().snapshot().totals.unwrap().ignored, 10);
}

#[test]
fn errors_display_and_chain() {
    use std::error::Error as _;
    let time = ManualClock::new();
    let b = breaker(&time, 1);
    b.force_open();
    let rejected = b.try_acquire().unwrap_err();
    let e: Error<std::io::Error> = Error::Rejected(Rejection::Breaker(rejected));
    assert_eq!(e.to_string(), "circuit breaker `svc` was forced open");
    assert!(e.rejection().is_some());
    // The inner error is displayed as itself (it used to be hidden behind "the guarded
    // service failed"), so its own sources follow it, not itself again.
    let e: Error<std::io::Error> = Error::Inner(std::io::Error::other("boom"));
    assert_eq!(e.to_string(), "boom");
    assert!(e.source().is_none());
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn service_counts_outcomes_cancellations_and_rejections() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let time = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    // Counters are registered when the layer is made, with the recorder of that moment.
    let mut svc = metrics::with_local_recorder(&recorder, || {
        BreakerLayer::new(breaker(&time, 1)).layer(counting(&calls))
    });
    svc.ready().await.unwrap();
    svc.call(1).await.unwrap();
    svc.ready().await.unwrap();
    drop(svc.call(2)); // cancelled
    for _ in 0..2 {
        svc.ready().await.unwrap();
        svc.call(-1).await.unwrap_err();
    }
    svc.ready().await.unwrap();
    svc.call(3).await.unwrap_err(); // rejected: open

    let mut got: Vec<(String, u64)> = recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(k, _, _, v)| match v {
            DebugValue::Counter(n) if n > 0 => {
                let labels: Vec<String> = k.key().labels().map(|l| l.value().to_string()).collect();
                Some((format!("{} {}", k.key().name(), labels.join(" ")), n))
            }
            _ => None,
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("breaker_calls_total svc cancelled".to_string(), 1),
            ("breaker_calls_total svc failure".to_string(), 2),
            ("breaker_calls_total svc success".to_string(), 1),
            ("breaker_rejections_total svc open".to_string(), 1),
        ]
    );
}
