//! Real [`CircuitBreaker`]s in a fleet ([`Store::share`]): several replicas in one process, each
//! with its own store connection and its own local breaker, against a real server. A trip on
//! one is seen by the others with its origin; the fleet-wide probe cap holds with many
//! concurrent callers; manual control is seen everywhere; a cancelled or panicking probe
//! returns its lease.

use crate::common::unique_ns;
use crate::coordinator::{eventually, replica};
use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, RejectReason, State, Transition, TransitionReason,
};
use breaker_core::clock::Clock;
use breaker_redis::{SharedCircuitBreaker, SharedPermit, Store};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Seen = Arc<Mutex<Vec<Transition>>>;

struct Replica {
    store: Store,
    shared: SharedCircuitBreaker,
    seen: Seen,
}

fn policy(cooldown: Duration, lease: Duration) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown,
        cooldown_max: cooldown,
        half_open_probes: 1,
        successes_to_close: 1,
        max_probe_wait: Some(lease),
        ..BreakerPolicy::default()
    }
}

async fn fleet(url: &str, ns: &str, n: usize, policy: &BreakerPolicy) -> Vec<Replica> {
    let mut out = Vec::new();
    for r in 0..n {
        let store = replica(url, ns, &format!("r{r}"), Clock::system()).await;
        let seen: Seen = Arc::default();
        let sink = Arc::clone(&seen);
        let breaker = CircuitBreaker::builder(policy.clone())
            .name("payments")
            .on_transition(move |t| sink.lock().unwrap().push(t.clone()))
            .build()
            .unwrap();
        let shared = store.share(&breaker).unwrap();
        out.push(Replica {
            store,
            shared,
            seen,
        });
    }
    // Every replica has read the fleet's (initial) state.
    for r in &out {
        r.store.sync().await.unwrap();
    }
    out
}

fn trip(r: &Replica) {
    for _ in 0..3 {
        r.shared.try_acquire().unwrap().failure();
    }
}

#[tokio::test]
async fn a_trip_on_one_replica_is_seen_by_the_others_with_its_origin() {
    let s = server!();
    let ns = unique_ns("fleet-trip");
    let fleet = fleet(
        &s.url(),
        &ns,
        3,
        &policy(Duration::from_secs(30), Duration::from_secs(5)),
    )
    .await;
    trip(&fleet[0]);
    assert_eq!(
        fleet[0].shared.state(),
        State::Open,
        "tripped locally at once"
    );
    let took = eventually("every replica open", || {
        fleet.iter().all(|r| r.shared.state() == State::Open)
    })
    .await;
    eprintln!("fleet: a local trip reached 2 other replicas in {took:?}");
    for r in &fleet[1..] {
        let rejected = r.shared.try_acquire().unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Open);
        let left = rejected.retry_after().unwrap();
        assert!(
            left > Duration::from_secs(25) && left <= Duration::from_secs(30),
            "the fleet's deadline, {left:?} left"
        );
        let seen = r.seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "one transition: {seen:?}");
        let t = &seen[0];
        assert_eq!(
            (t.from, t.to, t.reason, t.origin.as_deref()),
            (
                State::Closed,
                State::Open,
                TransitionReason::ConsecutiveFailures,
                Some("r0")
            )
        );
        // Not counted as this replica's failures: nothing was recorded here.
        assert_eq!(r.shared.fleet_view().caused_by.unwrap().as_str(), "r0");
    }
    // The replica that tripped is not told its own trip twice.
    fleet[0].store.sync().await.unwrap();
    let own = fleet[0].seen.lock().unwrap().clone();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0].origin, None, "decided here");
    assert_eq!(fleet[0].shared.fleet_view().state, State::Open);
    assert_eq!(
        fleet[0].shared.fleet_view().caused_by.unwrap().as_str(),
        "r0",
        "this replica's trip made the fleet's"
    );
}

