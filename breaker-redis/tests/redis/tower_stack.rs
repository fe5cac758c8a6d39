//! Shared breakers through tower middleware: a [`BreakerLayer`] over a breaker shared with
//! `store.share(&breaker)`, its responses classified as HTTP ([`HttpClassifier`]: an `Ok` 503
//! is a failure). Two or three "replicas" (one store connection each) on one real server. The
//! layer asks the breaker for an owned permit in `call` and records the response when its
//! future completes, so the fleet's trips, rejections and half-open leases must hold through it
//! as through a `Pipeline` (`pipeline.rs`).
//!
//! [`BreakerLayer`]: breaker_core::tower::BreakerLayer
//! [`HttpClassifier`]: breaker_core::http::HttpClassifier

use crate::common::unique_ns;
use crate::coordinator::{eventually, replica};
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State};
use breaker_core::clock::Clock;
use breaker_core::http::HttpClassifier;
use breaker_core::tower::BreakerLayer;
use breaker_core::{Error, Rejection};
use breaker_redis::Store;
use http::StatusCode;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::{service_fn, BoxError, Layer, Service, ServiceExt};

fn policy(cooldown: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown,
        cooldown_max: cooldown,
        half_open_probes: 1,
        successes_to_close: 1,
        max_probe_wait: Some(Duration::from_secs(30)),
        ..BreakerPolicy::default()
    }
}

/// The inner service's answer: a status after an optional wait, or never.
#[derive(Clone, Copy)]
enum Answer {
    Now(StatusCode),
    After(Duration, StatusCode),
    Never,
}

type Response = Pin<Box<dyn Future<Output = Result<StatusCode, std::io::Error>> + Send>>;
type Svc = tower::util::BoxCloneService<Answer, StatusCode, Error<std::io::Error>>;

/// A replica: its store, its shared breaker, and a tower service guarded by it whose inner
/// service counts the requests that reach it (`reached`) and those in flight at once.
struct Replica {
    store: Store,
    breaker: CircuitBreaker,
    svc: Svc,
    reached: Arc<AtomicUsize>,
}

#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    max: AtomicUsize,
}

async fn replicas(url: &str, ns: &str, n: usize, cooldown: Duration) -> Vec<Replica> {
    replicas_counting(url, ns, n, cooldown, Arc::default()).await
}

async fn replicas_counting(
    url: &str,
    ns: &str,
    n: usize,
    cooldown: Duration,
    in_flight: Arc<InFlight>,
) -> Vec<Replica> {
    let mut out = Vec::new();
    for r in 0..n {
        let store = replica(url, ns, &format!("r{r}"), Clock::system()).await;
        let breaker = CircuitBreaker::builder(policy(cooldown))
            .name("search")
            .build()
            .unwrap();
        // The handle is dropped at once: the breaker itself stays shared.
        drop(store.share(&breaker).unwrap());
        let reached = Arc::new(AtomicUsize::new(0));
        let (count, in_flight) = (Arc::clone(&reached), Arc::clone(&in_flight));
        let inner = service_fn(move |answer: Answer| -> Response {
            // Counted in `call`, when the breaker has admitted the request.
            count.fetch_add(1, Ordering::AcqRel);
            let in_flight = Arc::clone(&in_flight);
            Box::pin(async move {
                let now = in_flight.now.fetch_add(1, Ordering::AcqRel) + 1;
                in_flight.max.fetch_max(now, Ordering::AcqRel);
                let status = match answer {
                    Answer::Now(s) => s,
                    Answer::After(d, s) => {
                        tokio::time::sleep(d).await;
                        s
                    }
                    Answer::Never => std::future::pending().await,
                };
                in_flight.now.fetch_sub(1, Ordering::AcqRel);
                Ok(status)
            })
        });
        let svc = BreakerLayer::new(breaker.clone())
            .with_classifier(HttpClassifier)
            .layer(inner);
        out.push(Replica {
            store,
            breaker,
            svc: tower::util::BoxCloneService::new(svc),
            reached,
        });
    }
    for r in &out {
        r.store.sync().await.unwrap();
    }
    out
}

