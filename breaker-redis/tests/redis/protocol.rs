//! The server-side scripts against a real server: counts, fleet-rate trips, fencing, leases,
//! quorum, manual control, repair after a restart, the EVALSHA fallback, expiry and footprint
//! (G10), checked replies, and names that cannot escape their namespace.

use crate::common::{unique_ns, Server};
use breaker_core::breaker::State;
use breaker_redis::protocol::{
    Code, FlushItem, ForceTarget, HighWater, ProbeOutcome, Protocol, Reason, ScriptMode, Target,
};
use breaker_redis::{BreakerId, Namespace, ReplicaId, SharedPolicy, StoreError};
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

pub struct Fixture {
    pub ns: Namespace,
    pub conn: MultiplexedConnection,
}

pub async fn fixture(server: &Server) -> Fixture {
    let client = redis::Client::open(server.url()).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    Fixture {
        ns: Namespace::new(&unique_ns("proto")).unwrap(),
        conn,
    }
}

impl Fixture {
    pub fn replica(&self, id: &str) -> Protocol {
        Protocol::new(
            &self.ns,
            ReplicaId::new(id).unwrap(),
            Duration::from_secs(3),
            Duration::from_secs(60),
        )
        .with_fixed_jitter(0)
    }

    pub fn target(&self, name: &str, p: &SharedPolicy) -> Target {
        Target::new(
            &self.ns,
            BreakerId::new(name).unwrap(),
            p.compile().unwrap(),
        )
    }
}

pub fn counts<'a>(t: &'a Target, generation: u64, ok: u64, fail: u64) -> FlushItem<'a> {
    FlushItem {
        target: t,
        generation,
        successes: ok,
        failures: fail,
        slow: 0,
        high_water: HighWater::NONE,
    }
}

pub fn rate_policy() -> SharedPolicy {
    SharedPolicy {
        failure_rate_percent: Some(50.0),
        min_calls: 10,
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..SharedPolicy::default()
    }
}

#[tokio::test]
async fn library_loads_and_counts_are_added_to_the_window() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    assert_eq!(a.load(&mut f.conn).await.unwrap(), ScriptMode::Function);
    let t = f.target("inventory", &rate_policy());
    let r = a.flush(&mut f.conn, &[counts(&t, 0, 7, 2)]).await.unwrap();
    assert_eq!(r.items[0].code, Code::Applied);
    assert_eq!(r.items[0].state.state, State::Closed);
    assert_eq!(r.live_replicas, 1);
    let window: String = s.cmd(&["GET", &t.keys().window]);
    assert!(
        window.ends_with(":7:2:0") && !window.contains(';'),
        "{window}"
    );
    a.flush(&mut f.conn, &[counts(&t, 0, 1, 1)]).await.unwrap();
    let window: String = s.cmd(&["GET", &t.keys().window]);
    assert!(
        window.ends_with(":8:3:0") || window.contains(":1:1:0"),
        "{window}"
    );
}

/// G4 at the protocol level: a replica at 100 % failures does not trip a fleet whose aggregate
/// rate is below the threshold; the flush that takes the rate over it does.
#[tokio::test]
async fn fleet_rate_trips_only_when_the_aggregate_crosses_the_threshold() {
    let s = server!();
    let mut f = fixture(&s).await;
    let (sick, well) = (f.replica("sick"), f.replica("well"));
    let t = f.target("payments", &rate_policy());
    well.flush(&mut f.conn, &[counts(&t, 0, 40, 0)])
        .await
        .unwrap();
    let r = sick
        .flush(&mut f.conn, &[counts(&t, 0, 0, 30)])
        .await
        .unwrap();
    assert_eq!(r.items[0].code, Code::Applied, "30 / 70 = 43 % < 50 %");
    assert_eq!(r.items[0].state.state, State::Closed);
    let r = sick
        .flush(&mut f.conn, &[counts(&t, 0, 0, 10)])
        .await
        .unwrap();
    let it = &r.items[0];
    assert_eq!(it.code, Code::Tripped, "40 / 80 = 50 %");
    assert_eq!(it.state.state, State::Open);
    assert_eq!(it.state.generation, 1);
    assert_eq!(it.state.reason, Reason::FailureRate);
    assert_eq!(it.state.caused_by.as_ref().unwrap().as_str(), "sick");
    let dl = it.state.deadline_ms.unwrap();
    assert_eq!(dl - r.server_now_ms, 30_000, "deadline from server time");
    // The window of the closed period is gone with the transition.
    assert_eq!(s.cmd::<i64>(&["EXISTS", &t.keys().window]), 0);
}