/// A local trip that races another replica's first write of the same closed period is not lost
/// (model finding F2). The store starts empty: r1's view never knew a word, so its trip expects
/// none; r0's flush created the breaker first (closed, generation 0, no transition). The trip's
/// compare-and-set loses to that word, which is still the closed period r1 tripped in: it is
/// decided again on it and the whole fleet opens (it used to be dropped as a late trip, leaving
/// r1 open alone for its cooldown and the fleet closed).
#[tokio::test]
async fn a_trip_racing_another_replicas_first_write_of_the_same_period_opens_the_fleet() {
    let s = server!();
    let ns = unique_ns("fleet-trip-race");
    let fleet = fleet(
        &s.url(),
        &ns,
        2,
        &policy(Duration::from_secs(30), Duration::from_secs(5)),
    )
    .await;
    assert!(
        !fleet[1].shared.fleet_view().known,
        "the store holds no word yet"
    );
    fleet[0].shared.try_acquire().unwrap().success();
    fleet[0].store.flush_now().await.unwrap();
    assert!(fleet[0].shared.fleet_view().known, "r0's flush created it");
    assert!(!fleet[1].shared.fleet_view().known, "r1 has not read it");
    trip(&fleet[1]);
    fleet[1].store.sync().await.unwrap();
    let view = fleet[1].shared.fleet_view();
    assert_eq!(
        (view.state, view.generation, view.reason),
        (State::Open, 1, TransitionReason::ConsecutiveFailures),
        "the trip applied to the word that won"
    );
    eventually("r0 open by r1's trip", || {
        fleet[0].shared.state() == State::Open
    })
    .await;
    let seen = fleet[0].seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].origin.as_deref(), Some("r1"));
}

