//! The coordinator with several replicas in one process (one store connection and one clock
//! each) against a real server: fleet-rate trips seen everywhere (G3, G4), one operation per
//! flush and none for idle breakers (G2), the probe race (G5, G6), released and leaked leases
//! (G8), clock skew, manual control, policy mismatch, keyed breakers.

use crate::common::unique_ns;
use breaker_core::breaker::State;
use breaker_core::clock::{Clock, ManualClock};
use breaker_redis::testing::{Admission, FakeBreaker, Outcome};
use breaker_redis::{
    BreakerId, ForceTarget, ProbeGrant, ProbeOutcome, Reason, ReplicaId, SharedPolicy, Store,
    StoreConfig,
};
use std::time::{Duration, Instant};

pub fn config(url: &str, ns: &str, replica: &str, clock: Clock) -> StoreConfig {
    StoreConfig::new(url, ns)
        .unwrap()
        .replica(ReplicaId::new(replica).unwrap())
        .flush_interval(Duration::from_secs(3600))
        .flush_jitter(0.0)
        .clock(clock)
}

pub async fn replica(url: &str, ns: &str, name: &str, clock: Clock) -> Store {
    Store::connect(config(url, ns, name, clock)).await.unwrap()
}

pub use crate::common::eventually;

fn rate_policy() -> SharedPolicy {
    SharedPolicy {
        failure_rate_percent: Some(50.0),
        min_calls: 10,
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..SharedPolicy::default()
    }
}

fn id(s: &str) -> BreakerId {
    BreakerId::new(s).unwrap()
}

/// G4 and G3 through the coordinator: one replica at 100 % failures does not open the fleet;
/// once the aggregate crosses the threshold the flush that did it opens it and every replica
/// learns it by push (no flush of theirs needed).
#[tokio::test]
async fn the_fleet_rate_trips_and_every_replica_learns_it_by_push() {
    let s = server!();
    let ns = unique_ns("coord");
    let mut stores = Vec::new();
    let mut fakes = Vec::new();
    for r in ["r1", "r2", "r3"] {
        let st = replica(&s.url(), &ns, r, Clock::system()).await;
        fakes.push(FakeBreaker::register(&st, id("orders"), &rate_policy()).unwrap());
        stores.push(st);
    }
    for _ in 0..10 {
        fakes[0].record(Outcome::Failure);
    }
    for f in &fakes[1..] {
        for _ in 0..10 {
            f.record(Outcome::Success);
        }
    }
    for st in stores.iter().rev() {
        assert_eq!(st.flush_now().await.unwrap(), 1);
    }
    assert!(
        fakes.iter().all(|f| f.state() == State::Closed),
        "10 / 30 failures"
    );
    for _ in 0..11 {
        fakes[1].record(Outcome::Failure);
    }
    stores[1].flush_now().await.unwrap();
    assert_eq!(fakes[1].state(), State::Open, "the flush that tripped it");
    let v = fakes[1].view();
    assert!(v.by_this_replica);
    assert_eq!(v.reason, Reason::FailureRate);
    for f in [&fakes[0], &fakes[2]] {
        eventually("the push", || f.state() == State::Open).await;
        let v = f.view();
        assert_eq!(v.caused_by.as_ref().unwrap().as_str(), "r2");
        assert!(!v.by_this_replica);
        assert_eq!(f.admit(), Admission::Rejected);
    }
    assert!(stores[0].stats().pushes >= 1);
}

