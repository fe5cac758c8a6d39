//! The store faults, done to real `redis-server` processes ([`crate::common::Server`]) and
//! through the in-test TCP proxy ([`crate::common::Proxy`]): every replica reaches the store
//! through a proxy of its own, so a partition can cut some replicas off and a failover can
//! move them all.

use crate::common::{Proxy, Server};
use crate::fleet::N;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The store's password in the authentication fault ..
const PASSWORD: &str = "pw-faults-one";
/// .. and the one the server is switched to during it.
const ROTATED: &str = "pw-faults-two";

/// One store fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL, down for [`OUTAGE`], restarted empty on the same port (no persistence).
    Kill,
    /// `FLUSHALL`.
    Flush,
    /// SIGSTOP for [`SHORT_HANG`] (shorter than the cooldown), then SIGCONT.
    HangShort,
    /// SIGSTOP for [`LONG_HANG`] (longer than the cooldown), then SIGCONT.
    HangLong,
    /// `CONFIG SET requirepass` to another password and `CLIENT KILL`: the replicas
    /// reconnect and are refused for [`OUTAGE`]; then the password is restored.
    Auth,
    /// Failover to a replica server whose link was black-holed before the last writes:
    /// `REPLICAOF NO ONE` on it, every replica's proxy moved to it, the old primary killed.
    Failover,
    /// Keys evicted under `maxmemory` (`allkeys-random`): filler keys written until every key
    /// of the fleet's namespace has been evicted at least once, then the limit lifted. Random,
    /// not LRU: under `allkeys-lru` a key the replicas keep touching (a window's key written
    /// on every outcome) is never the least recently used one, so whether it was evicted within
    /// the rounds depended on the replicas' timing (a CI run failed so).
    Evict,
    /// Replicas r0 and r1 lose every reply for [`PARTITION`] (their requests still run).
    PartitionDrop,
    /// Replicas r0 and r1 see 300 ms more latency each way (3 x the operation timeout) for
    /// [`PARTITION`].
    PartitionDelay,
    /// Replicas r0 and r1 are black-holed (sockets open, nothing through) for [`PARTITION`];
    /// what was held is delivered when it heals.
    PartitionBlackhole,
}

/// How long the store is down (kill) or refuses the replicas (authentication).
pub const OUTAGE: Duration = Duration::from_millis(800);
/// A hang shorter than the cooldown.
pub const SHORT_HANG: Duration = Duration::from_millis(250);
/// A hang longer than the cooldown (and than the grace after which a rejection is the store's).
pub const LONG_HANG: Duration = Duration::from_millis(1500);
/// How long a partition lasts.
pub const PARTITION: Duration = Duration::from_millis(1200);

impl Fault {
    /// Every fault, in the README's order.
    pub const ALL: [Fault; 10] = [
        Fault::Kill,
        Fault::Flush,
        Fault::HangShort,
        Fault::HangLong,
        Fault::Auth,
        Fault::Failover,
        Fault::Evict,
        Fault::PartitionDrop,
        Fault::PartitionDelay,
        Fault::PartitionBlackhole,
    ];

    /// A short name for namespaces and reports.
    pub fn slug(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Flush => "flushall",
            Fault::HangShort => "hang-short",
            Fault::HangLong => "hang-long",
            Fault::Auth => "auth",
            Fault::Failover => "failover",
            Fault::Evict => "evict",
            Fault::PartitionDrop => "partition-drop",
            Fault::PartitionDelay => "partition-delay",
            Fault::PartitionBlackhole => "partition-blackhole",
        }
    }

    /// What it is, for the README's table.
    pub fn describe(self) -> &'static str {
        match self {
            Fault::Kill => "kill -9, restarted empty after 800 ms",
            Fault::Flush => "`FLUSHALL`",
            Fault::HangShort => "SIGSTOP 250 ms (< cooldown)",
            Fault::HangLong => "SIGSTOP 1.5 s (> cooldown)",
            Fault::Auth => "`requirepass` changed + `CLIENT KILL`, restored after 800 ms",
            Fault::Failover => "failover to a lagging replica (`REPLICAOF NO ONE`)",
            Fault::Evict => "keys evicted (`maxmemory`, `allkeys-random`)",
            Fault::PartitionDrop => "partition (2 of 3 replicas): replies dropped 1.2 s",
            Fault::PartitionDelay => "partition (2 of 3 replicas): +300 ms each way 1.2 s",
            Fault::PartitionBlackhole => "partition (2 of 3 replicas): black-holed 1.2 s",
        }
    }

    /// How many replicas may run degraded (probing by their local rules) during the fault.
    pub fn degraded_replicas(self) -> usize {
        match self {
            Fault::Flush | Fault::Evict => 0,
            Fault::PartitionDrop | Fault::PartitionDelay | Fault::PartitionBlackhole => N - 1,
            Fault::Kill | Fault::HangShort | Fault::HangLong | Fault::Auth | Fault::Failover => N,
        }
    }

    /// Whether the replicas' logs must say the authentication failed.
    pub fn says_authentication_failed(self) -> bool {
        self == Fault::Auth
    }
}