/// Admits on `b` until the call is a fleet probe holding a lease (bounded: 3 s).
async fn probe<'a>(b: &'a SharedCircuitBreaker, st: &Store) -> SharedPermit<'a> {
    let start = Instant::now();
    loop {
        if let Ok(p) = b.try_acquire() {
            if p.is_probe() && p.lease().is_some() {
                return p;
            }
            assert!(!p.is_probe(), "a probe without a lease while healthy");
            drop(p);
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no fleet probe admitted"
        );
        st.sync().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The probe cap across the fleet: 3 replicas, each with a local cap of one probe, 16 callers
/// each hammering while half-open: never more than one probe in flight across the fleet
/// (without sharing, three would run: one per replica).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_wide_probe_cap_holds_with_many_concurrent_callers() {
    let s = server!();
    let ns = unique_ns("fleet-probes");
    let cooldown = Duration::from_millis(100);
    let fleet = Arc::new(fleet(&s.url(), &ns, 3, &policy(cooldown, Duration::from_secs(5))).await);
    let cycles = 6;
    let mut max_seen = 0;
    let mut probes = 0;
    for cycle in 0..cycles {
        if fleet.iter().all(|r| r.shared.state() == State::Closed) {
            trip(&fleet[cycle % 3]);
        }
        eventually("every replica open", || {
            fleet
                .iter()
                .all(|r| matches!(r.shared.state(), State::Open | State::HalfOpen))
        })
        .await;
        let in_flight = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let fail = cycle % 2 == 0;
        let mut tasks = Vec::new();
        for r in 0..3 {
            for _ in 0..16 {
                let b = fleet[r].shared.clone();
                let (in_flight, max, ran, done) = (
                    Arc::clone(&in_flight),
                    Arc::clone(&max),
                    Arc::clone(&ran),
                    Arc::clone(&done),
                );
                tasks.push(tokio::spawn(async move {
                    let start = Instant::now();
                    while !done.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(3)
                    {
                        match b.try_acquire() {
                            Ok(p) if p.is_probe() => {
                                let now = in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                                max.fetch_max(now, Ordering::AcqRel);
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                in_flight.fetch_sub(1, Ordering::AcqRel);
                                ran.fetch_add(1, Ordering::AcqRel);
                                if fail {
                                    p.failure();
                                } else {
                                    p.success();
                                }
                                done.store(true, Ordering::Release);
                            }
                            // Closed again (the fleet closed): this caller is done.
                            Ok(p) => {
                                p.success();
                                return;
                            }
                            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                        }
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
        let m = max.load(Ordering::Acquire);
        assert!(
            ran.load(Ordering::Acquire) >= 1,
            "cycle {cycle}: no probe ran"
        );
        assert_eq!(
            m, 1,
            "cycle {cycle}: {m} probes in flight across the fleet, cap 1"
        );
        max_seen = max_seen.max(m);
        probes += ran.load(Ordering::Acquire);
        // The fleet's outcome reaches every replica.
        let want = if fail { State::Open } else { State::Closed };
        eventually("every replica at the probe's outcome", || {
            fleet.iter().all(|r| r.shared.state() == want)
        })
        .await;
        if fail {
            tokio::time::sleep(cooldown).await;
        }
    }
    let requests: u64 = fleet.iter().map(|r| r.shared.lease_requests()).sum();
    eprintln!(
        "fleet: {cycles} half-open cycles, 3 replicas x 16 callers: max {max_seen} probe in flight, \
         {probes} probes, {requests} lease requests"
    );
}

#[tokio::test]
async fn force_open_force_closed_and_reset_are_seen_by_every_replica() {
    let s = server!();
    let ns = unique_ns("fleet-force");
    let fleet = fleet(
        &s.url(),
        &ns,
        3,
        &policy(Duration::from_secs(30), Duration::from_secs(5)),
    )
    .await;
    fleet[1].shared.force_open().await.unwrap();
    eventually("every replica forced open", || {
        fleet.iter().all(|r| r.shared.state() == State::ForcedOpen)
    })
    .await;
    for r in &fleet {
        assert_eq!(
            r.shared.try_acquire().unwrap_err().reason(),
            RejectReason::ForcedOpen
        );
    }
    let last = fleet[2].seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.to, last.reason, last.origin.as_deref()),
        (State::ForcedOpen, TransitionReason::Manual, Some("r1"))
    );

    fleet[0].shared.force_closed().await.unwrap();
    eventually("every replica forced closed", || {
        fleet
            .iter()
            .all(|r| r.shared.state() == State::ForcedClosed)
    })
    .await;
    for r in &fleet {
        for _ in 0..5 {
            r.shared.try_acquire().unwrap().failure();
        }
        assert_eq!(r.shared.state(), State::ForcedClosed, "records nothing");
    }

    fleet[2].shared.reset().await.unwrap();
    eventually("every replica closed", || {
        fleet.iter().all(|r| r.shared.state() == State::Closed)
    })
    .await;
    let last = fleet[0].seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.to, last.origin.as_deref()),
        (State::Closed, Some("r2"))
    );
    // After the reset a trip works as before.
    trip(&fleet[0]);
    eventually("every replica open after the reset", || {
        fleet.iter().all(|r| r.shared.state() == State::Open)
    })
    .await;
}

/// A probe cancelled (its permit dropped, as by a timeout or a dropped future) returns its
/// lease at once, so another replica probes long before the 30 s lease time; a probe whose
/// call panics returns its lease as a failed probe, and the fleet re-opens.
#[tokio::test]
async fn a_cancelled_probe_returns_its_lease_and_a_panicking_one_fails_it() {
    let s = server!();
    let ns = unique_ns("fleet-cancel");
    let cooldown = Duration::from_millis(50);
    let fleet = fleet(&s.url(), &ns, 2, &policy(cooldown, Duration::from_secs(30))).await;
    trip(&fleet[0]);
    eventually("both open", || {
        fleet.iter().all(|r| r.shared.state() == State::Open)
    })
    .await;
    tokio::time::sleep(cooldown).await;
    let p = probe(&fleet[0].shared, &fleet[0].store).await;
    // While it is held, the other replica gets no lease.
    for _ in 0..20 {
        assert!(fleet[1].shared.try_acquire().is_err());
        fleet[1].store.sync().await.unwrap();
    }
    let t = Instant::now();
    drop(p);
    fleet[0].store.sync().await.unwrap();
    let p = probe(&fleet[1].shared, &fleet[1].store).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the cancelled lease came back at once, not at its 30 s expiry"
    );
    let generation = fleet[1].shared.fleet_view().generation;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = p;
        panic!("the probe's call panicked");
    }));
    assert!(r.is_err());
    fleet[1].store.sync().await.unwrap();
    eventually("the fleet re-opened by the failed probe", || {
        let f = fleet[0].shared.fleet_view();
        f.generation > generation
            && f.state == State::Open
            && f.reason == TransitionReason::ProbeFailed
    })
    .await;
    eventually("both open", || {
        fleet.iter().all(|r| r.shared.state() == State::Open)
    })
    .await;
}