/// G2: one store operation per flush however many calls and breakers are active; none at all
/// for idle breakers.
#[tokio::test]
async fn one_operation_per_flush_and_none_for_idle_breakers() {
    let s = server!();
    let ns = unique_ns("coord");
    let st = replica(&s.url(), &ns, "r1", Clock::system()).await;
    let fakes: Vec<_> = (0..200)
        .map(|i| {
            FakeBreaker::register(
                &st,
                BreakerId::keyed("per-host", &format!("h{i}")).unwrap(),
                &rate_policy(),
            )
            .unwrap()
        })
        .collect();
    st.sync().await.unwrap(); // the new breakers' first read of the fleet's state
    let polled = st.stats();
    assert_eq!(polled.operations, 1, "one read for 200 new breakers");
    for f in &fakes[..20] {
        for _ in 0..1_000 {
            f.record(Outcome::Success);
        }
    }
    let before = st.stats();
    assert_eq!(st.flush_now().await.unwrap(), 20, "only the active keys");
    let after = st.stats();
    assert_eq!(
        after.operations - before.operations,
        1,
        "20,000 calls, 20 breakers: one operation"
    );
    assert_eq!(after.round_trips - before.round_trips, 1);
    assert_eq!(st.flush_now().await.unwrap(), 0, "idle: nothing to send");
    assert_eq!(
        st.stats().operations,
        after.operations,
        "idle breakers cost nothing"
    );
    let keys: Vec<String> = s.cmd(&["KEYS", &format!("br:{{{ns}}}:s:*")]);
    assert_eq!(keys.len(), 20, "idle keys never reach the store");
}

