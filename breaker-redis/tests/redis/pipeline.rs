//! Shared breakers through every caller of the breaker, not only [`SharedCircuitBreaker`]:
//! a `Pipeline` built with a breaker after `store.share(&breaker)`, and a config file's
//! policy of scope `shared` through its registry's pipeline (`share_policies`). Two or three
//! "replicas" (one store connection each) on one real server.
//!
//! [`SharedCircuitBreaker`]: breaker_redis::SharedCircuitBreaker

use crate::common::unique_ns;
use crate::coordinator::{eventually, replica};
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State};
use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::{Error, Rejection};
use breaker_redis::Store;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn policy(cooldown: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown,
        cooldown_max: cooldown,
        half_open_probes: 1,
        successes_to_close: 1,
        max_probe_wait: Some(Duration::from_secs(5)),
        ..BreakerPolicy::default()
    }
}

/// A replica: its store, and a pipeline over its breaker, shared with the fleet.
struct Replica {
    store: Store,
    breaker: CircuitBreaker,
    pipeline: Pipeline,
}

async fn replicas(url: &str, ns: &str, n: usize, cooldown: Duration) -> Vec<Replica> {
    let names: Vec<String> = (0..n).map(|r| format!("r{r}")).collect();
    let mut stores = Vec::new();
    for r in &names {
        stores.push(replica(url, ns, r, Clock::system()).await);
    }
    replicas_on(stores, cooldown).await
}

/// A replica on each of `stores`, with a pipeline over its shared breaker, synced.
async fn replicas_on(stores: Vec<Store>, cooldown: Duration) -> Vec<Replica> {
    let mut out = Vec::new();
    for store in stores {
        let breaker = CircuitBreaker::builder(policy(cooldown))
            .name("payments")
            .build()
            .unwrap();
        // The handle is dropped at once: the breaker itself stays shared.
        drop(store.share(&breaker).unwrap());
        let pipeline = Pipeline::builder()
            .breaker(breaker.clone())
            .build()
            .unwrap();
        out.push(Replica {
            store,
            breaker,
            pipeline,
        });
    }
    for r in &out {
        r.store.sync().await.unwrap();
    }
    out
}

async fn fail(p: &Pipeline) -> Result<u32, Error<&'static str>> {
    p.call(|| async { Err::<u32, _>("down") }).await
}

#[tokio::test]
async fn a_trip_through_one_replicas_pipeline_rejects_the_others_pipeline_calls() {
    let s = server!();
    let ns = unique_ns("pipe-trip");
    let fleet = replicas(&s.url(), &ns, 2, Duration::from_secs(30)).await;
    for _ in 0..3 {
        assert!(matches!(
            fail(&fleet[0].pipeline).await,
            Err(Error::Inner("down"))
        ));
    }
    assert_eq!(fleet[0].breaker.state(), State::Open, "tripped locally");
    eventually("the other replica open", || {
        fleet[1].breaker.state() == State::Open
    })
    .await;
    let ran = AtomicUsize::new(0);
    let r = fleet[1]
        .pipeline
        .call(|| async {
            ran.fetch_add(1, Ordering::Relaxed);
            Ok::<u32, &str>(1)
        })
        .await;
    match r {
        Err(Error::Rejected(Rejection::Breaker(rejected))) => {
            assert_eq!(rejected.reason(), RejectReason::Open);
            let left = rejected.retry_after().unwrap();
            assert!(
                left > Duration::from_secs(25) && left <= Duration::from_secs(30),
                "the fleet's deadline, {left:?} left"
            );
        }
        other => panic!("expected the fleet's rejection, got {other:?}"),
    }
    assert_eq!(ran.load(Ordering::Relaxed), 0, "the call was not made");
}