#[tokio::test]
async fn a_breaker_without_a_valid_name_cannot_be_shared() {
    let s = server!();
    let ns = unique_ns("fleet-name");
    let store = replica(&s.url(), &ns, "r0", Clock::system()).await;
    let unnamed = CircuitBreaker::new(BreakerPolicy::default()).unwrap();
    let err = store.share(&unnamed).unwrap_err().to_string();
    assert!(err.contains("cannot share this breaker"), "{err}");
    let named = CircuitBreaker::builder(BreakerPolicy::default())
        .name("orders")
        .build()
        .unwrap();
    let _shared = store.share(&named).unwrap();
    let err = store.share(&named).unwrap_err().to_string();
    assert!(err.contains("already registered"), "{err}");
}

/// `quorum(2)`: one replica's trip is a vote and opens only itself; a second replica's trip
/// opens the fleet.
#[tokio::test]
async fn under_quorum_two_one_replica_does_not_open_the_fleet_and_two_do() {
    use breaker_core::scope::Scope;
    let s = server!();
    let ns = unique_ns("fleet-quorum");
    let mut fleet = Vec::new();
    for r in 0..3 {
        let store = replica(&s.url(), &ns, &format!("r{r}"), Clock::system()).await;
        let breaker =
            CircuitBreaker::builder(policy(Duration::from_secs(30), Duration::from_secs(5)))
                .name("search")
                .build()
                .unwrap();
        let shared = store
            .share_scoped(&breaker, Scope::Quorum(2))
            .unwrap()
            .unwrap();
        store.sync().await.unwrap();
        fleet.push((store, shared));
    }
    for _ in 0..3 {
        fleet[0].1.try_acquire().unwrap().failure();
    }
    for (st, _) in &fleet {
        st.sync().await.unwrap();
    }
    // Give a push time to arrive, were one sent.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fleet[0].1.state(), State::Open, "its own trip");
    for (_, b) in &fleet[1..] {
        assert_eq!(b.state(), State::Closed, "one vote of two");
        assert_eq!(b.fleet_view().state, State::Closed);
    }
    for _ in 0..3 {
        fleet[1].1.try_acquire().unwrap().failure();
    }
    eventually("the fleet open after the second vote", || {
        fleet[2].1.state() == State::Open
    })
    .await;
    assert_eq!(fleet[2].1.fleet_view().caused_by.unwrap().as_str(), "r1");
}

#[tokio::test]
async fn a_shared_scope_without_a_store_is_an_error_and_local_is_left_alone() {
    use breaker_core::scope::Scope;
    let b = CircuitBreaker::builder(BreakerPolicy::default())
        .name("search")
        .build()
        .unwrap();
    // No store is installed in this test binary.
    assert!(breaker_redis::installed().is_none());
    let err = breaker_redis::share_scoped(&b, Scope::Shared)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "breaker `search` has scope `shared` but no store is installed: connect one \
         (`breaker_redis::Store::connect`) and install it (`breaker_redis::install`) before its \
         first call, or give it scope `local`"
    );
    assert!(breaker_redis::share_scoped(&b, Scope::Local)
        .unwrap()
        .is_none());
}

/// A config file's scopes and `[store]` table: the shared policy's breaker joins the fleet,
/// the local one does not; without a store it is an error.
#[tokio::test]
async fn policies_of_a_config_file_are_shared_by_their_scope() {
    use breaker_core::config::{Format, Loader, PolicyRegistry};
    let s = server!();
    let ns = unique_ns("fleet-config");
    let text = format!(
        r#"[policies.search]
breaker = "3 consecutive, open 30s"
scope = "shared"

[policies.local]
breaker = "3 consecutive, open 30s"

[store]
url = "redis://127.0.0.1:1/"
namespace = "{ns}"
flush_interval = "50ms"
"#
    );
    let loader = Loader::text(&text, Format::Toml).env_vars([
        ("BREAKER__STORE__URL", s.url().as_str()),
        ("BREAKER__STORE__REPLICA", "cfg-1"),
    ]);
    let policies = loader.load().unwrap();
    let registry = PolicyRegistry::from_policies(policies.clone());
    let err = breaker_redis::share_policies(None, &policies, &registry).unwrap_err();
    assert!(
        matches!(err, breaker_redis::ShareError::NoStore { .. }),
        "{err}"
    );
    let config = breaker_redis::StoreConfig::from_settings(policies.store().unwrap()).unwrap();
    assert!(format!("{config:?}").contains("cfg-1"));
    let store = Store::connect(config).await.unwrap();
    let shared = breaker_redis::share_policies(Some(&store), &policies, &registry).unwrap();
    assert_eq!(shared.keys().collect::<Vec<_>>(), ["search"]);
    assert_eq!(shared["search"].id().as_str(), "search");
    // The registry's breaker is the shared one's local breaker: a trip through it is shared.
    for _ in 0..3 {
        shared["search"].try_acquire().unwrap().failure();
    }
    store.sync().await.unwrap();
    let b = registry.breaker("search").unwrap();
    assert_eq!(b.state(), State::Open);
    eventually("the fleet open", || {
        shared["search"].fleet_view().state == State::Open
    })
    .await;
}