/// G2 on the real timer: a replica under constant load flushes once per interval.
#[tokio::test]
async fn a_busy_replica_flushes_once_per_interval() {
    let s = server!();
    let ns = unique_ns("coord");
    let cfg = config(&s.url(), &ns, "r1", Clock::system())
        .flush_interval(Duration::from_millis(100))
        .flush_jitter(0.1);
    let st = Store::connect(cfg).await.unwrap();
    let f = FakeBreaker::register(&st, id("busy"), &rate_policy()).unwrap();
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < Duration::from_millis(600) {
        for _ in 0..100 {
            f.record(Outcome::Success);
        }
        calls += 100;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ops = st.stats().operations;
    let elapsed = start.elapsed();
    let bound = (elapsed.as_millis() / 90) as u64 + 1;
    eprintln!(
        "G2: {ops} operations for {calls} calls in {elapsed:?} ({:.3} per 1,000 calls)",
        ops as f64 * 1000.0 / calls as f64
    );
    assert!(
        ops >= 3 && ops <= bound,
        "{ops} operations, at most {bound}"
    );
}

/// G3 (push): the time from a trip's commit until another replica applied it, over 30 trips.
#[tokio::test]
async fn a_trip_reaches_the_other_replicas_by_push() {
    let s = server!();
    let ns = unique_ns("coord");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let fa = FakeBreaker::register(&a, id("g3"), &rate_policy()).unwrap();
    let fb = FakeBreaker::register(&b, id("g3"), &rate_policy()).unwrap();
    let mut lat = Vec::new();
    for i in 0..30u64 {
        let sent = Instant::now();
        fa.trip(Reason::ConsecutiveFailures);
        // From the trip's request (an upper bound of "after it commits") to b rejecting.
        lat.push(eventually("push of the trip", || fb.admit() == Admission::Rejected).await);
        let _ = sent;
        a.sync().await.unwrap();
        assert_eq!(fa.view().generation, 2 * i + 1);
        a.reset(&id("g3")).await.unwrap();
        eventually("push of the reset", || fb.state() == State::Closed).await;
    }
    lat.sort();
    eprintln!(
        "G3: trip requested -> other replica rejects: p50 {:?}, max of 30 {:?} (loopback, push)",
        lat[15], lat[29]
    );
    assert_eq!(
        b.stats().flushes,
        0,
        "learned without a single flush of its own"
    );
}

/// G5 and G6: 32 replicas x 64 callers released at once, many half-open cycles: never more
/// probes in flight than the cap, and one probe-acquire operation per replica per cycle.
#[tokio::test]
async fn the_probe_race_never_exceeds_the_cap() {
    let s = server!();
    let ns = unique_ns("race");
    let cycles: u64 = std::env::var("BREAKER_REDIS_RACE_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let policy = SharedPolicy {
        cooldown: Duration::from_millis(1),
        cooldown_max: Duration::from_millis(1),
        half_open_probes: 2,
        probe_lease: Duration::from_secs(30),
        ..rate_policy()
    };
    let time = ManualClock::new();
    let mut stores = Vec::new();
    let mut fakes = Vec::new();
    for r in 0..32 {
        let st = replica(&s.url(), &ns, &format!("r{r}"), Clock::manual(&time)).await;
        fakes.push(FakeBreaker::register(&st, id("race"), &policy).unwrap());
        stores.push(st);
    }
    let sync_all = || futures_util::future::join_all(stores.iter().map(|s| s.sync()));
    let mut max_in_flight = 0;
    let mut probes_run = 0u64;
    let mut max_per_replica = 0u64;
    for cycle in 0..cycles {
        // Open the fleet (every other cycle from closed; otherwise the failed probe did).
        if fakes[0].state() == State::Closed {
            fakes[(cycle % 32) as usize].trip(Reason::ConsecutiveFailures);
            sync_all().await;
        }
        // Open, or already half-open (a late request of the last cycle promoted it).
        let g = fakes.iter().map(|f| f.view().generation).max().unwrap();
        for f in &fakes {
            eventually("every replica at the newest generation", || {
                f.view().generation >= g && f.state() != State::Closed
            })
            .await;
        }
        time.advance(Duration::from_millis(5));
        tokio::time::sleep(Duration::from_millis(2)).await; // the server's 1 ms cooldown
        let requests_before: Vec<u64> = fakes.iter().map(|f| f.requests()).collect();
        let acquires_before: Vec<u64> = stores.iter().map(|s| s.stats().acquires).collect();
        let mut held = Vec::new();
        for _round in 0..20 {
            for (r, f) in fakes.iter().enumerate() {
                for _caller in 0..64 {
                    if let Admission::Probe(l) = f.admit() {
                        held.push((r, l));
                    }
                }
            }
            max_in_flight = max_in_flight.max(held.len());
            if !held.is_empty() {
                break;
            }
            sync_all().await;
            time.advance(Duration::from_millis(2));
        }
        assert!(!held.is_empty(), "cycle {cycle}: no probe ever admitted");
        assert!(
            held.len() <= 2,
            "cycle {cycle}: {} probes in flight, cap 2",
            held.len()
        );
        for (r, f) in fakes.iter().enumerate() {
            let sent = f.requests() - requests_before[r];
            let ops = stores[r].stats().acquires - acquires_before[r];
            assert!(
                sent <= 2 && ops <= sent,
                "replica {r}: {sent} requests, {ops} acquire ops in cycle {cycle}"
            );
            max_per_replica = max_per_replica.max(ops);
        }
        probes_run += held.len() as u64;
        let outcome = if cycle % 2 == 0 {
            ProbeOutcome::Failure
        } else {
            ProbeOutcome::Success
        };
        for (r, l) in held {
            fakes[r].finish_probe(l, outcome);
        }
        sync_all().await;
        let g = fakes.iter().map(|f| f.view().generation).max().unwrap();
        for f in &fakes {
            eventually("every replica at the newest generation", || {
                f.view().generation == g
            })
            .await;
        }
    }
    let acquires: u64 = stores.iter().map(|s| s.stats().acquires).sum();
    eprintln!(
        "G5/G6: {cycles} half-open cycles, 32 replicas x 64 callers: max {max_in_flight} probes in flight (cap 2), \
         {probes_run} probes, {:.2} acquire ops per replica per cycle (most in one cycle: {max_per_replica})",
        acquires as f64 / cycles as f64 / 32.0
    );
    assert!(max_in_flight <= 2);
    // G6: one acquire per replica per half-open period, plus at most one retry when the
    // replica's first request reached the server just before its deadline.
    assert!(
        max_per_replica <= 2,
        "G6: {max_per_replica} acquires by one replica in one cycle"
    );
}

/// Admits on `f` until it is a fleet probe (bounded: 2 s).
async fn probe(f: &FakeBreaker, st: &Store) -> Option<breaker_redis::Lease> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if let Admission::Probe(l) = f.admit() {
            return Some(l);
        }
        st.sync().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

/// G8: a probe whose future is dropped returns its lease at once (neutral); a replica killed
/// while holding one frees it within the lease time.
#[tokio::test]
async fn dropped_and_orphaned_leases_come_back() {
    let s = server!();
    let ns = unique_ns("lease");
    let policy = SharedPolicy {
        cooldown: Duration::from_millis(1),
        cooldown_max: Duration::from_millis(1),
        probe_lease: Duration::from_millis(300),
        ..rate_policy()
    };
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let fa = FakeBreaker::register(&a, id("g8"), &policy).unwrap();
    let fb = FakeBreaker::register(&b, id("g8"), &policy).unwrap();
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    tokio::time::sleep(Duration::from_millis(3)).await;
    let lease = probe(&fa, &a).await.expect("a gets the probe");
    assert_eq!(fb.admit(), Admission::Rejected);
    b.sync().await.unwrap();
    assert_eq!(
        fb.grants().last(),
        Some(&ProbeGrant::Denied),
        "the one slot is taken"
    );
    // The probe's future is dropped: its lease comes back as neutral, not after 300 ms. (b
    // was denied and waits a lease time before asking again; c is a replica that asks now.)
    let c = replica(&s.url(), &ns, "c", Clock::system()).await;
    let fc = FakeBreaker::register(&c, id("g8"), &policy).unwrap();
    let t = Instant::now();
    fa.finish_probe(lease, ProbeOutcome::Neutral);
    a.sync().await.unwrap();
    let lease = probe(&fc, &c).await.expect("c gets the released slot");
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "released, not expired: {:?}",
        t.elapsed()
    );
    // c is killed while holding it: a gets the slot within the lease time.
    drop(fc);
    drop(c);
    let _ = lease;
    let t = Instant::now();
    let got = probe(&fa, &a).await;
    assert!(got.is_some(), "slot never came back");
    let waited = t.elapsed();
    eprintln!("G8: orphaned lease back after {waited:?} (lease 300 ms)");
    assert!(waited <= Duration::from_millis(300 + 150), "G8: {waited:?}");
}