/// A blocking admin connection to `127.0.0.1:port` (2 s timeouts), authenticated with
/// `password` if given.
fn admin(port: u16, password: Option<&str>) -> redis::Connection {
    let url = match password {
        Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}/"),
        None => format!("redis://127.0.0.1:{port}/"),
    };
    let conn = redis::Client::open(url)
        .expect("client")
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("admin connection");
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    conn
}

/// Runs one admin command.
///
/// # Panics
/// If it fails.
fn cmd<T: redis::FromRedisValue>(conn: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(conn)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Blocking work on a runtime worker (a server start, admin commands).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The servers and proxies of one fault test.
pub struct Env {
    primary: Server,
    /// The replica server a failover promotes, and the proxy its replication link goes
    /// through (black-holed to make it lag).
    standby: Option<(Server, Proxy)>,
    proxies: Vec<Proxy>,
    password: Option<&'static str>,
    ns: String,
}

impl Env {
    /// The servers `fault` needs and one proxy per replica; `None` (after a notice) when
    /// redis-server is not installed and `REQUIRE_REDIS` is not set.
    pub async fn start(fault: Fault, ns: &str) -> Option<Env> {
        let password = (fault == Fault::Auth).then_some(PASSWORD);
        let primary = match fault {
            Fault::Auth => blocking(|| Server::start(&["--requirepass", PASSWORD]))?,
            Fault::Evict => blocking(|| Server::start(&["--maxmemory-policy", "allkeys-random"]))?,
            _ => blocking(|| Server::start(&[]))?,
        };
        let standby = if fault == Fault::Failover {
            let standby = blocking(|| Server::start(&[]))?;
            let link = Proxy::start(primary.port()).await;
            blocking(|| replicate_through(&standby, link.port()));
            Some((standby, link))
        } else {
            None
        };
        let mut proxies = Vec::new();
        for _ in 0..N {
            proxies.push(Proxy::start(primary.port()).await);
        }
        Some(Env {
            primary,
            standby,
            proxies,
            password,
            ns: ns.to_owned(),
        })
    }

    /// Replica `r`'s store URL (its proxy; with the password, if the store has one).
    pub fn url(&self, r: usize) -> String {
        let port = self.proxies[r].port();
        match self.password {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}/"),
            None => format!("redis://127.0.0.1:{port}/"),
        }
    }

    /// Every replica's store URL.
    pub fn urls(&self) -> Vec<String> {
        (0..N).map(|r| self.url(r)).collect()
    }

    /// What must happen before the fleet's last writes before the fault: the failover's
    /// standby stops receiving them (its link is black-holed once it has caught up).
    pub async fn prepare(&mut self, fault: Fault) {
        if let (Fault::Failover, Some((_, link))) = (fault, &self.standby) {
            let port = self.primary.port();
            let acked: i64 = blocking(|| cmd(&mut admin(port, None), &["WAIT", "1", "2000"]));
            assert_eq!(acked, 1, "the standby caught up before its link was cut");
            link.blackhole();
        }
    }

    /// Does `fault` from now until it ends; returns when it ended.
    pub async fn inject(&mut self, fault: Fault) -> Instant {
        match fault {
            Fault::Kill => {
                blocking(|| self.primary.kill());
                tokio::time::sleep(OUTAGE).await;
                blocking(|| self.primary.restart());
            }
            Fault::Flush => {
                let port = self.primary.port();
                let _: () = blocking(|| cmd(&mut admin(port, None), &["FLUSHALL"]));
            }
            Fault::HangShort | Fault::HangLong => {
                self.primary.pause();
                let hang = if fault == Fault::HangShort {
                    SHORT_HANG
                } else {
                    LONG_HANG
                };
                tokio::time::sleep(hang).await;
                self.primary.resume();
            }
            Fault::Auth => {
                let port = self.primary.port();
                let mut conn = blocking(|| admin(port, Some(PASSWORD)));
                blocking(|| {
                    let _: () = cmd(&mut conn, &["CONFIG", "SET", "requirepass", ROTATED]);
                    let _: i64 = cmd(&mut conn, &["CLIENT", "KILL", "TYPE", "normal"]);
                    let _: i64 = cmd(&mut conn, &["CLIENT", "KILL", "TYPE", "pubsub"]);
                });
                tokio::time::sleep(OUTAGE).await;
                // The connection that changed it is still authenticated (CLIENT KILL skips it).
                blocking(|| {
                    let _: () = cmd(&mut conn, &["CONFIG", "SET", "requirepass", PASSWORD]);
                });
            }
            Fault::Failover => {
                let (standby, _) = self.standby.as_ref().expect("a failover has a standby");
                let port = standby.port();
                let _: () = blocking(|| cmd(&mut admin(port, None), &["REPLICAOF", "NO", "ONE"]));
                for p in &self.proxies {
                    p.switch_to(port);
                }
                blocking(|| self.primary.kill());
            }
            Fault::Evict => {
                let port = self.primary.port();
                let ns = self.ns.clone();
                blocking(|| evict_namespace(port, &ns));
            }
            Fault::PartitionDrop | Fault::PartitionDelay | Fault::PartitionBlackhole => {
                // r0 and r1; r2 (quiet during the fault) keeps its store.
                let cut = &self.proxies[..N - 1];
                for p in cut {
                    match fault {
                        Fault::PartitionDrop => p.drop_replies(),
                        Fault::PartitionDelay => p.set_latency(OP_LATENCY),
                        _ => p.blackhole(),
                    }
                }
                tokio::time::sleep(PARTITION).await;
                for p in cut {
                    p.set_latency(Duration::ZERO);
                    p.heal();
                    if fault == Fault::PartitionDrop {
                        // Replies were lost mid-stream: the connection ends with the loss.
                        p.cut();
                    }
                }
            }
        }
        Instant::now()
    }
}