async fn send(svc: &Svc, answer: Answer) -> Result<StatusCode, Error<std::io::Error>> {
    svc.clone().oneshot(answer).await
}

/// Three 503 responses through one replica's tower service trip the fleet: the caller gets each
/// response, and the other replica's service rejects locally, with the fleet's deadline, without
/// calling its inner service.
#[tokio::test]
async fn ok_503_responses_through_one_replicas_tower_service_open_the_other_replica() {
    let s = server!();
    let ns = unique_ns("tower-trip");
    let fleet = replicas(&s.url(), &ns, 2, Duration::from_secs(30)).await;
    for _ in 0..3 {
        let r = send(&fleet[0].svc, Answer::Now(StatusCode::SERVICE_UNAVAILABLE)).await;
        assert_eq!(r.unwrap(), StatusCode::SERVICE_UNAVAILABLE, "the response");
    }
    assert_eq!(fleet[0].breaker.state(), State::Open, "tripped locally");
    assert_eq!(fleet[0].reached.load(Ordering::Acquire), 3);
    eventually("the other replica open", || {
        fleet[1].breaker.state() == State::Open
    })
    .await;
    match send(&fleet[1].svc, Answer::Now(StatusCode::OK)).await {
        Err(Error::Rejected(Rejection::Breaker(rejected))) => {
            assert_eq!(rejected.reason(), RejectReason::Open);
            assert_eq!(rejected.name(), "search");
            let left = rejected.retry_after().unwrap();
            assert!(
                left > Duration::from_secs(25) && left <= Duration::from_secs(30),
                "the fleet's deadline, {left:?} left"
            );
        }
        other => panic!("expected the fleet's rejection, got {other:?}"),
    }
    assert_eq!(
        fleet[1].reached.load(Ordering::Acquire),
        0,
        "the request was not sent"
    );
}

