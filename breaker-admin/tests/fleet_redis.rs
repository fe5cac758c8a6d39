//! Shared breakers through the admin with the real parts: a real redis-server on a free
//! loopback port, two replicas (each its own store connection and its own local breaker of
//! one shared id), replica A's admin served on loopback and a real HTTP client.
//!
//! - Replica B trips: A's status API shows the fleet's state (open, caused by B) beside A's
//!   local state.
//! - An admin action through A's API needs the token (refused without it: nothing changes on
//!   B); with it, `reset` closes B, `force-open` makes B reject, and the action is audited
//!   with `fleet=true`.
//! - A breaker the library shared itself (`#[circuit_breaker(scope = "shared")]` with an
//!   installed store) shows its fleet view in its function's row, with no `AdminBuilder`
//!   call for it, and an action on it reaches the other replica.
//!
//! Without redis-server on `PATH` the tests are skipped with a notice, unless
//! `REQUIRE_REDIS=1` (CI), which makes that a failure. Every wait is a bounded poll ending by
//! [`DEADLINE`](common::DEADLINE).
#![cfg(feature = "redis")]

mod common;

use breaker::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State};
use breaker::circuit_breaker;
use breaker_admin::Admin;
use breaker_redis::{ReplicaId, SharedCircuitBreaker, Store, StoreConfig};
use common::{get, logged, post, was_logged, DEADLINE};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "fleet-admin-token-0123456789";

/// One redis-server child process on a free loopback port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// A fresh server; `None` after a notice when redis-server is missing.
    ///
    /// # Panics
    /// When it is missing and `REQUIRE_REDIS=1`, or does not answer within 10 s (3 ports).
    fn start() -> Option<Server> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                std::env::var("REQUIRE_REDIS").map_or(true, |v| v != "1"),
                "redis-server was not found on PATH but REQUIRE_REDIS=1: install it \
                 (apt-get install -y redis-server) or unset REQUIRE_REDIS"
            );
            eprintln!(
                "notice: redis-server not found on PATH; skipping this test (set \
                 REQUIRE_REDIS=1 to fail instead)"
            );
            return None;
        }
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free loopback port");
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break; // the port was taken: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(Server { child, port });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start on 3 free ports");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// A replica's store: its own connection, the namespace `ns`. Flushes are hourly, so every
/// change seen here travels as a transition (pushed, or read by `sync`), not as counts.
async fn replica(server: &Server, ns: &str, name: &str) -> Store {
    Store::connect(
        StoreConfig::new(&server.url(), ns)
            .unwrap()
            .replica(ReplicaId::new(name).unwrap())
            .flush_interval(Duration::from_secs(3600))
            .flush_jitter(0.0),
    )
    .await
    .unwrap()
}

fn policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(3),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

fn shared(store: &Store, name: &str) -> SharedCircuitBreaker {
    let breaker = CircuitBreaker::builder(policy())
        .name(name)
        .build()
        .unwrap();
    store.share(&breaker).unwrap()
}