/// Replicas whose clocks differ by minutes take identical decisions: deadlines are converted
/// from the server's own time, never compared across replicas.
#[tokio::test]
async fn clock_skew_of_minutes_changes_no_decision() {
    let s = server!();
    let ns = unique_ns("skew");
    let (ta, tb) = (ManualClock::new(), ManualClock::new());
    tb.set(Duration::from_secs(7 * 60)); // b's clock reads 7 minutes later
    let policy = SharedPolicy {
        cooldown: Duration::from_secs(10),
        cooldown_max: Duration::from_secs(10),
        ..rate_policy()
    };
    let a = replica(&s.url(), &ns, "a", Clock::manual(&ta)).await;
    let b = replica(&s.url(), &ns, "b", Clock::manual(&tb)).await;
    let fa = FakeBreaker::register(&a, id("skew"), &policy).unwrap();
    let fb = FakeBreaker::register(&b, id("skew"), &policy).unwrap();
    fa.trip(Reason::ConsecutiveFailures);
    a.sync().await.unwrap();
    eventually("push", || fb.state() == State::Open).await;
    let left_a = fa.view().deadline.unwrap() - ta.now().as_nanos() as u64;
    let left_b = fb.view().deadline.unwrap() - tb.now().as_nanos() as u64;
    let diff = left_a.abs_diff(left_b);
    assert!(
        diff < 50_000_000,
        "both see ~10 s left: {left_a} vs {left_b} ns"
    );
    for step in [Duration::from_millis(9_900), Duration::from_millis(200)] {
        ta.advance(step);
        tb.advance(step);
        let (da, db) = (fa.admit(), fb.admit());
        assert_eq!(da, db, "same decision after {step:?}");
    }
    assert_eq!(
        fa.requests() + fb.requests(),
        2,
        "both reached the deadline together"
    );
}

