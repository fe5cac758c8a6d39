//! Limits and secrets against a real server (issue 26, item 5): every keyed breaker's id fits
//! what the scripts take, so hostile and long keys are shared and never break a flush batch;
//! a bad name is refused at registration, escaped in the message; a refused password reads as
//! an authentication failure, at connect and when the server's password changes under a live
//! store.
//!
//! Its own test binary: it reads the process's log lines, which the `redis` binary's tests
//! would write into too.

#[macro_use]
#[path = "redis/common.rs"]
mod common;

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_redis::names::MAX_ID_LEN;
use breaker_redis::{BreakerId, RegisterError, ReplicaId, Store, StoreConfig, StoreError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn config(url: &str, ns: &str, replica: &str) -> StoreConfig {
    StoreConfig::new(url, ns)
        .unwrap()
        .replica(ReplicaId::new(replica).unwrap())
        .flush_interval(Duration::from_millis(50))
}

fn one_failure_opens() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

/// The breakers of `keys` of a keyed factory named `name`, each shared with `store`.
fn keyed(store: &Store, name: &str, keys: &[String]) -> Vec<CircuitBreaker> {
    let factory = CircuitBreaker::builder(one_failure_opens())
        .name(name)
        .build_factory()
        .unwrap();
    keys.iter()
        .map(|k| {
            let b = factory.create_keyed(k.as_str());
            store.share(&b).expect("every key's breaker is shared");
            b
        })
        .collect()
}

/// Waits (bounded, 5 s) until `cond`.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Keys of any length and bytes are shared: a trip of each key's breaker on one replica opens
/// the same key's breaker on another (its own connection), and only that one; every flush
/// batch is accepted whole. Before, a key of 256 bytes of `é` (771 bytes escaped, over the
/// script's 600) was accepted, never shared, and failed every flush it was in.
#[tokio::test]
async fn long_and_hostile_keys_are_shared_and_never_break_a_flush() {
    let s = server!();
    let ns = common::unique_ns("keys");
    let a = Store::connect(config(&s.url(), &ns, "a")).await.unwrap();
    let b = Store::connect(config(&s.url(), &ns, "b")).await.unwrap();
    // The longest name, so every id is at its longest.
    let name = "n".repeat(128);
    let keys = [
        "é".repeat(128),                  // 256 bytes, 768 escaped: hashed
        format!("{}x", "é".repeat(128)),  // differs from the first past its prefix
        "k".repeat(10_000),               // hashed
        "k".repeat(10_001),               // one byte more: another id
        "a\r\nFLUSHALL\r\n".to_owned(),   // escaped whole
        "x".repeat(MAX_ID_LEN - 128 - 1), // the longest key kept whole under this name
        "x".repeat(MAX_ID_LEN - 128),     // one byte more: hashed
    ];
    // Both replicas make every key's breaker (and share it) before any trip.
    let (ha, hb) = (keyed(&a, &name, &keys), keyed(&b, &name, &keys));
    let mut ids = Vec::new();
    for k in &keys {
        let id = BreakerId::keyed(&name, k).unwrap();
        assert!(id.as_str().len() <= MAX_ID_LEN, "{id:?}");
        ids.push(id);
    }
    for (i, x) in ids.iter().enumerate() {
        for y in &ids[i + 1..] {
            assert_ne!(x, y);
        }
    }
    assert_eq!(ids[5].as_str(), format!("{name}#{}", "x".repeat(127)));
    assert!(ids[6].as_str().contains('~'), "{:?}", ids[6]);
    // Every breaker counted on `a`, flushed in one batch with a plain neighbour.
    let neighbours: Vec<_> = [&a, &b]
        .iter()
        .map(|st| {
            let n = CircuitBreaker::builder(one_failure_opens())
                .name("neighbour")
                .build()
                .unwrap();
            st.share(&n).unwrap();
            n
        })
        .collect();
    for x in ha.iter().chain(&neighbours[..1]) {
        x.try_acquire().unwrap().success();
    }
    a.flush_now().await.unwrap();
    b.sync().await.unwrap();
    for i in 0..keys.len() {
        ha[i].try_acquire().unwrap().failure();
        until(&format!("key {i} open on replica b"), || {
            hb[i].state() == State::Open
        })
        .await;
        // The keys not yet tripped are still closed on b.
        for later in &hb[i + 1..] {
            assert_eq!(later.state(), State::Closed, "key {i}");
        }
        a.flush_now().await.unwrap();
    }
    neighbours[0].try_acquire().unwrap().failure();
    until("the neighbour open on replica b", || {
        neighbours[1].state() == State::Open
    })
    .await;
    assert_eq!((a.stats().errors, b.stats().errors), (0, 0));
}

/// A name that is not a valid shared breaker name is refused at `share`, the name escaped in
/// the message: a name with a newline cannot forge a log line.
#[tokio::test]
async fn bad_names_are_refused_at_registration_escaped() {
    let s = server!();
    let st = Store::connect(config(&s.url(), &common::unique_ns("names"), "a"))
        .await
        .unwrap();
    let forged = CircuitBreaker::builder(one_failure_opens())
        .name("pay\nINFO breaker: forged line")
        .build()
        .unwrap();
    let e = st.share(&forged).unwrap_err();
    assert!(matches!(e, RegisterError::Name(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot share this breaker: invalid breaker name `pay\\nINFO breaker: forged line`: \
         character '\\n' at byte 3 is not allowed; expected only `A-Z a-z 0-9 _ . : -`"
    );
    let long = CircuitBreaker::builder(one_failure_opens())
        .name(format!("\u{1b}[31m{}", "a".repeat(200)))
        .build()
        .unwrap();
    assert_eq!(
        st.share(&long).unwrap_err().to_string(),
        format!(
            "cannot share this breaker: invalid breaker name `\\u{{1b}}[31m{}...`: 205 bytes; \
             expected at most 128",
            "a".repeat(27)
        )
    );
    assert!(!e.to_string().contains('\n'));
}

/// Log lines of this process, for the degraded line's error.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log() -> Sink {
    static SINK: std::sync::OnceLock<Sink> = std::sync::OnceLock::new();
    SINK.get_or_init(|| {
        let sink = Sink::default();
        let writer = sink.clone();
        let _ = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .try_init();
        sink
    })
    .clone()
}

const PW: &str = "pw-Kx7/q?r#s@t:u";
const PW_URL: &str = "pw-Kx7%2Fq%3Fr%23s@t:u";

/// A wrong password at connect is an authentication failure, not a timeout or "unreachable",
/// and names neither password.
#[tokio::test]
async fn a_wrong_password_at_connect_reads_as_authentication() {
    let s = server!("--requirepass", PW);
    let ns = common::unique_ns("auth");
    let url = format!("redis://default:{PW_URL}-no@127.0.0.1:{}/", s.port());
    let e = Store::connect(config(&url, &ns, "a")).await.unwrap_err();
    assert!(matches!(e, StoreError::Auth { op: "connect", .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "store authentication failed during `connect` (check the user name and password of \
         the store URL): WRONGPASS: invalid username-password pair or user is disabled."
    );
    // The right one connects (the password's `/ ? #` percent-encoded, `@ :` as written).
    let url = format!("redis://default:{PW_URL}@127.0.0.1:{}/", s.port());
    Store::connect(config(&url, &ns, "a")).await.unwrap();
}

/// The server's password changed under a live store (`CONFIG SET requirepass`, then `CLIENT
/// KILL`): the store's errors and its degraded log line say authentication failed, none is a
/// timeout; once the old password is back, the store recovers by itself.
#[tokio::test]
async fn a_password_changed_on_a_live_server_reads_as_authentication() {
    let sink = log();
    let s = server!("--requirepass", PW);
    let ns = common::unique_ns("reauth");
    let url = format!("redis://default:{PW_URL}@127.0.0.1:{}/", s.port());
    let st = Store::connect(config(&url, &ns, "a").store_breaker(
        2,
        Duration::from_millis(50),
        Duration::from_millis(100),
    ))
    .await
    .unwrap();
    let breaker = CircuitBreaker::builder(one_failure_opens())
        .name("dep")
        .build()
        .unwrap();
    let shared = st.share(&breaker).unwrap();
    st.sync().await.unwrap();
    let admin = |password: &str, args: &[&str]| {
        let client = redis::Client::open(format!(
            "redis://default:{password}@127.0.0.1:{}/",
            s.port()
        ))
        .unwrap();
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query::<redis::Value>(&mut conn).unwrap();
    };
    admin(PW_URL, &["CONFIG", "SET", "requirepass", "rotated-pw"]);
    // The store's connection carries its subscription: a `pubsub` client to the server.
    admin("rotated-pw", &["CLIENT", "KILL", "TYPE", "pubsub"]);
    admin("rotated-pw", &["CLIENT", "KILL", "TYPE", "normal"]);
    // The killed connection's error, then the refused reconnection's.
    let mut errors = Vec::new();
    let start = Instant::now();
    while !errors.iter().any(|e| matches!(e, StoreError::Auth { .. })) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no authentication error within 5 s: {errors:?}"
        );
        if let Err(e) = shared.reset().await {
            errors.push(e);
        }
    }
    let (auth, before) = errors.split_last().unwrap();
    assert!(
        before
            .iter()
            .all(|e| matches!(e, StoreError::Unavailable { op: "force", .. })),
        "{errors:?}"
    );
    assert_eq!(
        auth.to_string(),
        "store authentication failed during `force` (check the user name and password of the \
         store URL): WRONGPASS: invalid username-password pair or user is disabled."
    );
    until("the store degraded", || {
        st.status() != breaker_redis::StoreStatus::Healthy
    })
    .await;
    let logs = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
    let degraded: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(&ns) && l.contains("store degraded"))
        .collect();
    assert_eq!(degraded.len(), 1, "{logs}");
    assert!(
        degraded[0].contains("error=store authentication failed during `"),
        "{}",
        degraded[0]
    );
    // The old password back: the store reconnects and answers again.
    admin("rotated-pw", &["CONFIG", "SET", "requirepass", PW]);
    // Until then every attempt is refused as such (or not made: the store's breaker is open).
    let start = Instant::now();
    while let Err(e) = shared.reset().await {
        assert!(
            matches!(e, StoreError::Auth { .. } | StoreError::Degraded { .. }),
            "{e:?}"
        );
        errors.push(e);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the store never recovered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in [logs, format!("{errors:?}"), format!("{st:?}")] {
        assert!(!t.contains("Kx7") && !t.contains("rotated-pw"), "{t}");
    }
}