/// Fencing (G9 by example): writes computed from an older generation are dropped.
#[tokio::test]
async fn writes_of_an_older_generation_are_dropped() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    let t = f.target("fenced", &rate_policy());
    let it = a
        .trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    assert_eq!((it.code, it.state.generation), (Code::Tripped, 1));
    let r = a.flush(&mut f.conn, &[counts(&t, 0, 0, 50)]).await.unwrap();
    assert_eq!(r.items[0].code, Code::Stale);
    assert_eq!(
        s.cmd::<i64>(&["EXISTS", &t.keys().window]),
        0,
        "nothing counted"
    );
    let it = a
        .trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    assert_eq!(
        (it.code, it.state.generation),
        (Code::Stale, 1),
        "no second opening"
    );
    let r = a.flush(&mut f.conn, &[counts(&t, 1, 0, 5)]).await.unwrap();
    assert_eq!(r.items[0].code, Code::Ignored, "open has no window");
    assert_eq!(
        a.trip(&mut f.conn, &t, 0, Reason::Manual)
            .await
            .unwrap_err(),
        StoreError::Config {
            message: "a trip's reason must be a trip rule, got `manual`".into()
        }
    );
}

fn probe_policy(probes: u32, lease_ms: u64) -> SharedPolicy {
    SharedPolicy {
        cooldown: Duration::from_millis(50),
        cooldown_max: Duration::from_millis(50),
        half_open_probes: probes,
        probe_lease: Duration::from_millis(lease_ms),
        ..rate_policy()
    }
}