/// Fleet-wide manual control: seen by every replica.
#[tokio::test]
async fn force_open_and_reset_are_seen_fleet_wide() {
    let s = server!();
    let ns = unique_ns("force");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let fa = FakeBreaker::register(&a, id("ctl"), &rate_policy()).unwrap();
    let fb = FakeBreaker::register(&b, id("ctl"), &rate_policy()).unwrap();
    let st = a.force(&id("ctl"), ForceTarget::ForcedOpen).await.unwrap();
    assert_eq!(st.state, State::ForcedOpen);
    assert_eq!(
        fa.state(),
        State::ForcedOpen,
        "applied locally from the reply"
    );
    eventually("push", || fb.state() == State::ForcedOpen).await;
    assert_eq!(fb.admit(), Admission::Rejected);
    b.force(&id("ctl"), ForceTarget::ForcedClosed)
        .await
        .unwrap();
    eventually("push", || fa.state() == State::ForcedClosed).await;
    assert_eq!(fa.admit(), Admission::Admitted);
    a.reset(&id("ctl")).await.unwrap();
    eventually("push", || fb.state() == State::Closed).await;
    assert_eq!(fb.view().reason, Reason::Manual);
    let e = a
        .force(&id("unknown"), ForceTarget::ForcedOpen)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not registered"), "{e}");
    let st = a
        .force_with_policy(&id("unknown"), &rate_policy(), ForceTarget::ForcedOpen)
        .await
        .unwrap();
    assert_eq!(st.state, State::ForcedOpen);
}

/// Two replicas with different thresholds: the second is told once, the pinned policy decides.
#[tokio::test]
async fn a_policy_mismatch_is_reported_once() {
    let s = server!();
    let ns = unique_ns("mismatch");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let fa = FakeBreaker::register(&a, id("pol"), &rate_policy()).unwrap();
    let other = SharedPolicy {
        failure_rate_percent: Some(10.0),
        ..rate_policy()
    };
    let fb = FakeBreaker::register(&b, id("pol"), &other).unwrap();
    fa.record(Outcome::Success);
    a.flush_now().await.unwrap();
    for _ in 0..3 {
        fb.record(Outcome::Failure);
        b.flush_now().await.unwrap();
    }
    let m = fb.mismatches();
    assert_eq!(m.len(), 1, "once, not per flush");
    assert_eq!(m[0].pinned, rate_policy().compile().unwrap().fingerprint());
    assert_eq!(m[0].ours, other.compile().unwrap().fingerprint());
    assert!(fa.mismatches().is_empty());
    assert_eq!(
        fb.state(),
        State::Closed,
        "3 / 4 failures but min_calls 10 of the pinned policy"
    );
}

#[tokio::test]
async fn registering_twice_is_an_error_and_dropping_the_link_unregisters() {
    let s = server!();
    let ns = unique_ns("reg");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let f = FakeBreaker::register(&a, id("once"), &rate_policy()).unwrap();
    let e = FakeBreaker::register(&a, id("once"), &rate_policy()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "shared breaker `once` is already registered with this store"
    );
    let bad = SharedPolicy {
        quorum: 0,
        ..rate_policy()
    };
    assert!(FakeBreaker::register(&a, id("bad"), &bad).is_err());
    drop(f);
    a.sync().await.unwrap();
    // The fake's Link lives inside the fake: dropped with it.
    assert!(FakeBreaker::register(&a, id("once"), &rate_policy()).is_ok());
}

/// G4's early flush: pending failures over the breaker's bound flush at once (not at the next
/// interval), at most once per interval, so G2's bound holds.
#[tokio::test]
async fn an_early_flush_goes_at_once_and_at_most_once_per_interval() {
    let s = server!();
    let ns = unique_ns("early");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let fa = FakeBreaker::register(&a, id("early"), &rate_policy()).unwrap();
    let fb = FakeBreaker::register(&b, id("early"), &rate_policy()).unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    let before = a.stats().operations;
    for _ in 0..10 {
        fa.record(Outcome::Failure);
    }
    let t = Instant::now();
    fa.flush_soon();
    a.sync().await.unwrap();
    assert_eq!(
        a.stats().operations,
        before + 1,
        "flushed without waiting an hour"
    );
    assert_eq!(
        fa.state(),
        State::Open,
        "10 failures of 10: the fleet opened"
    );
    eventually("b learns it", || fb.state() == State::Open).await;
    eprintln!(
        "G4: early flush to every replica rejecting: {:?}",
        t.elapsed()
    );
    fa.flush_soon();
    a.sync().await.unwrap();
    assert_eq!(
        a.stats().operations,
        before + 1,
        "a second early flush waits for the interval"
    );
}
