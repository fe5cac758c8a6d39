//! The coordinator with several replicas in one process (one store connection, one clock and
//! one real breaker each) against a real server: fleet-rate trips seen everywhere (G3, G4),
//! one operation per flush and none for idle breakers (G2), the probe race (G5, G6), released
//! and leaked leases (G8), clock skew, manual control, policy mismatch, registration.

use crate::common::unique_ns;
use breaker_core::breaker::{
    BreakerPolicy, CircuitBreaker, RejectReason, SlidingWindow, State, TransitionReason,
};
use breaker_core::clock::{Clock, ManualClock};
use breaker_redis::{
    BreakerId, ForceTarget, ReplicaId, SharedCircuitBreaker, SharedPermit, Store, StoreConfig,
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

/// A fleet-rate rule: 50 % over 10 s after 10 calls, 30 s cooldown (no consecutive rule).
pub fn rate_policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
        min_calls: 10,
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

/// One replica of a breaker: its store and its shared breaker (the breaker reads `clock`).
pub struct Replica {
    pub store: Store,
    pub breaker: CircuitBreaker,
    pub shared: SharedCircuitBreaker,
}

impl Replica {
    /// `name`'s breaker of `policy` on `store`, shared.
    pub fn join(store: &Store, name: &str, policy: &BreakerPolicy, clock: Clock) -> Replica {
        let breaker = CircuitBreaker::builder(policy.clone())
            .name(name.to_owned())
            .clock(clock)
            .totals(true)
            .build()
            .unwrap();
        let shared = store.share(&breaker).unwrap();
        Replica {
            store: store.clone(),
            breaker,
            shared,
        }
    }

    /// Records `n` successes or failures (closed calls).
    pub fn record(&self, n: usize, failure: bool) {
        for _ in 0..n {
            let p = self.breaker.try_acquire().expect("closed");
            if failure {
                p.failure();
            } else {
                p.success();
            }
        }
    }

    pub fn state(&self) -> State {
        self.breaker.state()
    }

    /// A call now: a fleet probe holding a lease, or `None` (rejected, or not a probe).
    pub fn probe(&self) -> Option<SharedPermit<'_>> {
        match self.shared.try_acquire() {
            Ok(p) if p.lease().is_some() => Some(p),
            Ok(p) => {
                drop(p);
                None
            }
            Err(_) => None,
        }
    }
}

fn id(s: &str) -> BreakerId {
    BreakerId::new(s).unwrap()
}

/// G4 and G3 through the coordinator: replicas each under `min_calls` do not trip locally;
/// the fleet's window does not trip below the threshold; once the aggregate crosses it, the
/// flush that did it opens the fleet (the core's rate rule on the window's totals) and every
/// replica learns it by push (no flush of theirs needed).
#[tokio::test]
async fn the_fleet_rate_trips_and_every_replica_learns_it_by_push() {
    let s = server!();
    let ns = unique_ns("coord");
    let mut fleet = Vec::new();
    for r in ["r1", "r2", "r3"] {
        let st = replica(&s.url(), &ns, r, Clock::system()).await;
        fleet.push(Replica::join(
            &st,
            "orders",
            &rate_policy(),
            Clock::system(),
        ));
    }
    fleet[0].record(5, true);
    fleet[1].record(4, false);
    fleet[2].record(4, false);
    for r in fleet.iter().rev() {
        assert_eq!(r.store.flush_now().await.unwrap(), 1);
        r.store.sync().await.unwrap();
    }
    assert!(
        fleet.iter().all(|r| r.state() == State::Closed),
        "5 / 13 failures"
    );
    fleet[1].record(5, true);
    assert_eq!(
        fleet[1].state(),
        State::Closed,
        "9 calls here: under min_calls"
    );
    fleet[1].store.flush_now().await.unwrap();
    fleet[1].store.sync().await.unwrap();
    assert_eq!(fleet[1].state(), State::Open, "the flush that tripped it");
    let v = fleet[1].shared.fleet_view();
    assert_eq!(v.caused_by.unwrap().as_str(), "r2");
    assert_eq!(v.reason, TransitionReason::FailureRate);
    for r in [&fleet[0], &fleet[2]] {
        eventually("the push", || r.state() == State::Open).await;
        let v = r.shared.fleet_view();
        assert_eq!(v.caused_by.as_ref().unwrap().as_str(), "r2");
        assert_eq!(
            r.breaker.try_acquire().unwrap_err().reason(),
            RejectReason::Open
        );
    }
    assert!(fleet[0].store.stats().pushes >= 1);
}