async fn wait_half_open(
    f: &mut Fixture,
    p: &Protocol,
    t: &Target,
) -> breaker_redis::protocol::ItemReply {
    let start = Instant::now();
    loop {
        let it = p.acquire_probe(&mut f.conn, t, 1).await.unwrap();
        if it.code == Code::Applied || start.elapsed() > Duration::from_secs(3) {
            return it;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// G5 and G8 at the protocol level: leases never exceed the cap, and a leaked lease's slot is
/// back within the lease time.
#[tokio::test]
async fn probe_leases_are_capped_and_expire() {
    let s = server!();
    let mut f = fixture(&s).await;
    let (a, b) = (f.replica("a"), f.replica("b"));
    let t = f.target("leases", &probe_policy(2, 300));
    a.trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    let early = b.acquire_probe(&mut f.conn, &t, 1).await.unwrap();
    assert_eq!(
        (early.code, early.state.state),
        (Code::Denied, State::Open),
        "deadline not passed"
    );
    let first = wait_half_open(&mut f, &a, &t).await;
    assert_eq!(first.code, Code::Applied);
    assert_eq!(first.state.state, State::HalfOpen);
    assert_eq!(first.state.reason, Reason::CooldownElapsed);
    let more = a.acquire_probe(&mut f.conn, &t, 5).await.unwrap();
    assert_eq!(more.granted.len(), 1, "cap of 2 across the fleet");
    assert_eq!(more.leases_in_flight, 2);
    let full = b.acquire_probe(&mut f.conn, &t, 1).await.unwrap();
    assert_eq!(full.code, Code::Denied);
    // Both holders vanish without ending their probes: the slots come back by expiry.
    let leaked_at = Instant::now(); // just after the newer lease was granted
    let mut regained = Vec::new();
    while regained.len() < 2 {
        let it = b.acquire_probe(&mut f.conn, &t, 2).await.unwrap();
        assert!(it.leases_in_flight <= 2, "never above the cap");
        regained.extend(it.granted);
        assert!(
            leaked_at.elapsed() < Duration::from_secs(3),
            "slots never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let waited = leaked_at.elapsed();
    assert!(
        waited <= Duration::from_millis(300 + 100),
        "G8: back within the lease time, took {waited:?}"
    );
    assert!(
        waited >= Duration::from_millis(200),
        "not before the lease ran out: {waited:?}"
    );
    // The expired lease's late outcome is not counted.
    let it = a
        .end_probe(&mut f.conn, &t, &first.granted[0], ProbeOutcome::Success)
        .await
        .unwrap();
    assert_eq!(it.code, Code::Late);
    assert_eq!(it.state.state, State::HalfOpen);
}

#[tokio::test]
async fn probes_close_the_fleet_or_reopen_it_with_a_grown_cooldown() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    let p = SharedPolicy {
        successes_to_close: 2,
        half_open_probes: 2,
        cooldown_multiplier: 3.0,
        cooldown_max: Duration::from_millis(400),
        ..probe_policy(2, 5_000)
    };
    let t = f.target("cycle", &p);
    a.trip(&mut f.conn, &t, 0, Reason::FailureRate)
        .await
        .unwrap();
    let first = wait_half_open(&mut f, &a, &t).await;
    let it = a
        .end_probe(&mut f.conn, &t, &first.granted[0], ProbeOutcome::Failure)
        .await
        .unwrap();
    assert_eq!(it.state.state, State::Open);
    assert_eq!(it.state.reason, Reason::ProbeFailed);
    assert_eq!(it.state.streak, 2);
    let now: Vec<String> = s.cmd(&["TIME"]);
    let now_ms = now[0].parse::<u64>().unwrap() * 1000 + now[1].parse::<u64>().unwrap() / 1000;
    let left = it.state.deadline_ms.unwrap().saturating_sub(now_ms);
    assert!(
        (100..=150).contains(&left),
        "cooldown 50 ms x 3 = 150 ms, {left} left"
    );
    let second = wait_half_open(&mut f, &a, &t).await;
    let other = a.acquire_probe(&mut f.conn, &t, 1).await.unwrap();
    let it = a
        .end_probe(&mut f.conn, &t, &second.granted[0], ProbeOutcome::Neutral)
        .await
        .unwrap();
    assert_eq!((it.code, it.state.probe_successes), (Code::Applied, 0));
    let it = a
        .end_probe(&mut f.conn, &t, &other.granted[0], ProbeOutcome::Success)
        .await
        .unwrap();
    assert_eq!(
        (it.state.state, it.state.probe_successes),
        (State::HalfOpen, 1)
    );
    let third = a.acquire_probe(&mut f.conn, &t, 1).await.unwrap();
    let g = third.state.generation;
    let it = a
        .end_probe(&mut f.conn, &t, &third.granted[0], ProbeOutcome::Success)
        .await
        .unwrap();
    assert_eq!(it.state.state, State::Closed);
    assert_eq!((it.state.generation, it.state.streak), (g + 1, 0));
    assert_eq!(it.state.reason, Reason::ProbesSucceeded);
    // A lease of the old generation ends stale.
    let it = a
        .end_probe(&mut f.conn, &t, &third.granted[0], ProbeOutcome::Failure)
        .await
        .unwrap();
    assert_eq!((it.code, it.state.state), (Code::Stale, State::Closed));
}

#[tokio::test]
async fn quorum_needs_distinct_replicas() {
    let s = server!();
    let mut f = fixture(&s).await;
    let p = SharedPolicy {
        quorum: 2,
        ..rate_policy()
    };
    let t = f.target("quorum", &p);
    let (a, b) = (f.replica("a"), f.replica("b"));
    for _ in 0..3 {
        let it = a
            .trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
            .await
            .unwrap();
        assert_eq!(
            (it.code, it.state.state),
            (Code::Voted, State::Closed),
            "one bad replica"
        );
    }
    let it = b
        .trip(&mut f.conn, &t, 0, Reason::FailureRate)
        .await
        .unwrap();
    assert_eq!((it.code, it.state.state), (Code::Tripped, State::Open));
    assert_eq!(
        s.cmd::<i64>(&["EXISTS", &t.keys().votes]),
        0,
        "votes cleared"
    );
}

#[tokio::test]
async fn manual_control_applies_whatever_the_generation_and_repins() {
    let s = server!();
    let mut f = fixture(&s).await;
    let (a, b) = (f.replica("a"), f.replica("b"));
    let t_a = f.target("manual", &rate_policy());
    let t_b = f.target(
        "manual",
        &SharedPolicy {
            min_calls: 99,
            ..rate_policy()
        },
    );
    a.flush(&mut f.conn, &[counts(&t_a, 0, 3, 0)])
        .await
        .unwrap();
    let it = b
        .force(&mut f.conn, &t_b, ForceTarget::ForcedOpen)
        .await
        .unwrap();
    assert_eq!(
        (it.state.state, it.state.generation),
        (State::ForcedOpen, 1)
    );
    assert_eq!(it.pinned_fingerprint, t_b.policy().fingerprint());
    assert!(!it.policy_mismatch);
    let it = a
        .trip(&mut f.conn, &t_a, 1, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    assert_eq!(it.code, Code::Stale, "forced open is not tripped again");
    assert!(
        it.policy_mismatch,
        "a's policy differs from the re-pinned one"
    );
    let it = b
        .force(&mut f.conn, &t_b, ForceTarget::ForcedClosed)
        .await
        .unwrap();
    assert_eq!(it.state.state, State::ForcedClosed);
    let it = a.reset(&mut f.conn, &t_a).await.unwrap();
    assert_eq!(
        (it.state.state, it.state.generation, it.state.reason),
        (State::Closed, 3, Reason::Manual)
    );
    let it = b.force(&mut f.conn, &t_b, ForceTarget::Open).await.unwrap();
    assert_eq!((it.state.state, it.state.streak), (State::Open, 1));
}

/// Two replicas with different thresholds: the pinned policy decides, the other is told.
#[tokio::test]
async fn a_replica_with_another_policy_is_told_and_the_pinned_one_decides() {
    let s = server!();
    let mut f = fixture(&s).await;
    let (a, b) = (f.replica("a"), f.replica("b"));
    let strict = f.target(
        "mixed",
        &SharedPolicy {
            failure_rate_percent: Some(10.0),
            ..rate_policy()
        },
    );
    let lax = f.target(
        "mixed",
        &SharedPolicy {
            failure_rate_percent: Some(90.0),
            ..rate_policy()
        },
    );
    let r = a
        .flush(&mut f.conn, &[counts(&lax, 0, 10, 0)])
        .await
        .unwrap();
    assert!(!r.items[0].policy_mismatch);
    let r = b
        .flush(&mut f.conn, &[counts(&strict, 0, 5, 5)])
        .await
        .unwrap();
    assert!(r.items[0].policy_mismatch);
    assert_eq!(r.items[0].pinned_fingerprint, lax.policy().fingerprint());
    assert_eq!(
        r.items[0].state.state,
        State::Closed,
        "33 % < the pinned 90 %"
    );
}

/// G7/repair: a server restarted empty loses state and the library; a replica's high-water
/// mark restores the state (deadline from the time it had left) and the library is reloaded.
#[tokio::test]
async fn a_restarted_empty_store_is_repaired_from_the_high_water_mark() {
    let mut s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    let t = f.target("repair", &rate_policy());
    let it = a
        .trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    let hw = HighWater {
        generation: it.state.generation,
        state: it.state.state,
        remaining: Duration::from_secs(20),
        streak: it.state.streak,
    };
    s.restart();
    let client = redis::Client::open(s.url()).unwrap();
    f.conn = client.get_multiplexed_async_connection().await.unwrap();
    assert!(
        s.cmd::<Vec<redis::Value>>(&["FUNCTION", "LIST"]).is_empty(),
        "library lost"
    );
    let item = FlushItem {
        high_water: hw,
        ..counts(&t, 1, 0, 3)
    };
    let r = a.flush(&mut f.conn, &[item]).await.unwrap();
    let it = &r.items[0];
    assert_eq!(it.code, Code::Repaired);
    assert_eq!((it.state.generation, it.state.state), (1, State::Open));
    assert_eq!(it.state.reason, Reason::Repaired);
    assert_eq!(it.state.deadline_ms.unwrap() - r.server_now_ms, 20_000);
    // A second replica with an older high-water changes nothing.
    let b = f.replica("b");
    let it = b.repair(&mut f.conn, &t, &HighWater::NONE).await.unwrap();
    assert_eq!((it.code, it.state.generation), (Code::Stale, 1));
}

#[tokio::test]
async fn the_evalsha_fallback_retries_on_noscript() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    a.set_mode(ScriptMode::Eval);
    let _: String = s.cmd(&["SCRIPT", "FLUSH"]);
    let t = f.target("eval", &rate_policy());
    let r = a.flush(&mut f.conn, &[counts(&t, 0, 1, 0)]).await.unwrap();
    assert_eq!(r.items[0].code, Code::Applied);
    let it = a
        .trip(&mut f.conn, &t, 0, Reason::SlowCallRate)
        .await
        .unwrap();
    assert_eq!(it.state.reason, Reason::SlowCallRate);
    assert!(
        s.cmd::<Vec<redis::Value>>(&["FUNCTION", "LIST"]).is_empty(),
        "no library used"
    );
}

/// A reply that breaks the protocol is an error, never a panic or a state change.
#[tokio::test]
async fn a_tampered_library_gives_malformed_errors() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    a.load(&mut f.conn).await.unwrap();
    let fake = "#!lua name=breaker_v1\n\
        redis.register_function('breaker_v1_flush', function(k, a) \
          return {'brk1', 5, 0, 0, {0, 3, 1, 0, 0, 0, 0, 0, '', 1, 'x', {}, 0}} end)\n\
        redis.register_function('breaker_v1_trip', function(k, a) return {'brk1', 5, 0, 0} end)";
    let _: String = s.cmd(&["FUNCTION", "LOAD", "REPLACE", fake]);
    let t = f.target("tampered", &rate_policy());
    let e = a
        .flush(&mut f.conn, &[counts(&t, 0, 1, 0)])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Malformed { what, .. } if what.contains("deadline 0")),
        "{e}"
    );
    let e = a
        .trip(&mut f.conn, &t, 0, Reason::FailureRate)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Malformed { what, .. } if what.contains("expected 5 elements")),
        "{e}"
    );
}