/// Waits until `done` holds, up to [`DEADLINE`]; panics naming `what` after it.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < end, "{what}: not within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `path` until `done` holds for its JSON, up to [`DEADLINE`]; the last body read.
async fn poll(addr: std::net::SocketAddr, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + DEADLINE;
    loop {
        let (status, body) = get(addr, path).await;
        assert_eq!(status, 200, "{body}");
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < end, "{path} within {DEADLINE:?}: {body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_api_shows_the_fleet_and_a_guarded_action_reaches_the_other_replica() {
    logged();
    let Some(server) = Server::start() else {
        return;
    };
    let ns = format!("admin-fleet-{}", std::process::id());
    let (store_a, store_b) = (
        replica(&server, &ns, "replica-a").await,
        replica(&server, &ns, "replica-b").await,
    );
    let (a, b) = (shared(&store_a, "payments"), shared(&store_b, "payments"));
    store_a.sync().await.unwrap();
    store_b.sync().await.unwrap();
    // Nothing added but the store: the breaker the program shared is found there.
    let admin = Admin::builder()
        .annotated(false)
        .store(&store_a)
        .admin_token("ops", TOKEN)
        .build();
    let listening = admin.listen().await.unwrap();
    let addr = listening.local_addr();
    let path = "/api/v1/breakers/payments";

    let (status, row) = get(addr, path).await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["kind"], "shared");
    assert_eq!(
        (&row["state"], &row["fleet"]["state"]),
        (&"closed".into(), &"closed".into())
    );
    assert_eq!(row["fleet"]["id"], "payments");
    assert_eq!(row["fleet"]["replica"], "replica-a");
    assert_eq!(row["fleet"]["store"], "healthy");

    // Replica B trips; A's API shows the fleet open, caused by B, and A's breaker follows.
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Open);
    let row = poll(addr, path, |r| {
        r["fleet"]["state"] == "open" && r["state"] == "open"
    })
    .await;
    assert_eq!(row["fleet"]["caused_by"], "replica-b");
    assert_eq!(row["fleet"]["reason"], "consecutive_failures");
    assert_eq!(row["fleet"]["known"], true);
    let left = row["fleet"]["retry_after_ms"].as_u64().unwrap();
    assert!(
        (20_000..=30_000).contains(&left),
        "the fleet's deadline, 30 s after B's trip: {left} ms left"
    );
    assert_eq!(a.fleet_view().state, State::Open);

    // The token is required: without it (or with a wrong one) nothing changes anywhere.
    let actions = "/api/v1/breakers/payments/actions";
    let (status, body) = post(addr, actions, None, r#"{"action":"reset"}"#).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(
        addr,
        actions,
        Some("not-the-token-0123456789"),
        r#"{"action":"reset"}"#,
    )
    .await;
    assert_eq!(status, 401, "{body}");
    store_b.sync().await.unwrap();
    assert_eq!((a.state(), b.state()), (State::Open, State::Open));
    assert_eq!(b.fleet_view().state, State::Open);

    // With it, `reset` closes the fleet's breaker: B admits again.
    let (status, body) = post(addr, actions, Some(TOKEN), r#"{"action":"reset"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fleet"]["state"], "closed", "{body}");
    assert_eq!(body["fleet"]["caused_by"], "replica-a", "{body}");
    eventually("B closed by A's reset", || b.state() == State::Closed).await;
    b.try_acquire().unwrap().success();

    // `force-open` through A's API: B rejects, as forced open.
    let (status, body) = post(
        addr,
        actions,
        Some(TOKEN),
        r#"{"action":"force-open","reason":"drill"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fleet"]["state"], "forced-open", "{body}");
    eventually("B forced open by A's action", || {
        b.try_acquire()
            .is_err_and(|r| r.reason() == RejectReason::ForcedOpen)
    })
    .await;
    eventually("A forced open too", || a.state() == State::ForcedOpen).await;
    let row = poll(addr, path, |r| r["state"] == "forced-open").await;
    assert_eq!(row["fleet"]["state"], "forced-open");
    assert!(
        was_logged(&[
            "who=\"ops\"",
            "action=\"force-open\"",
            "breaker=\"payments\"",
            "fleet=true",
            "reason=\"drill\"",
        ]),
        "audited as a fleet action: {:?}",
        logged().lock().unwrap()
    );
    drop(listening);
}

#[circuit_breaker(
    name = "admin_fleet_checkout",
    threshold = 3,
    cooldown = "30s",
    scope = "shared"
)]
async fn checkout(fail: bool) -> Result<u32, std::io::Error> {
    if fail {
        Err(std::io::Error::other("down"))
    } else {
        Ok(1)
    }
}