/// The fleet probe cap through pipelines: 3 replicas, 16 concurrent callers each, every call
/// through its replica's `Pipeline`: at most one probe reaches the service at a time across
/// the fleet (without sharing, one per replica would).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_probe_cap_holds_through_pipelines() {
    let s = server!();
    let ns = unique_ns("pipe-probes");
    let cooldown = Duration::from_millis(100);
    let fleet = Arc::new(replicas(&s.url(), &ns, 3, cooldown).await);
    for _ in 0..3 {
        let _ = fail(&fleet[0].pipeline).await;
    }
    eventually("every replica open", || {
        fleet.iter().all(|r| r.breaker.state() == State::Open)
    })
    .await;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for r in 0..3 {
        for _ in 0..16 {
            let (fleet, in_flight, max, ran, done) = (
                Arc::clone(&fleet),
                Arc::clone(&in_flight),
                Arc::clone(&max),
                Arc::clone(&ran),
                Arc::clone(&done),
            );
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                while !done.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(3) {
                    // The service: counts the calls that reach it at once; every probe fails,
                    // so the fleet re-opens and no closed call follows.
                    let r = fleet[r]
                        .pipeline
                        .call(|| async {
                            let now = in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                            max.fetch_max(now, Ordering::AcqRel);
                            tokio::time::sleep(Duration::from_millis(30)).await;
                            in_flight.fetch_sub(1, Ordering::AcqRel);
                            ran.fetch_add(1, Ordering::AcqRel);
                            Err::<u32, _>("still down")
                        })
                        .await;
                    match r {
                        Err(Error::Inner(_)) => done.store(true, Ordering::Release),
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
    assert!(ran.load(Ordering::Acquire) >= 1, "no probe ran");
    assert_eq!(
        max.load(Ordering::Acquire),
        1,
        "probes in flight across the fleet, cap 1"
    );
    eventually("every replica open again after the failed probe", || {
        fleet.iter().all(|r| r.breaker.state() == State::Open)
    })
    .await;
}

/// A config file's policy of scope `shared`, shared with `share_policies`, works through the
/// registry's pipeline: a trip on one replica rejects the other replica's pipeline calls, and
/// the policy's keyed breakers (a registry over its factory) are shared as they are made.
#[tokio::test]
async fn a_shared_config_policy_works_through_its_registry_pipeline_and_its_keys() {
    use breaker_core::config::{Format, Loader, PolicyRegistry};
    use breaker_core::registry::Registry;
    let s = server!();
    let ns = unique_ns("pipe-config");
    let text = r#"[policies.search]
breaker = "3 consecutive, open 30s"
scope = "shared"

[store]
url = "redis://127.0.0.1:1/"
namespace = "unused"
"#;
    let mut fleet = Vec::new();
    for r in 0..2 {
        let policies = Loader::text(text, Format::Toml).load().unwrap();
        let registry = PolicyRegistry::from_policies(policies.clone());
        let store = replica(&s.url(), &ns, &format!("c{r}"), Clock::system()).await;
        let shared = breaker_redis::share_policies(Some(&store), &policies, &registry).unwrap();
        drop(shared);
        let keys: Registry<String> =
            Registry::builder(registry.factory("search").unwrap()).build_tagged();
        store.sync().await.unwrap();
        fleet.push((store, registry, keys));
    }
    let pipeline = fleet[0].1.pipeline("search").unwrap();
    for _ in 0..3 {
        let r = pipeline.call(|| async { Err::<u32, _>("down") }).await;
        assert!(matches!(r, Err(Error::Inner("down"))));
    }
    let other = fleet[1].1.pipeline("search").unwrap();
    eventually("the other replica's breaker open", || {
        fleet[1].1.breaker("search").unwrap().state() == State::Open
    })
    .await;
    let r = other.call(|| async { Ok::<u32, &str>(1) }).await;
    assert!(
        matches!(&r, Err(Error::Rejected(Rejection::Breaker(b))) if b.reason() == RejectReason::Open),
        "{r:?}"
    );

    // Keys: `eu` trips on replica 0; replica 1's breaker of `eu` opens, its `us` does not.
    let eu = fleet[0].2.get_or_create(&"eu".to_owned()).unwrap();
    let eu_other = fleet[1].2.get_or_create(&"eu".to_owned()).unwrap();
    let us_other = fleet[1].2.get_or_create(&"us".to_owned()).unwrap();
    for (st, _, _) in &fleet {
        st.sync().await.unwrap();
    }
    for _ in 0..3 {
        eu.try_acquire().unwrap().failure();
    }
    eventually("replica 1's breaker of key `eu` open", || {
        eu_other.state() == State::Open
    })
    .await;
    assert_eq!(us_other.state(), State::Closed, "another key is its own");
    assert_eq!(
        eu_other.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
}

/// A shared breaker is registered while anything holds it, a plain handle or a pipeline, not
/// only a `SharedCircuitBreaker`; once every handle is gone the coordinator's sweep lets the
/// hook's own handle go and the breaker is unregistered.
#[tokio::test]
async fn a_shared_breaker_is_unregistered_once_nothing_holds_it() {
    use breaker_redis::{BreakerId, ForceTarget, StoreError};
    let s = server!();
    let ns = unique_ns("pipe-life");
    let store = replica(&s.url(), &ns, "l0", Clock::system()).await;
    let breaker = CircuitBreaker::builder(policy(Duration::from_secs(30)))
        .name("orders")
        .build()
        .unwrap();
    drop(store.share(&breaker).unwrap());
    let pipeline = Pipeline::builder()
        .breaker(breaker.clone())
        .build()
        .unwrap();
    drop(breaker);
    let id = BreakerId::new("orders").unwrap();
    // Held by the pipeline: still registered (and still shared) after a sweep.
    store.flush_now().await.unwrap();
    store.sync().await.unwrap();
    store.force(&id, ForceTarget::ForcedOpen).await.unwrap();
    eventually("the pipeline's breaker forced open by the fleet", || {
        pipeline.breaker().unwrap().state() == State::ForcedOpen
    })
    .await;
    drop(pipeline);
    store.flush_now().await.unwrap();
    store.sync().await.unwrap();
    let e = store.force(&id, ForceTarget::Reset).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Config { .. }) && e.to_string().contains("not registered"),
        "{e}"
    );
}

/// A hung store (the server stopped with SIGSTOP) never fails or delays a pipeline call over a
/// shared breaker in `local` mode: closed calls go on at local speed while the store's own
/// breaker opens, the local rules still trip the breaker, and once the store is back the
/// replica finds it healthy within a few flush intervals and the fleet learns of the trip.
#[tokio::test]
async fn a_hung_store_never_fails_or_delays_a_pipeline_call() {
    use breaker_redis::{ReplicaId, StoreConfig, StoreStatus};
    let s = server!();
    let ns = unique_ns("pipe-hang");
    let mut stores = Vec::new();
    for r in ["r0", "r1"] {
        let config = StoreConfig::new(&s.url(), &ns)
            .unwrap()
            .replica(ReplicaId::new(r).unwrap())
            .flush_interval(Duration::from_millis(20))
            .flush_jitter(0.0)
            .op_timeout(Duration::from_millis(50))
            .store_breaker(2, Duration::from_millis(50), Duration::from_millis(200));
        stores.push(Store::connect(config).await.unwrap());
    }
    let fleet = replicas_on(stores, Duration::from_secs(30)).await;
    let ok = |p: &Pipeline| {
        let p = p.clone();
        async move { p.call(|| async { Ok::<u32, &'static str>(1) }).await }
    };
    s.pause();
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut calls = 0;
    // Calls all through the hang, until the store reads as degraded and some time beyond.
    while fleet[0].store.status() == StoreStatus::Healthy
        || start.elapsed() < Duration::from_millis(300)
    {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the hung store never read as degraded"
        );
        let t = Instant::now();
        assert_eq!(ok(&fleet[0].pipeline).await, Ok(1));
        slowest = slowest.max(t.elapsed());
        calls += 1;
        tokio::task::yield_now().await;
    }
    assert!(calls > 100, "{calls} calls");
    // A call that waited for the hung store would take its operation timeout (50 ms); the
    // margin below it is for a loaded machine's scheduling, not for the store.
    assert!(
        slowest < Duration::from_millis(40),
        "a call waited for the store: {slowest:?}"
    );
    assert_eq!(fleet[0].store.status(), StoreStatus::DegradedLocal);
    for _ in 0..3 {
        assert!(matches!(
            fail(&fleet[0].pipeline).await,
            Err(Error::Inner("down"))
        ));
    }
    assert!(
        matches!(
            ok(&fleet[0].pipeline).await,
            Err(Error::Rejected(Rejection::Breaker(_)))
        ),
        "the local rules still trip it"
    );
    // Back: the next flush (every breaker is in it while the store is degraded) is the
    // store's health probe, so the replica reads healthy again within a few flush intervals,
    // although its open breaker counts nothing (before: degraded until its own cooldown);
    // and the trip the store missed is sent then, so the other replica opens too.
    s.resume();
    eventually("the store healthy again", || {
        fleet[0].store.status() == StoreStatus::Healthy
    })
    .await;
    eventually(
        "the trip made during the hang reaches the other replica",
        || fleet[1].breaker.state() == State::Open,
    )
    .await;
}