/// Flushes every few ms until every bucket of the window holds counts (bounded: 5 s).
async fn fill_window(f: &mut Fixture, a: &Protocol, t: &Target, s: &Server, buckets: u32) {
    let start = Instant::now();
    loop {
        a.flush(&mut f.conn, &[counts(t, 0, 123_456, 7_890)])
            .await
            .unwrap();
        let w: String = s.cmd(&["GET", &t.keys().window]);
        if w.split(';').count() as u32 == buckets {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "window never full: {w}"
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// Bytes of a breaker's keys: a window with every bucket filled (large counts), a state hash,
/// `probes` leases and (`quorum` > 1) one vote.
async fn footprint(f: &mut Fixture, s: &Server, p: &SharedPolicy, name: &str) -> i64 {
    let a = f.replica("replica-with-a-longish-name-01");
    let windowed = f.target(&format!("{name}-w"), p);
    fill_window(f, &a, &windowed, s, p.buckets).await;
    let mut total: i64 = s.cmd(&["MEMORY", "USAGE", &windowed.keys().window, "SAMPLES", "0"]);
    let t = f.target(name, p);
    a.force(&mut f.conn, &t, ForceTarget::Open).await.unwrap();
    let it = wait_half_open(f, &a, &t).await;
    assert_eq!(it.code, Code::Applied);
    let rest = a
        .acquire_probe(&mut f.conn, &t, p.half_open_probes)
        .await
        .unwrap();
    assert_eq!(
        it.granted.len() + rest.granted.len(),
        p.half_open_probes as usize
    );
    for k in [&t.keys().state, &t.keys().leases] {
        total += s.cmd::<i64>(&["MEMORY", "USAGE", k, "SAMPLES", "0"]);
    }
    if p.quorum > 1 {
        let voted = f.target(&format!("{name}-q"), p);
        a.trip(&mut f.conn, &voted, 0, Reason::ConsecutiveFailures)
            .await
            .unwrap();
        total += s.cmd::<i64>(&["MEMORY", "USAGE", &voted.keys().votes, "SAMPLES", "0"]);
    }
    total
}

/// G10: every key expires, and a breaker costs at most ~1 KiB (the default fleet window of 10
/// buckets); the largest window (20 buckets) with 3 leases and a vote stays under 1.5 KiB.
#[tokio::test]
async fn every_key_expires_and_a_breaker_stays_under_a_kibibyte() {
    let s = server!();
    let mut f = fixture(&s).await;
    let default = SharedPolicy {
        window: Duration::from_millis(500),
        min_calls: 1_000_000,
        ..probe_policy(1, 5_000)
    };
    let small = footprint(&mut f, &s, &default, "footprint-default").await;
    let largest = SharedPolicy {
        buckets: 20,
        window: Duration::from_millis(1000),
        quorum: 3,
        ..probe_policy(3, 5_000)
    };
    let largest = SharedPolicy {
        min_calls: 1_000_000,
        ..largest
    };
    let large = footprint(&mut f, &s, &largest, "footprint-largest").await;
    eprintln!("G10: bytes per breaker: {small} (10 buckets, 1 lease), {large} (20 buckets, 3 leases, 1 vote)");
    assert!(small <= 1024, "G10: {small} bytes per breaker");
    assert!(large <= 1536, "G10: {large} bytes for the largest window");
    let keys: Vec<String> = s.cmd(&["KEYS", &format!("br:{{{}}}:*", f.ns)]);
    assert!(keys.len() >= 8, "{keys:?}");
    for k in &keys {
        let ttl: i64 = s.cmd(&["PTTL", k]);
        assert!(ttl > 0, "{k} has no expiry ({ttl})");
    }
}

/// A keyed breaker's key, however hostile, writes only under its own namespace's hash tag.
#[tokio::test]
async fn hostile_keys_stay_inside_their_namespace() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    let p = rate_policy().compile().unwrap();
    for key in [
        "}{victim}:s:x",
        "../../victim",
        "a\r\nFLUSHALL\r\n",
        "\u{1F600}{x}",
    ] {
        let t = Target::new(&f.ns, BreakerId::keyed("up", key).unwrap(), p.clone());
        a.flush(&mut f.conn, &[counts(&t, 0, 1, 1)]).await.unwrap();
        a.trip(&mut f.conn, &t, 0, Reason::FailureRate)
            .await
            .unwrap();
    }
    let all: Vec<String> = s.cmd(&["KEYS", "*"]);
    let prefix = format!("br:{{{}}}:", f.ns);
    assert_eq!(
        all.iter().filter(|k| k.contains(":s:up#")).count(),
        4,
        "{all:?}"
    );
    for k in &all {
        assert!(k.starts_with(&prefix), "{k} escaped its namespace");
        assert_eq!(k.matches('{').count(), 1, "{k}");
    }
}

/// A flush of more breakers than one call takes is split, in one pipeline.
#[tokio::test]
async fn a_large_flush_is_split_into_one_pipeline() {
    let s = server!();
    let mut f = fixture(&s).await;
    let a = f.replica("a");
    let p = rate_policy().compile().unwrap();
    let targets: Vec<_> = (0..600)
        .map(|i| {
            Target::new(
                &f.ns,
                BreakerId::keyed("many", &i.to_string()).unwrap(),
                p.clone(),
            )
        })
        .collect();
    let items: Vec<_> = targets.iter().map(|t| counts(t, 0, 1, 0)).collect();
    let r = a.flush(&mut f.conn, &items).await.unwrap();
    assert_eq!(r.items.len(), 600);
    assert!(r.items.iter().all(|i| i.code == Code::Applied));
}

#[tokio::test]
async fn every_transition_is_published() {
    let s = server!();
    let mut f = fixture(&s).await;
    let client = redis::Client::open(s.url()).unwrap();
    let mut sub = client.get_async_pubsub().await.unwrap();
    let a = f.replica("a");
    sub.subscribe(&a.namespace_keys().channel).await.unwrap();
    let t = f.target("pub", &rate_policy());
    a.trip(&mut f.conn, &t, 0, Reason::ConsecutiveFailures)
        .await
        .unwrap();
    a.force(&mut f.conn, &t, ForceTarget::Reset).await.unwrap();
    use futures_util::StreamExt;
    let mut stream = sub.on_message();
    let mut got = Vec::new();
    for _ in 0..2 {
        let m = tokio::time::timeout(Duration::from_secs(2), stream.next())
            .await
            .unwrap()
            .unwrap();
        got.push(breaker_redis::protocol::parse_published(m.get_payload_bytes()).unwrap());
    }
    assert_eq!(got[0].id.as_str(), "pub");
    assert_eq!(
        (got[0].state.generation, got[0].state.state),
        (1, State::Open)
    );
    assert_eq!(
        got[0].state.deadline_ms.unwrap() - got[0].server_now_ms,
        30_000
    );
    assert_eq!(
        (got[1].state.generation, got[1].state.state),
        (2, State::Closed)
    );
}