#[circuit_breaker(name = "admin_fleet_hosts", threshold = 3, cooldown = "30s", key = host, scope = "shared")]
async fn by_host(host: &str, fail: bool) -> Result<u32, std::io::Error> {
    let _ = host;
    if fail {
        Err(std::io::Error::other("down"))
    } else {
        Ok(2)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_the_library_shared_shows_its_fleet_view_in_its_own_row() {
    logged();
    let Some(server) = Server::start() else {
        return;
    };
    let ns = format!("admin-fleet-attr-{}", std::process::id());
    let store_a = replica(&server, &ns, "replica-a").await;
    let store_b = replica(&server, &ns, "replica-b").await;
    // Replica A is this process: its `#[circuit_breaker(scope = "shared")]` function is
    // shared with the installed store at its first call.
    breaker_redis::install(store_a.clone()).unwrap();
    assert_eq!(checkout(false).await.unwrap(), 1);
    assert_eq!(by_host("eu", false).await.unwrap(), 2);
    let b = shared(&store_b, "admin_fleet_checkout");
    let b_hosts = CircuitBreaker::builder(policy())
        .name("admin_fleet_hosts")
        .build_factory()
        .unwrap();
    let b_eu = store_b.share(&b_hosts.create_keyed("eu")).unwrap();
    store_a.sync().await.unwrap();
    store_b.sync().await.unwrap();

    // No `store(..)` and no `shared(..)`: the installed store is searched.
    let admin = Admin::builder().admin_token("ops", TOKEN).build();
    let listening = admin.listen().await.unwrap();
    let addr = listening.local_addr();
    let path = "/api/v1/breakers/admin_fleet_checkout";
    let (status, row) = get(addr, path).await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["kind"], "function", "{row}");
    assert_eq!(row["fleet"]["id"], "admin_fleet_checkout", "{row}");
    assert_eq!(row["fleet"]["state"], "closed", "{row}");

    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    let row = poll(addr, path, |r| {
        r["fleet"]["state"] == "open" && r["state"] == "open"
    })
    .await;
    assert_eq!(row["fleet"]["caused_by"], "replica-b");
    assert_eq!(row["kind"], "function", "still its function's row");
    let listed = poll(addr, "/api/v1/breakers", |_| true).await;
    let ids: Vec<&str> = listed["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .filter(|id| id.contains("checkout"))
        .collect();
    assert_eq!(
        ids,
        ["admin_fleet_checkout"],
        "one row for it, not a second `shared` one"
    );

    // `force-closed` through A's API reaches B.
    let actions = "/api/v1/breakers/admin_fleet_checkout/actions";
    let (status, body) = post(addr, actions, Some(TOKEN), r#"{"action":"force-closed"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fleet"]["state"], "forced-closed", "{body}");
    eventually("B forced closed by A's action", || {
        b.state() == State::ForcedClosed
    })
    .await;
    // Forced closed here too: failures past the threshold trip nothing, the next call runs.
    for _ in 0..4 {
        checkout(true).await.unwrap_err();
    }
    assert_eq!(checkout(false).await.unwrap(), 1);

    // A key of a shared keyed group: B trips its `eu`; A's key view shows the fleet open, and
    // a `reset` of that key through A's API closes B's.
    for _ in 0..3 {
        b_eu.try_acquire().unwrap().failure();
    }
    assert_eq!(b_eu.state(), State::Open);
    let key = "/api/v1/breakers/admin_fleet_hosts/keys/eu";
    let view = poll(addr, key, |k| {
        k["fleet"]["state"] == "open" && k["state"] == "open"
    })
    .await;
    assert_eq!(view["fleet"]["caused_by"], "replica-b", "{view}");
    assert_eq!(view["fleet"]["id"], b_eu.id().as_str(), "{view}");
    let (status, body) = post(
        addr,
        &format!("{key}/actions"),
        Some(TOKEN),
        r#"{"action":"reset"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fleet"]["state"], "closed", "{body}");
    eventually("B's key closed by A's reset", || {
        b_eu.state() == State::Closed
    })
    .await;
    drop(listening);
}
