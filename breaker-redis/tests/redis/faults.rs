//! Real faults: the store killed mid-run and restarted empty (G7, repair), hung (SIGSTOP,
//! CLIENT PAUSE: bounded latency, the store's breaker opens), a partition of some replicas
//! (blackhole, latency, one-way loss through the proxy), pub/sub connections killed (poll
//! fallback, resubscribe), a failover that loses a transition (generation repair), the three
//! store-error modes, starting while the store is down, and credentials kept out of errors,
//! Debug and logs.

use crate::common::{unique_ns, Proxy};
use crate::coordinator::{config, eventually};
use breaker_core::breaker::State;
use breaker_core::clock::Clock;
use breaker_redis::testing::{Admission, FakeBreaker, Outcome};
use breaker_redis::{
    BreakerId, OnStoreError, Reason, SharedPolicy, Store, StoreConfig, StoreError, StoreStatus,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn policy() -> SharedPolicy {
    SharedPolicy {
        failure_rate_percent: Some(50.0),
        min_calls: 10,
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..SharedPolicy::default()
    }
}

fn id() -> BreakerId {
    BreakerId::new("dep").unwrap()
}

/// Fast failure detection: 100 ms per operation, the store's breaker opens after 2 failures
/// for 50 ms (doubling to 200 ms).
fn fast(cfg: StoreConfig) -> StoreConfig {
    cfg.op_timeout(Duration::from_millis(100))
        .connect_timeout(Duration::from_millis(300))
        .store_breaker(2, Duration::from_millis(50), Duration::from_millis(200))
}

async fn fast_replica(url: &str, ns: &str, name: &str) -> Store {
    Store::connect(fast(config(url, ns, name, Clock::system())))
        .await
        .unwrap()
}

/// Flushes until the store answers (bounded, 5 s).
async fn flush_until_ok(st: &Store, f: &FakeBreaker) -> Duration {
    let start = Instant::now();
    loop {
        f.record(Outcome::Success);
        if st.flush_now().await.is_ok() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "store never answered again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fails flushes until the store's breaker is open (bounded).
async fn degrade(st: &Store, f: &FakeBreaker) {
    let start = Instant::now();
    while st.status() == StoreStatus::Healthy {
        f.record(Outcome::Success);
        let _ = st.flush_now().await;
        assert!(start.elapsed() < Duration::from_secs(5), "never degraded");
    }
}

/// G7 and repair: the store is killed while the fleet is open, restarted empty on the same
/// port; nothing fails meanwhile (`local`: the known deadline is honoured), and the first
/// flush after it is back restores the open state from the replicas' high-water marks.
#[tokio::test]
async fn the_store_killed_and_restarted_empty_is_repaired() {
    let mut s = server!();
    let ns = unique_ns("kill");
    let a = fast_replica(&s.url(), &ns, "a").await;
    let b = fast_replica(&s.url(), &ns, "b").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    let fb = FakeBreaker::register(&b, id(), &policy()).unwrap();
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    eventually("push", || fb.state() == State::Open).await;
    s.kill();
    degrade(&a, &fa).await;
    assert_eq!(a.status(), StoreStatus::DegradedLocal);
    assert_eq!(fa.status().0, StoreStatus::DegradedLocal);
    // While degraded: decisions are local and immediate; the open deadline is honoured.
    let t = Instant::now();
    for _ in 0..1000 {
        assert_eq!(fa.admit(), Admission::Rejected);
    }
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "no call waits for the store"
    );
    let e = a.flush_now().await.unwrap_err();
    assert!(matches!(e, StoreError::Degraded { .. }), "{e}");
    s.restart();
    let took = flush_until_ok(&a, &fa).await;
    eprintln!("G7: store back, state re-adopted after {took:?}");
    assert_eq!(a.status(), StoreStatus::Healthy);
    assert!(a.stats().repairs >= 1, "repaired from the high-water mark");
    assert_eq!(a.stats().recovered_events, 1);
    let state: Vec<String> = s.cmd(&["HMGET", &format!("br:{{{ns}}}:s:dep"), "g", "st"]);
    assert_eq!(state, ["1", "1"], "generation 1, open: as before the crash");
    // b converges too (its own flush, or a push of the repair).
    flush_until_ok(&b, &fb).await;
    assert_eq!((fb.view().generation, fb.state()), (1, State::Open));
}

/// A degraded store's recovery flush carries every registered breaker (its reply re-adopts the
/// fleet's state). With many breakers it goes in round trips of at most
/// `MAX_BREAKERS_PER_ROUND_TRIP` breakers, each under the timeout: 3 x 4,096 + 1 breakers are
/// 25 calls in 4 round trips. It was one round trip the size of the fleet; past the timeout
/// (100,000 breakers on a 2-core VM with the default 250 ms) every recovery flush timed out and
/// the store never recovered.
#[tokio::test]
async fn a_degraded_store_with_many_breakers_recovers_in_bounded_round_trips() {
    use breaker_redis::protocol::{MAX_BREAKERS_PER_CALL, MAX_BREAKERS_PER_ROUND_TRIP};
    let s = server!();
    let ns = unique_ns("many");
    // A timeout long enough for a round trip on a loaded machine; failures detected after 2.
    let cfg = config(&s.url(), &ns, "a", Clock::system())
        .op_timeout(Duration::from_secs(2))
        .store_breaker(2, Duration::from_millis(50), Duration::from_millis(200));
    let st = Store::connect(cfg).await.unwrap();
    let n = 3 * MAX_BREAKERS_PER_ROUND_TRIP + 1;
    let calls = n.div_ceil(MAX_BREAKERS_PER_CALL) as u64;
    assert_eq!(calls, 25);
    let fakes: Vec<_> = (0..n)
        .map(|i| {
            let id = BreakerId::new(&format!("k{i}")).unwrap();
            FakeBreaker::register(&st, id, &policy()).unwrap()
        })
        .collect();
    let one = &fakes[0];
    // Every new breaker's shared state read (in batches as the registrations arrived).
    st.sync().await.unwrap();
    one.record(Outcome::Success);
    assert_eq!(st.flush_now().await.unwrap(), 1, "the one that counted");
    assert_eq!(st.stats().errors, 0);
    s.pause();
    degrade(&st, one).await;
    s.resume();
    let start = Instant::now();
    let sent = loop {
        let before = st.stats();
        one.record(Outcome::Success);
        match st.flush_now().await {
            Ok(sent) => {
                let after = st.stats();
                assert_eq!(
                    after.round_trips - before.round_trips,
                    4,
                    "the recovery flush"
                );
                assert_eq!(after.operations - before.operations, calls);
                break sent;
            }
            Err(e) => assert!(
                start.elapsed() < Duration::from_secs(10),
                "the store never recovered: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(sent, n, "the recovery flush carried every breaker");
    assert_eq!(st.status(), StoreStatus::Healthy);
    assert_eq!(st.stats().recovered_events, 1);
}

/// A hung store (SIGSTOP: socket open, no answer): each operation is bounded by the timeout,
/// the store's breaker opens after two, then nothing waits at all; probe requests are
/// answered at once; after SIGCONT it recovers.
#[tokio::test]
async fn a_hung_store_adds_bounded_latency_then_none() {
    let s = server!();
    let ns = unique_ns("hang");
    let a = fast_replica(&s.url(), &ns, "a").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    a.sync().await.unwrap();
    s.pause();
    let mut took = Vec::new();
    for _ in 0..2 {
        fa.record(Outcome::Failure);
        let t = Instant::now();
        let e = a.flush_now().await.unwrap_err();
        took.push(t.elapsed());
        assert!(matches!(e, StoreError::Timeout { .. }), "{e}");
    }
    assert!(
        took.iter().all(|d| *d < Duration::from_millis(250)),
        "bounded by the timeout: {took:?}"
    );
    assert_eq!(a.status(), StoreStatus::DegradedLocal);
    let t = Instant::now();
    for _ in 0..20 {
        fa.record(Outcome::Failure);
        let e = a.flush_now().await.unwrap_err();
        assert!(matches!(e, StoreError::Degraded { .. }), "{e}");
    }
    assert!(
        t.elapsed() < Duration::from_millis(40),
        "breaker open: no waiting ({:?})",
        t.elapsed()
    );
    assert!(a.stats().dropped_flushes >= 22);
    let errors = a.stats().errors;
    assert!(errors <= 4, "no storm of attempts: {errors}");
    s.resume();
    flush_until_ok(&a, &fa).await;
    assert_eq!(a.stats().degraded_events, 1);
    assert_eq!(a.stats().recovered_events, 1);
}

/// CLIENT PAUSE (the server stops answering writes for a while) reads as a hang.
#[tokio::test]
async fn client_pause_reads_as_a_hang() {
    let s = server!();
    let ns = unique_ns("cpause");
    let a = fast_replica(&s.url(), &ns, "a").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    a.sync().await.unwrap();
    let _: () = s.cmd(&["CLIENT", "PAUSE", "400", "WRITE"]);
    fa.record(Outcome::Success);
    let e = a.flush_now().await.unwrap_err();
    assert!(matches!(e, StoreError::Timeout { .. }), "{e}");
    let took = flush_until_ok(&a, &fa).await;
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The three store-error modes.
#[tokio::test]
async fn each_store_error_mode_does_what_it_says() {
    let mut s = server!();
    let ns = unique_ns("modes");
    let mk = |name: &str, mode: OnStoreError| {
        fast(config(&s.url(), &ns, name, Clock::system())).on_error(mode)
    };
    let local = Store::connect(mk("local", OnStoreError::Local))
        .await
        .unwrap();
    let open = Store::connect(mk("open", OnStoreError::Open))
        .await
        .unwrap();
    let grace = Duration::from_millis(800);
    let closed = Store::connect(mk("closed", OnStoreError::Closed { grace }))
        .await
        .unwrap();
    let fl = FakeBreaker::register(&local, id(), &policy()).unwrap();
    let fo = FakeBreaker::register(&open, id(), &policy()).unwrap();
    let fc = FakeBreaker::register(&closed, id(), &policy()).unwrap();
    fl.trip(Reason::ConsecutiveFailures);
    local.sync().await.unwrap();
    for f in [&fo, &fc] {
        eventually("push", || f.state() == State::Open).await;
    }
    s.kill();
    let t = Instant::now();
    futures_util::future::join3(
        degrade(&local, &fl),
        degrade(&open, &fo),
        degrade(&closed, &fc),
    )
    .await;
    assert_eq!(
        fl.admit(),
        Admission::Rejected,
        "local: the known open deadline holds"
    );
    assert_eq!(
        fo.admit(),
        Admission::Admitted,
        "open: shared state ignored"
    );
    assert_eq!(
        closed.status(),
        StoreStatus::DegradedLocal,
        "closed: local within the grace"
    );
    assert!(t.elapsed() < grace);
    let mut changes = closed.status_changes();
    tokio::time::timeout(
        Duration::from_secs(2),
        changes.wait_for(|s| *s == StoreStatus::DegradedRejectAll),
    )
    .await
    .expect("grace ends")
    .unwrap();
    assert!(t.elapsed() >= grace);
    assert_eq!(fc.status().0, StoreStatus::DegradedRejectAll);
    assert_eq!(fc.admit(), Admission::Rejected);
    s.restart();
    for (st, f) in [(&local, &fl), (&open, &fo), (&closed, &fc)] {
        flush_until_ok(st, f).await;
        assert_eq!(f.status().0, StoreStatus::Healthy);
    }
}

/// A replica cut off from the store (blackhole) degrades while the others trip the fleet; it
/// converges at its first flush after the partition heals. One-way loss (replies dropped)
/// applies writes the replica never hears of; it learns them at its next answered flush.
#[tokio::test]
async fn a_partitioned_replica_degrades_then_converges() {
    let s = server!();
    let ns = unique_ns("partition");
    let proxy = Proxy::start(s.port()).await;
    let a = fast_replica(&s.url(), &ns, "a").await;
    let b = fast_replica(&proxy.url(), &ns, "b").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    let fb = FakeBreaker::register(&b, id(), &policy()).unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    proxy.blackhole();
    degrade(&b, &fb).await;
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    assert_eq!(fa.state(), State::Open);
    assert_eq!(fb.state(), State::Closed, "b cannot know");
    assert_eq!(fb.admit(), Admission::Admitted, "local rules go on");
    proxy.heal();
    flush_until_ok(&b, &fb).await;
    eventually("b converged", || fb.state() == State::Open).await;

    // One-way loss: b's trip of the next closed period runs on the server, its reply is lost.
    a.reset(&id()).await.unwrap();
    eventually("reset reaches b", || fb.state() == State::Closed).await;
    proxy.drop_replies();
    fb.trip(Reason::ConsecutiveFailures);
    b.sync().await.unwrap();
    eventually("a sees b's trip", || fa.state() == State::Open).await;
    assert_eq!(fb.state(), State::Closed, "b never heard back");
    proxy.heal();
    proxy.cut();
    flush_until_ok(&b, &fb).await;
    eventually("b learns its own trip", || fb.state() == State::Open).await;
    assert!(fb.view().by_this_replica);

    // Latency above the timeout: bounded, degraded, no call waits.
    proxy.set_latency(Duration::from_millis(300));
    let t = Instant::now();
    degrade(&b, &fb).await;
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    proxy.set_latency(Duration::ZERO);
}

/// Pub/sub connections killed: a trip published meanwhile is learned at the next flush (poll),
/// and the connection is resubscribed, so later trips arrive by push again.
#[tokio::test]
async fn killed_pubsub_falls_back_to_poll_and_resubscribes() {
    let s = server!();
    let ns = unique_ns("pubsub");
    let a = fast_replica(&s.url(), &ns, "a").await;
    let b = fast_replica(&s.url(), &ns, "b").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    let fb = FakeBreaker::register(&b, id(), &policy()).unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    let killed: i64 = s.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(
        killed >= 2,
        "both replicas' connections are subscribed: {killed}"
    );
    // a's connection went with it: let it reconnect before it trips (a trip that meets a
    // dead connection is not retried; see the crate docs).
    flush_until_ok(&a, &fa).await;
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    // b learns it at its next flush at the latest.
    flush_until_ok(&b, &fb).await;
    eventually("b learns the trip", || fb.state() == State::Open).await;
    // Resubscribed: the reset arrives by push, without a flush of b's.
    let flushes = b.stats().flushes;
    a.reset(&id()).await.unwrap();
    eventually("push after resubscribe", || fb.state() == State::Closed).await;
    assert_eq!(b.stats().flushes, flushes);
}

/// Failover: a clean FAILOVER keeps the state; a promotion that lost a transition (the
/// replica detached before it was replicated) is repaired from the high-water marks.
#[tokio::test]
async fn a_failover_that_loses_a_transition_is_repaired() {
    let p = server!();
    let r = server!();
    let ns = unique_ns("failover");
    let proxy = Proxy::start(p.port()).await;
    let a = fast_replica(&proxy.url(), &ns, "a").await;
    let fa = FakeBreaker::register(&a, id(), &policy()).unwrap();
    a.sync().await.unwrap();
    r.replicate(&p);
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    let _: i64 = p.cmd(&["WAIT", "1", "2000"]);
    // Clean failover: r becomes the primary, the proxy follows.
    let _: () = p.cmd(&["FAILOVER", "TIMEOUT", "5000"]);
    let start = Instant::now();
    while !r
        .cmd::<String>(&["INFO", "replication"])
        .contains("role:master")
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "failover did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.switch_to(r.port());
    flush_until_ok(&a, &fa).await;
    assert_eq!((fa.view().generation, fa.state()), (1, State::Open));
    let repairs = a.stats().repairs;
    assert_eq!(repairs, 0, "nothing lost, nothing repaired");
    // Lossy promotion: p (now a replica of r) detaches, r makes a transition p never gets,
    // then p is promoted and the proxy moves to it.
    let _: () = p.cmd(&["REPLICAOF", "NO", "ONE"]);
    a.reset(&id()).await.unwrap();
    assert_eq!((fa.view().generation, fa.state()), (2, State::Closed));
    proxy.switch_to(p.port());
    flush_until_ok(&a, &fa).await;
    assert_eq!(
        a.stats().repairs,
        repairs + 1,
        "the lost reset was repaired"
    );
    let state: Vec<String> = p.cmd(&["HMGET", &format!("br:{{{ns}}}:s:dep"), "g", "st"]);
    assert_eq!(state, ["2", "0"]);
}

/// A replica started while the store is down runs degraded, then connects on its own.
#[tokio::test]
async fn a_replica_started_while_the_store_is_down_connects_later() {
    let mut s = server!();
    let ns = unique_ns("late");
    let url = s.url();
    s.kill();
    let st = Store::start(fast(config(&url, &ns, "a", Clock::system())));
    assert_eq!(st.status(), StoreStatus::DegradedLocal);
    let f = FakeBreaker::register(&st, id(), &policy()).unwrap();
    assert_eq!(f.admit(), Admission::Admitted);
    s.restart();
    let mut changes = st.status_changes();
    tokio::time::timeout(
        Duration::from_secs(5),
        changes.wait_for(|s| *s == StoreStatus::Healthy),
    )
    .await
    .expect("connected")
    .unwrap();
    flush_until_ok(&st, &f).await;
}

/// A port on loopback where nothing listens (bound by the OS, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A refused connection at start-up reads as that, at once: `Unavailable` with the client's
/// words (credentials removed), not a `Timeout` at the end of the connect timeout (30 s here).
/// No server needed.
#[tokio::test]
async fn a_refused_connection_at_start_up_is_unavailable_at_once() {
    let ns = unique_ns("refused");
    let url = format!("redis://svc:pw-Xk42-secret@127.0.0.1:{}/", closed_port());
    let cfg = config(&url, &ns, "a", Clock::system()).connect_timeout(Duration::from_secs(30));
    let start = Instant::now();
    let e = Store::connect(cfg).await.unwrap_err();
    let took = start.elapsed();
    match &e {
        StoreError::Unavailable { op, message } => {
            assert_eq!(*op, "connect");
            assert!(
                message.to_ascii_lowercase().contains("connection refused"),
                "{message}"
            );
        }
        other => panic!("expected `Unavailable` for a refused connection, got {other:?}"),
    }
    assert!(!format!("{e} {e:?}").contains("Xk42"), "{e:?}");
    // A refusal on loopback is known in well under a millisecond; the connection manager's
    // retries alone sleep 1.5 s or more (1 s, then 0.5 s, plus jitter) before they give up.
    assert!(took < Duration::from_secs(1), "took {took:?}");

    // With the default connect timeout (1 s), which those retries outlast: still the refusal.
    let cfg = config(&url, &unique_ns("refused"), "b", Clock::system());
    let e = Store::connect(cfg).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Unavailable { op: "connect", message }
            if message.to_ascii_lowercase().contains("connection refused")),
        "{e:?}"
    );
}

/// A store that accepts the connection and never answers is slow, not refused: `Timeout` at
/// the connect timeout. On tokio's paused clock (the 30 s pass at once).
#[tokio::test(start_paused = true)]
async fn a_store_that_never_answers_at_start_up_is_a_timeout() {
    // Listening (the kernel completes the handshake) but never accepting or answering.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}/", silent.local_addr().unwrap().port());
    let cfg = config(&url, &unique_ns("silent"), "a", Clock::system())
        .connect_timeout(Duration::from_secs(30));
    let start = tokio::time::Instant::now();
    let e = Store::connect(cfg).await.unwrap_err();
    assert_eq!(
        e,
        StoreError::Timeout {
            op: "connect",
            after: Duration::from_secs(30)
        }
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(31),
        "{took:?}"
    );
    drop(silent);
}

/// The process-wide log sink: one global subscriber for the whole test binary (a thread-local
/// one misses events whose callsites other test threads registered first). Every test's log
/// lines land here, so the credential check covers them all.
fn global_log() -> Sink {
    static SINK: std::sync::OnceLock<Sink> = std::sync::OnceLock::new();
    SINK.get_or_init(|| {
        let sink = Sink::default();
        let writer = sink.clone();
        let _ = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .try_init();
        sink
    })
    .clone()
}

/// A log sink for the credential test.
#[derive(Clone, Default)]
struct Sink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Credentials in the URL never appear in errors, Debug output, log lines or metrics.
#[tokio::test]
async fn credentials_never_leave_the_process() {
    const PW: &str = "pw-Zq81-secret";
    let mut s = server!("--requirepass", PW);
    let ns = unique_ns("creds");
    let url = format!("redis://default:{PW}@127.0.0.1:{}/", s.port());
    let sink = global_log();
    #[cfg(feature = "metrics")]
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    #[cfg(feature = "metrics")]
    let snapshotter = recorder.snapshotter();
    #[cfg(feature = "metrics")]
    let _mguard = metrics::set_default_local_recorder(&recorder);

    let cfg = fast(config(&url, &ns, "a", Clock::system()));
    let debug = format!("{cfg:?}");
    assert!(debug.contains("redis://***@127.0.0.1"), "{debug}");
    let st = Store::connect(cfg).await.unwrap();
    let f = FakeBreaker::register(&st, id(), &policy()).unwrap();
    f.record(Outcome::Failure);
    st.flush_now().await.unwrap();
    let mut texts = vec![debug, format!("{st:?}")];
    // A wrong password, and an invalid URL carrying one.
    let wrong = format!("redis://default:{PW}-wrong@127.0.0.1:{}/", s.port());
    let e = Store::connect(fast(config(&wrong, &ns, "b", Clock::system())))
        .await
        .unwrap_err();
    texts.push(e.to_string());
    texts.push(format!("{e:?}"));
    let e = StoreConfig::new(&format!("redis://u:{PW}@[bad"), &ns).unwrap_err();
    texts.push(e.to_string());
    // Degrade and recover: the log lines of both.
    s.kill();
    degrade(&st, &f).await;
    f.record(Outcome::Failure);
    let e = st.flush_now().await.unwrap_err();
    texts.push(e.to_string());
    s.restart(); // with --requirepass again
    flush_until_ok(&st, &f).await;
    let logs = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
    let ours: Vec<&str> = logs.lines().filter(|l| l.contains(ns.as_str())).collect();
    assert!(
        ours.iter().any(|l| l.contains("store degraded"))
            && ours.iter().any(|l| l.contains("store recovered")),
        "{logs}"
    );
    texts.push(logs);
    #[cfg(feature = "metrics")]
    {
        let snap = snapshotter.snapshot().into_vec();
        assert!(!snap.is_empty(), "metrics were recorded");
        texts.push(format!("{snap:?}"));
    }
    for t in &texts {
        assert!(
            !t.contains(PW) && !t.contains("Zq81"),
            "credential leaked: {t}"
        );
    }
}

/// TLS (`rediss://`) through rustls against a local TLS-only server whose certificate a
/// throw-away CA signed: works with that CA as the trusted root, refused without it.
#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_connections_verify_the_server() {
    let Some((s, pem)) = crate::common::Server::start_tls() else {
        return;
    };
    let ns = unique_ns("tls");
    let url = format!("rediss://127.0.0.1:{}/", s.port());
    let cfg = fast(config(&url, &ns, "a", Clock::system()))
        .connect_timeout(Duration::from_secs(5))
        .op_timeout(Duration::from_secs(2))
        .tls_root_certificate(pem);
    let st = Store::connect(cfg).await.unwrap();
    let f = FakeBreaker::register(&st, id(), &policy()).unwrap();
    f.record(Outcome::Failure);
    assert_eq!(st.flush_now().await.unwrap(), 1);
    f.trip(Reason::ConsecutiveFailures);
    st.sync().await.unwrap();
    assert_eq!(f.state(), State::Open);
    // Without the root: the self-signed certificate is not trusted.
    let e = Store::connect(fast(config(&url, &ns, "b", Clock::system())))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Unavailable { .. } | StoreError::Timeout { .. } | StoreError::Server { .. }
        ),
        "{e}"
    );
}