/// The partition's added latency, each way.
const OP_LATENCY: Duration = Duration::from_millis(300);

/// Makes `standby` a replica of the server behind `link_port` (a proxy) and waits (10 s)
/// until it is in sync.
fn replicate_through(standby: &Server, link_port: u16) {
    let mut conn = admin(standby.port(), None);
    let _: () = cmd(
        &mut conn,
        &["REPLICAOF", "127.0.0.1", &link_port.to_string()],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let info: String = cmd(&mut conn, &["INFO", "replication"]);
        if info.contains("master_link_status:up") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the standby's replication link did not come up");
}

/// The keys of namespace `ns` (every key that names it).
fn namespace_keys(conn: &mut redis::Connection, ns: &str) -> HashSet<String> {
    let pattern = format!("*{ns}*");
    let mut cursor = 0u64;
    let mut keys = HashSet::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(conn)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// Lowers `maxmemory` just above what is used and writes filler keys (2 MiB a round, at most
/// 64 rounds) until every key of namespace `ns` there at the start has been evicted at least
/// once (told by keyspace notifications), then lifts the limit.
///
/// # Panics
/// If the namespace has no keys, or they are not all evicted within the rounds.
fn evict_namespace(port: u16, ns: &str) {
    let mut conn = admin(port, None);
    let _: () = cmd(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", "Ee"],
    );
    let evicted: Arc<Mutex<HashSet<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let listener = {
        let (evicted, stop) = (Arc::clone(&evicted), Arc::clone(&stop));
        let mut sub = admin(port, None);
        sub.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let mut ps = sub.as_pubsub();
            ps.subscribe("__keyevent@0__:evicted").expect("subscribe");
            ready_tx.send(()).unwrap();
            while !stop.load(Ordering::Acquire) {
                if let Ok(msg) = ps.get_message() {
                    if let Ok(key) = msg.get_payload::<String>() {
                        evicted.lock().unwrap().insert(key);
                    }
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(2))
            .expect("subscribed to evictions");
        t
    };
    let keys = namespace_keys(&mut conn, ns);
    assert!(
        !keys.is_empty(),
        "the fleet's namespace `{ns}` has keys to evict"
    );
    let info: String = cmd(&mut conn, &["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    let limit = (used + 512 * 1024).to_string();
    let _: () = cmd(&mut conn, &["CONFIG", "SET", "maxmemory", &limit]);
    let filler = "x".repeat(4096);
    let mut rounds = 0;
    while !keys.iter().all(|k| evicted.lock().unwrap().contains(k)) {
        assert!(
            rounds < 64,
            "after {rounds} rounds of filler, keys of the namespace never evicted: {:?}",
            keys.iter()
                .filter(|k| !evicted.lock().unwrap().contains(*k))
                .collect::<Vec<_>>()
        );
        let mut pipe = redis::pipe();
        for i in 0..512 {
            pipe.cmd("SET")
                .arg(format!("filler:{rounds}:{i}"))
                .arg(&filler)
                .ignore();
        }
        // A write refused for memory is part of the fault, not of the harness.
        let _: redis::RedisResult<()> = pipe.query(&mut conn);
        rounds += 1;
        // Notifications arrive on the other connection.
        std::thread::sleep(Duration::from_millis(5));
    }
    let _: () = cmd(&mut conn, &["CONFIG", "SET", "maxmemory", "0"]);
    stop.store(true, Ordering::Release);
    let _ = listener.join();
}