/// The fleet probe cap through tower services: 3 replicas, 16 concurrent callers each with its
/// own clone of its replica's service; every probe's answer is a 503 after 30 ms, so the fleet
/// re-opens after each. At most one request is in flight across the fleet at any time (without
/// sharing, one per replica would be).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_probe_cap_holds_through_tower_services() {
    let s = server!();
    let ns = unique_ns("tower-probes");
    let in_flight = Arc::new(InFlight::default());
    let cooldown = Duration::from_millis(100);
    let fleet = replicas_counting(&s.url(), &ns, 3, cooldown, Arc::clone(&in_flight)).await;
    for _ in 0..3 {
        let r = send(&fleet[0].svc, Answer::Now(StatusCode::SERVICE_UNAVAILABLE)).await;
        assert_eq!(r.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
    }
    eventually("every replica open", || {
        fleet.iter().all(|r| r.breaker.state() == State::Open)
    })
    .await;
    let probes = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for replica in &fleet {
        for _ in 0..16 {
            let mut svc = replica.svc.clone();
            let (probes, done) = (Arc::clone(&probes), Arc::clone(&done));
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                while !done.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(3) {
                    let answer =
                        Answer::After(Duration::from_millis(30), StatusCode::SERVICE_UNAVAILABLE);
                    let r = svc.ready().await.unwrap().call(answer).await;
                    match r {
                        Ok(StatusCode::SERVICE_UNAVAILABLE) => {
                            if probes.fetch_add(1, Ordering::AcqRel) + 1 >= 3 {
                                done.store(true, Ordering::Release);
                            }
                        }
                        Err(Error::Rejected(_)) => {
                            tokio::time::sleep(Duration::from_millis(1)).await
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let probes = probes.load(Ordering::Acquire);
    assert!(probes >= 3, "{probes} probes ran in 3 s");
    assert_eq!(
        in_flight.max.load(Ordering::Acquire),
        1,
        "requests in flight across the fleet, cap 1"
    );
    let reached: usize = fleet
        .iter()
        .map(|r| r.reached.load(Ordering::Acquire))
        .sum();
    assert_eq!(
        reached,
        3 + probes,
        "the trip's requests and the probes, no other"
    );
}

/// A probe's response future dropped before it completes (a caller's timeout, a client gone)
/// returns the fleet's half-open lease at once: the other replica probes long before the 30 s
/// lease time, its probe's 200 closes the fleet, and the dropped probe recorded no failure.
#[tokio::test]
async fn a_dropped_tower_probe_returns_its_fleet_lease() {
    let s = server!();
    let ns = unique_ns("tower-cancel");
    let cooldown = Duration::from_millis(50);
    let fleet = replicas(&s.url(), &ns, 2, cooldown).await;
    for _ in 0..3 {
        let _ = send(&fleet[0].svc, Answer::Now(StatusCode::BAD_GATEWAY)).await;
    }
    eventually("both open", || {
        fleet.iter().all(|r| r.breaker.state() == State::Open)
    })
    .await;
    // Replica 0's probe: a request whose answer never comes, its future held, not polled to
    // the end. The breaker admits in `call`, so `reached` tells an admitted request at once.
    let mut svc = fleet[0].svc.clone();
    let start = Instant::now();
    let held = loop {
        let fut = svc.ready().await.unwrap().call(Answer::Never);
        if fleet[0].reached.load(Ordering::Acquire) == 4 {
            break fut;
        }
        assert!(matches!(fut.await, Err(Error::Rejected(_))));
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no fleet probe admitted"
        );
        fleet[0].store.sync().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert_eq!(fleet[0].breaker.state(), State::HalfOpen);
    // While it is held, the other replica's requests are refused and not sent.
    for _ in 0..20 {
        fleet[1].store.sync().await.unwrap();
        let r = send(&fleet[1].svc, Answer::Now(StatusCode::OK)).await;
        assert!(matches!(r, Err(Error::Rejected(_))), "{r:?}");
    }
    assert_eq!(fleet[1].reached.load(Ordering::Acquire), 0);
    let t = Instant::now();
    drop(held);
    fleet[0].store.sync().await.unwrap();
    loop {
        fleet[1].store.sync().await.unwrap();
        if let Ok(status) = send(&fleet[1].svc, Answer::Now(StatusCode::OK)).await {
            assert_eq!(status, StatusCode::OK);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the dropped probe's lease came back at once, not at its 30 s expiry"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(fleet[1].reached.load(Ordering::Acquire), 1, "one probe");
    eventually("both closed by the other replica's probe", || {
        fleet.iter().all(|r| r.breaker.state() == State::Closed)
    })
    .await;
}

/// A `BoxError`-typed stack (what `tower::ServiceBuilder` users often erase to) keeps the
/// rejection recognisable: the fleet's refusal downcasts to `breaker_core::Error`.
#[tokio::test]
async fn a_fleet_rejection_survives_boxing_into_a_box_error() {
    let s = server!();
    let ns = unique_ns("tower-box");
    let fleet = replicas(&s.url(), &ns, 2, Duration::from_secs(30)).await;
    for _ in 0..3 {
        let _ = send(&fleet[0].svc, Answer::Now(StatusCode::SERVICE_UNAVAILABLE)).await;
    }
    eventually("the other replica open", || {
        fleet[1].breaker.state() == State::Open
    })
    .await;
    let boxed = fleet[1].svc.clone().map_err(BoxError::from);
    let err = boxed
        .oneshot(Answer::Now(StatusCode::OK))
        .await
        .unwrap_err();
    match err.downcast_ref::<Error<std::io::Error>>() {
        Some(Error::Rejected(Rejection::Breaker(r))) => assert_eq!(r.reason(), RejectReason::Open),
        other => panic!("expected a breaker rejection, got {other:?} ({err})"),
    }
    assert_eq!(fleet[1].reached.load(Ordering::Acquire), 0);
}