// --- Replicas as OS processes ------------------------------------------------------------------

const ROLE: &str = "BREAKER_REDIS_FLEET_ROLE";

fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The replica role: run only when re-executed by
/// [`replicas_as_os_processes_share_trips_and_the_probe_cap`] (with `BREAKER_REDIS_FLEET_ROLE`
/// set); a plain test run passes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn os_process_replica_role() {
    let Ok(id) = std::env::var(ROLE) else {
        return;
    };
    let url = std::env::var("BREAKER_REDIS_FLEET_URL").unwrap();
    let ns = std::env::var("BREAKER_REDIS_FLEET_NS").unwrap();
    let cooldown = Duration::from_millis(100);
    let store = replica(&url, &ns, &id, Clock::system()).await;
    let breaker = CircuitBreaker::builder(policy(cooldown, Duration::from_secs(5)))
        .name("orders")
        .build()
        .unwrap();
    let shared = store.share(&breaker).unwrap();
    store.sync().await.unwrap();
    // Every replica is up before the trip (the parent waits for these lines).
    println!("@@ ready {id}");
    if id == "p0" {
        // Wait for the parent's go (a file), then trip.
        let go = std::env::var("BREAKER_REDIS_FLEET_GO").unwrap();
        let start = Instant::now();
        while !std::path::Path::new(&go).exists() {
            assert!(start.elapsed() < Duration::from_secs(10), "no go");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for _ in 0..3 {
            shared.try_acquire().unwrap().failure();
        }
        store.sync().await.unwrap();
    }
    let start = Instant::now();
    while shared.state() != State::Open {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{id}: never open"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let origin = shared.fleet_view().caused_by.map(|r| r.as_str().to_owned());
    println!("@@ open {id} origin={}", origin.unwrap_or_default());
    // Half-open cycles: 8 callers hammer; a probe holds its lease 40 ms and fails.
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let b = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut spans = Vec::new();
            while Instant::now() < deadline {
                match b.try_acquire() {
                    Ok(p) if p.is_probe() => {
                        let from = unix_us();
                        tokio::time::sleep(Duration::from_millis(40)).await;
                        spans.push((from, unix_us()));
                        p.failure();
                    }
                    Ok(p) => p.success(),
                    Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            spans
        }));
    }
    for t in tasks {
        for (from, to) in t.await.unwrap() {
            println!("@@ probe {id} {from} {to}");
        }
    }
    println!("@@ done {id}");
}