/// G2: one store operation per flush however many calls and breakers are active; none at all
/// for idle breakers.
#[tokio::test]
async fn one_operation_per_flush_and_none_for_idle_breakers() {
    let s = server!();
    let ns = unique_ns("coord");
    let st = replica(&s.url(), &ns, "r1", Clock::system()).await;
    let policy = BreakerPolicy {
        min_calls: 1_000_000,
        ..rate_policy()
    };
    let fleet: Vec<_> = (0..200)
        .map(|i| Replica::join(&st, &format!("per-host-h{i}"), &policy, Clock::system()))
        .collect();
    st.sync().await.unwrap(); // the new breakers' first read of the fleet's state
    let polled = st.stats();
    assert_eq!(polled.operations, 1, "one read for 200 new breakers");
    for r in &fleet[..20] {
        r.record(1_000, false);
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
    let r = Replica::join(&st, "busy", &rate_policy(), Clock::system());
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < Duration::from_millis(600) {
        r.record(100, false);
        calls += 100;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ops = st.stats().operations;
    let elapsed = start.elapsed();
    // The flushes, and the first read of the new breaker.
    let bound = (elapsed.as_millis() / 90) as u64 + 2;
    eprintln!(
        "G2: {ops} operations for {calls} calls in {elapsed:?} ({:.3} per 1,000 calls)",
        ops as f64 * 1000.0 / calls as f64
    );
    assert!(
        ops >= 3 && ops <= bound,
        "{ops} operations, at most {bound}"
    );
}

/// G3 (push): the time from a trip until another replica applied it, over 30 trips.
#[tokio::test]
async fn a_trip_reaches_the_other_replicas_by_push() {
    let s = server!();
    let ns = unique_ns("coord");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let one = BreakerPolicy {
        consecutive_failures: Some(1),
        ..BreakerPolicy::default()
    };
    let ra = Replica::join(&a, "g3", &one, Clock::system());
    let rb = Replica::join(&b, "g3", &one, Clock::system());
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    let mut lat = Vec::new();
    for _ in 0..30u32 {
        let g = ra.shared.fleet_view().generation;
        ra.record(1, true);
        // From the local trip to b rejecting.
        lat.push(eventually("push of the trip", || rb.breaker.try_acquire().is_err()).await);
        a.sync().await.unwrap();
        assert_eq!(ra.shared.fleet_view().generation, g + 1);
        a.reset(&id("g3")).await.unwrap();
        eventually("push of the reset", || rb.state() == State::Closed).await;
        eventually("the reset here", || ra.state() == State::Closed).await;
    }
    lat.sort();
    eprintln!(
        "G3: trip -> other replica rejects: p50 {:?}, max of 30 {:?} (loopback, push)",
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
    let policy = BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: Duration::from_millis(1),
        cooldown_max: Duration::from_millis(1),
        half_open_probes: 2,
        max_probe_wait: Some(Duration::from_secs(30)),
        ..BreakerPolicy::default()
    };
    let time = ManualClock::new();
    let mut fleet = Vec::new();
    for r in 0..32 {
        let st = replica(&s.url(), &ns, &format!("r{r}"), Clock::manual(&time)).await;
        fleet.push(Replica::join(&st, "race", &policy, Clock::manual(&time)));
    }
    let sync_all = || futures_util::future::join_all(fleet.iter().map(|r| r.store.sync()));
    sync_all().await;
    let mut max_in_flight = 0;
    let mut probes_run = 0u64;
    let mut max_per_replica = 0u64;
    for cycle in 0..cycles {
        // Open the fleet (every other cycle from closed; otherwise the failed probe did).
        let opener = &fleet[(cycle % 32) as usize];
        if opener.shared.fleet_view().state == State::Closed {
            opener.record(1, true);
            sync_all().await;
        }
        let g = fleet
            .iter()
            .map(|r| r.shared.fleet_view().generation)
            .max()
            .unwrap();
        for r in &fleet {
            eventually("every replica at the newest generation", || {
                r.shared.fleet_view().generation >= g && r.state() != State::Closed
            })
            .await;
        }
        time.advance(Duration::from_millis(5));
        tokio::time::sleep(Duration::from_millis(2)).await; // the server's 1 ms cooldown
        let requests_before: Vec<u64> = fleet.iter().map(|r| r.shared.lease_requests()).collect();
        let acquires_before: Vec<u64> = fleet.iter().map(|r| r.store.stats().acquires).collect();
        let mut held = Vec::new();
        for _round in 0..20 {
            for r in &fleet {
                for _caller in 0..64 {
                    if let Some(p) = r.probe() {
                        held.push(p);
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
        for (i, r) in fleet.iter().enumerate() {
            let sent = r.shared.lease_requests() - requests_before[i];
            let ops = r.store.stats().acquires - acquires_before[i];
            assert!(
                sent <= 2 && ops <= sent,
                "replica {i}: {sent} requests, {ops} acquire ops in cycle {cycle}"
            );
            max_per_replica = max_per_replica.max(ops);
        }
        probes_run += held.len() as u64;
        for p in held {
            if cycle % 2 == 0 {
                p.failure();
            } else {
                p.success();
            }
        }
        sync_all().await;
        let g = fleet
            .iter()
            .map(|r| r.shared.fleet_view().generation)
            .max()
            .unwrap();
        for r in &fleet {
            eventually("every replica at the newest generation", || {
                r.shared.fleet_view().generation == g
            })
            .await;
        }
    }
    let acquires: u64 = fleet.iter().map(|r| r.store.stats().acquires).sum();
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

/// Calls `r` until one is a fleet probe (bounded: 2 s).
async fn probe(r: &Replica) -> Option<SharedPermit<'_>> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if let Some(p) = r.probe() {
            return Some(p);
        }
        r.store.sync().await.unwrap();
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
    let policy = BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: Duration::from_millis(1),
        cooldown_max: Duration::from_millis(1),
        max_probe_wait: Some(Duration::from_millis(300)),
        ..BreakerPolicy::default()
    };
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let ra = Replica::join(&a, "g8", &policy, Clock::system());
    let rb = Replica::join(&b, "g8", &policy, Clock::system());
    ra.record(1, true);
    a.sync().await.unwrap();
    eventually("b sees it open", || {
        rb.shared.fleet_view().state == State::Open
    })
    .await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    let lease = probe(&ra).await.expect("a gets the probe");
    assert!(rb.probe().is_none());
    b.sync().await.unwrap();
    assert!(rb.probe().is_none(), "the one slot is taken");
    // The probe's future is dropped: its lease comes back as neutral, not after 300 ms. (b
    // was denied and waits a lease time before asking again; c is a replica that asks now.)
    let c = replica(&s.url(), &ns, "c", Clock::system()).await;
    let rc = Replica::join(&c, "g8", &policy, Clock::system());
    c.sync().await.unwrap();
    let t = Instant::now();
    drop(lease);
    a.sync().await.unwrap();
    let lease = probe(&rc).await.expect("c gets the released slot");
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "released, not expired: {:?}",
        t.elapsed()
    );
    // c is killed while holding it (its permit leaked, its store gone): a gets the slot
    // within the lease time.
    std::mem::forget(lease);
    drop(rc);
    drop(c);
    let t = Instant::now();
    let got = probe(&ra).await;
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
    let policy = BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: Duration::from_secs(10),
        cooldown_max: Duration::from_secs(10),
        ..BreakerPolicy::default()
    };
    let a = replica(&s.url(), &ns, "a", Clock::manual(&ta)).await;
    let b = replica(&s.url(), &ns, "b", Clock::manual(&tb)).await;
    let ra = Replica::join(&a, "skew", &policy, Clock::manual(&ta));
    let rb = Replica::join(&b, "skew", &policy, Clock::manual(&tb));
    b.sync().await.unwrap();
    ra.record(1, true);
    a.sync().await.unwrap();
    eventually("push", || rb.state() == State::Open).await;
    let left_a = ra.shared.fleet_view().deadline.unwrap() - ta.now().as_nanos() as u64;
    let left_b = rb.shared.fleet_view().deadline.unwrap() - tb.now().as_nanos() as u64;
    let diff = left_a.abs_diff(left_b);
    assert!(
        diff < 50_000_000,
        "both see ~10 s left: {left_a} vs {left_b} ns"
    );
    for step in [Duration::from_millis(9_900), Duration::from_millis(200)] {
        ta.advance(step);
        tb.advance(step);
        let (da, db) = (
            ra.shared
                .try_acquire()
                .map(|p| p.is_probe())
                .map_err(|e| e.reason()),
            rb.shared
                .try_acquire()
                .map(|p| p.is_probe())
                .map_err(|e| e.reason()),
        );
        assert_eq!(da, db, "same decision after {step:?}");
    }
    assert_eq!(
        ra.shared.lease_requests() + rb.shared.lease_requests(),
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
    let ra = Replica::join(&a, "ctl", &rate_policy(), Clock::system());
    let rb = Replica::join(&b, "ctl", &rate_policy(), Clock::system());
    let st = a.force(&id("ctl"), ForceTarget::ForcedOpen).await.unwrap();
    assert_eq!(st.state, State::ForcedOpen);
    assert_eq!(
        ra.state(),
        State::ForcedOpen,
        "applied locally from the reply"
    );
    eventually("push", || rb.state() == State::ForcedOpen).await;
    assert_eq!(
        rb.breaker.try_acquire().unwrap_err().reason(),
        RejectReason::ForcedOpen
    );
    b.force(&id("ctl"), ForceTarget::ForcedClosed)
        .await
        .unwrap();
    eventually("push", || ra.state() == State::ForcedClosed).await;
    assert!(ra.breaker.try_acquire().is_ok());
    a.reset(&id("ctl")).await.unwrap();
    eventually("push", || rb.state() == State::Closed).await;
    assert_eq!(rb.shared.fleet_view().reason, TransitionReason::Manual);
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

/// Two replicas with different thresholds: the second is told once that the replica that
/// made the fleet's last transition runs another policy; each decides with its own.
#[tokio::test]
async fn a_policy_mismatch_is_reported_once() {
    let s = server!();
    let ns = unique_ns("mismatch");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let ra = Replica::join(&a, "pol", &rate_policy(), Clock::system());
    let other = BreakerPolicy {
        failure_rate_percent: Some(10.0),
        ..rate_policy()
    };
    let rb = Replica::join(&b, "pol", &other, Clock::system());
    a.force(&id("pol"), ForceTarget::Reset).await.unwrap();
    for _ in 0..3 {
        rb.record(1, false);
        b.flush_now().await.unwrap();
    }
    let m = rb.shared.mismatches();
    assert_eq!(m.len(), 1, "once, not per flush: {m:?}");
    assert_ne!(m[0].theirs, m[0].ours);
    assert!(ra.shared.mismatches().is_empty());
}

#[tokio::test]
async fn sharing_twice_is_an_error_and_dropping_the_breaker_unregisters() {
    let s = server!();
    let ns = unique_ns("reg");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let r = Replica::join(&a, "once", &rate_policy(), Clock::system());
    let twin = CircuitBreaker::builder(rate_policy())
        .name("once")
        .totals(true)
        .build()
        .unwrap();
    let e = a.share(&twin).unwrap_err();
    assert_eq!(
        e.to_string(),
        "shared breaker `once` is already registered with this store"
    );
    // The one validator refuses what a fleet cannot share, every mistake at once.
    let bad = CircuitBreaker::builder(BreakerPolicy {
        window: SlidingWindow::Count(100),
        ..rate_policy()
    })
    .name("bad")
    .build()
    .unwrap();
    let e = a.share(&bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("a count window (the last 100 calls) has no order across replicas"),
        "{e}"
    );
    drop(r);
    drop(twin);
    // The sweep lets the unused breaker go (a bounded batch per flush).
    for _ in 0..3 {
        a.flush_now().await.unwrap();
        a.sync().await.unwrap();
    }
    assert!(a
        .share(
            &CircuitBreaker::builder(rate_policy())
                .name("once")
                .totals(true)
                .build()
                .unwrap()
        )
        .is_ok());
}

/// G4's early flush: pending failures over the breaker's bound (`min_calls`) flush at once
/// (not at the next interval), at most once per interval, so G2's bound holds.
#[tokio::test]
async fn an_early_flush_goes_at_once_and_at_most_once_per_interval() {
    let s = server!();
    let ns = unique_ns("early");
    let a = replica(&s.url(), &ns, "a", Clock::system()).await;
    let b = replica(&s.url(), &ns, "b", Clock::system()).await;
    let ra = Replica::join(&a, "early", &rate_policy(), Clock::system());
    let rb = Replica::join(&b, "early", &rate_policy(), Clock::system());
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    // b: 9 failures (under its own min_calls), flushed.
    rb.record(9, true);
    b.flush_now().await.unwrap();
    let before = a.stats().operations;
    // a: 11 successes and 9 failures (45 %: no local trip), under the early bound.
    ra.record(11, false);
    ra.record(9, true);
    a.sync().await.unwrap();
    assert_eq!(
        a.stats().operations,
        before,
        "under the early bound: nothing sent"
    );
    let t = Instant::now();
    ra.record(1, true); // the 10th failure since the last flush
    a.sync().await.unwrap();
    assert!(
        a.stats().operations > before,
        "flushed without waiting an hour"
    );
    // The fleet's window: 19 failures of 30 calls, the flush's totals tripped it.
    assert_eq!(ra.state(), State::Open, "the fleet's window tripped");
    assert_eq!(ra.shared.fleet_view().reason, TransitionReason::FailureRate);
    eventually("b learns it", || rb.state() == State::Open).await;
    eprintln!(
        "G4: early flush to every replica rejecting: {:?}",
        t.elapsed()
    );
    a.reset(&id("early")).await.unwrap();
    eventually("the reset", || ra.state() == State::Closed).await;
    let before = a.stats().operations;
    ra.record(11, false);
    ra.record(10, true);
    a.sync().await.unwrap();
    assert_eq!(
        a.stats().operations,
        before,
        "a second early flush waits for the interval"
    );
}