/// Four OS processes (this test binary re-executed in the replica role) share one breaker
/// through one server: a trip in one process opens the other three (with its origin), and
/// across the processes' half-open cycles no two probes ever overlap (cap 1).
#[test]
fn replicas_as_os_processes_share_trips_and_the_probe_cap() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = server!();
    let ns = unique_ns("fleet-procs");
    let go = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{ns}.go"));
    let _ = std::fs::remove_file(&go);
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for p in 0..4 {
        let child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "fleet::os_process_replica_role",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, format!("p{p}"))
            .env("BREAKER_REDIS_FLEET_URL", s.url())
            .env("BREAKER_REDIS_FLEET_NS", &ns)
            .env("BREAKER_REDIS_FLEET_GO", &go)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        children.push(child);
    }
    // Readers: each child's lines, collected on a thread.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    for c in &mut children {
        let out = c.stdout.take().unwrap();
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            use std::io::BufRead;
            // libtest prints around the role's lines; its own lines start at `@@ `.
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(i) = line.find("@@ ") {
                    let _ = tx.send(line[i + 3..].to_owned());
                }
            }
        }));
    }
    drop(tx);
    let mut lines = Vec::new();
    let start = Instant::now();
    while lines
        .iter()
        .filter(|l: &&String| l.starts_with("ready "))
        .count()
        < 4
    {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => lines.push(l),
            Err(e) => panic!(
                "replicas not ready: {e:?} after {:?}: {lines:?}",
                start.elapsed()
            ),
        }
    }
    std::fs::write(&go, b"go").unwrap();
    for l in rx.iter() {
        lines.push(l);
    }
    for mut c in children {
        assert!(
            c.wait().unwrap().success(),
            "a replica process failed: {lines:?}"
        );
    }
    for r in readers {
        r.join().unwrap();
    }
    let _ = std::fs::remove_file(&go);
    let opened: Vec<&String> = lines.iter().filter(|l| l.starts_with("open ")).collect();
    assert_eq!(opened.len(), 4, "{lines:?}");
    for l in &opened {
        assert!(l.ends_with("origin=p0"), "{l}");
    }
    let mut spans: Vec<(u64, u64)> = lines
        .iter()
        .filter_map(|l| {
            let mut f = l.strip_prefix("probe ")?.split(' ').skip(1);
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    spans.sort();
    assert!(spans.len() >= 3, "too few probes: {lines:?}");
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "two probes overlapped across processes: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    eprintln!(
        "fleet: 4 OS processes: a trip seen by all with its origin; {} probes across them, never two at once",
        spans.len()
    );
}

/// The store killed: in mode `local` a real shared breaker goes on admitting and recording (its
/// local rules still trip it); in mode `closed(grace)` it rejects every call once the grace is
/// over. No call waits for the store.
#[tokio::test]
async fn with_the_store_down_local_mode_goes_on_and_closed_grace_rejects() {
    use breaker_redis::{OnStoreError, ReplicaId, StoreConfig};
    let mut s = server!();
    let ns = unique_ns("fleet-down");
    let config = |replica: &str, mode| {
        StoreConfig::new(&s.url(), &ns)
            .unwrap()
            .replica(ReplicaId::new(replica).unwrap())
            .flush_interval(Duration::from_millis(20))
            .flush_jitter(0.0)
            .op_timeout(Duration::from_millis(50))
            .store_breaker(1, Duration::from_secs(30), Duration::from_secs(30))
            .on_error(mode)
    };
    let local_store = Store::connect(config("r0", OnStoreError::Local))
        .await
        .unwrap();
    let closed_store = Store::connect(config(
        "r1",
        OnStoreError::Closed {
            grace: Duration::from_millis(100),
        },
    ))
    .await
    .unwrap();
    let named = |n: &str| {
        CircuitBreaker::builder(policy(Duration::from_secs(30), Duration::from_secs(5)))
            .name(n)
            .build()
            .unwrap()
    };
    let a = local_store.share(&named("a")).unwrap();
    let b = closed_store.share(&named("b")).unwrap();
    local_store.sync().await.unwrap();
    closed_store.sync().await.unwrap();
    s.kill();
    let start = Instant::now();
    eventually("both stores degraded", || {
        let t = Instant::now();
        a.try_acquire().unwrap().success();
        assert!(
            t.elapsed() < Duration::from_millis(5),
            "a call waited for the store"
        );
        if let Ok(p) = b.try_acquire() {
            p.success();
        }
        local_store.status() != breaker_redis::StoreStatus::Healthy
            && closed_store.status() != breaker_redis::StoreStatus::Healthy
    })
    .await;
    assert_eq!(
        local_store.status(),
        breaker_redis::StoreStatus::DegradedLocal
    );
    eventually("closed(100ms) rejects after its grace", || {
        b.try_acquire().is_err()
    })
    .await;
    assert!(
        start.elapsed() >= Duration::from_millis(100),
        "not before the grace"
    );
    assert_eq!(b.try_acquire().unwrap_err().reason(), RejectReason::Open);
    for _ in 0..50 {
        a.try_acquire().unwrap().success();
    }
    for _ in 0..3 {
        a.try_acquire().unwrap().failure();
    }
    assert_eq!(a.state(), State::Open, "local rules still trip it");
}
