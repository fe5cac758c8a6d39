use super::*;
use crate::breaker::{BreakerPolicy, SlidingWindow};
use crate::clock::{Clock, ManualClock};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(160);
/// Past `TTL * 17 / 16`: every untouched breaker is idle by then.
const PAST_TTL: Duration = Duration::from_secs(171);

fn factory(time: &ManualClock, policy: BreakerPolicy) -> BreakerFactory {
    CircuitBreaker::builder(policy)
        .name("keyed")
        .clock(Clock::manual(time))
        .totals(false)
        .build_factory()
        .unwrap()
}

fn one_failure_trips() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(1),
        cooldown: Duration::from_secs(10),
        cooldown_max: Duration::from_secs(10),
        ..BreakerPolicy::default()
    }
}

#[test]
fn same_key_same_breaker_and_keys_are_independent() {
    let time = ManualClock::new();
    let reg: Registry<String> = Registry::new(factory(&time, one_failure_trips()));
    reg.get_or_create("a")
        .unwrap()
        .try_acquire()
        .unwrap()
        .failure();
    assert_eq!(reg.get_or_create("a").unwrap().state(), State::Open);
    assert_eq!(reg.get_or_create("b").unwrap().state(), State::Closed);
    assert_eq!(reg.len(), 2);
    assert!(reg.get("c").is_none());
    assert_eq!(reg.len(), 2);
}

#[test]
fn br_24_remove_half_of_100_000_keys_and_idle_eviction_keeps_open_and_half_open() {
    let time = ManualClock::new();
    let reg: Registry<u64> = Registry::builder(factory(&time, one_failure_trips()))
        .idle_ttl(TTL)
        .build();
    for k in 0..100_000u64 {
        reg.get_or_create(&k)
            .unwrap()
            .try_acquire()
            .unwrap()
            .success();
    }
    assert_eq!(reg.len(), 100_000);
    for k in (0..100_000u64).step_by(2) {
        assert!(reg.remove(&k).is_some());
    }
    assert_eq!(reg.len(), 50_000);
    assert!(reg.remove(&0).is_none());
    assert_eq!(reg.len(), 50_000);

    // Key 1 open, key 3 half-open (a probe in flight, its permit held), key 5 forced open,
    // key 7 half-open with no probe in flight (it probed, ignored; stays half-open).
    reg.get(&1).unwrap().try_acquire().unwrap().failure();
    reg.get(&3).unwrap().try_acquire().unwrap().failure();
    reg.get(&7).unwrap().try_acquire().unwrap().failure();
    reg.get(&5).unwrap().force_open();
    time.advance(Duration::from_secs(10));
    let b3 = reg.get(&3).unwrap();
    let probe = b3.try_acquire_owned().unwrap();
    drop(b3);
    reg.get(&7).unwrap().try_acquire().unwrap().ignored();
    assert_eq!(reg.get(&1).unwrap().state(), State::Open);
    assert_eq!(reg.get(&3).unwrap().state(), State::HalfOpen);
    assert_eq!(reg.get(&7).unwrap().state(), State::HalfOpen);
    // Key 9 closed but a caller holds a handle to it.
    let held = reg.get(&9).unwrap();

    time.advance(Duration::from_secs(3600));
    assert_eq!(reg.evict_idle(), 50_000 - 5);
    assert_eq!(reg.len(), 5);
    assert_eq!(reg.get(&1).unwrap().state(), State::Open); // cooldown long over: still open
    assert_eq!(reg.get(&3).unwrap().state(), State::HalfOpen);
    assert_eq!(reg.get(&5).unwrap().state(), State::ForcedOpen);
    assert_eq!(reg.get(&7).unwrap().state(), State::HalfOpen);
    assert_eq!(reg.get(&9).unwrap().state(), State::Closed);
    assert!(reg.get(&11).is_none());

    // Key 1's protection continues: the next call is its probe, not a fresh closed breaker's.
    let b1 = reg.get(&1).unwrap();
    let p = b1.try_acquire().unwrap();
    assert!(p.is_probe());
    p.failure();
    assert_eq!(b1.state(), State::Open);
    drop((probe, held, b1));
}

#[test]
fn br_24_count_window_memory_is_constant_over_1_000_000_calls() {
    let time = ManualClock::new();
    let breaker = factory(
        &time,
        BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(100.0),
            window: SlidingWindow::Count(100),
            min_calls: 100,
            ..BreakerPolicy::default()
        },
    )
    .create();
    let before = breaker.memory_bytes();
    for i in 0..1_000_000u32 {
        let p = breaker.try_acquire().unwrap();
        // A failure every 7th call: rate ~14%, never trips at 100%.
        if i % 7 == 0 {
            p.failure()
        } else {
            p.success()
        }
        if i % 100_000 == 0 {
            assert_eq!(breaker.memory_bytes(), before);
        }
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.memory_bytes(), before);
    assert_eq!(breaker.snapshot().window.calls, 100);
    assert!(before < 512, "{before} bytes for a 100-call window");
}

#[test]
fn idle_means_ttl_since_last_lookup() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::builder(factory(&time, one_failure_trips()))
        .idle_ttl(TTL)
        .build();
    drop(reg.get_or_create(&1).unwrap());
    drop(reg.get_or_create(&2).unwrap());
    time.advance(Duration::from_secs(100));
    drop(reg.get(&2).unwrap()); // 2 used at t=100
    time.advance(Duration::from_secs(60)); // t = 160 = TTL: nothing idle yet
    assert_eq!(reg.evict_idle(), 0);
    time.advance(Duration::from_secs(11)); // t = 171 > TTL * 17/16 since 1's last use
    assert_eq!(reg.evict_idle(), 1);
    assert!(reg.get(&1).is_none());
    assert!(reg.get(&2).is_some());
}

#[test]
fn no_ttl_never_evicts() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::new(factory(&time, one_failure_trips()));
    drop(reg.get_or_create(&1).unwrap());
    time.advance(Duration::from_secs(1_000_000));
    assert_eq!(reg.evict_idle(), 0);
    assert_eq!(reg.len(), 1);
}

#[test]
fn full_registry_evicts_idle_closed_on_insert_or_reports_full() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::builder(factory(&time, one_failure_trips()))
        .max_keys(3)
        .idle_ttl(TTL)
        .shards(4)
        .build();
    for k in 0..3 {
        reg.get_or_create(&k)
            .unwrap()
            .try_acquire()
            .unwrap()
            .failure(); // all open
    }
    let err = reg.get_or_create(&3).unwrap_err();
    assert_eq!(err.max_keys(), 3);
    assert_eq!(
        err.to_string(),
        "breaker registry is full: 3 keys, none of them idle and closed"
    );
    assert_eq!(reg.len(), 3);
    // Existing keys are still served when full.
    assert!(reg.get_or_create(&0).is_ok());

    // Key 0 recovers (probe succeeds) and then goes idle: the next new key takes its place.
    time.advance(Duration::from_secs(10));
    reg.get(&0).unwrap().try_acquire().unwrap().success();
    assert_eq!(reg.get(&0).unwrap().state(), State::Closed);
    time.advance(PAST_TTL);
    // The full sweep at t=0 allowed the next one from t=10s on; it is t=181s.
    assert!(reg.get_or_create(&3).is_ok());
    assert_eq!(reg.len(), 3);
    assert!(reg.get(&0).is_none());
    assert_eq!(reg.get(&1).unwrap().state(), State::Open);
    assert_eq!(reg.get(&2).unwrap().state(), State::Open);
}

#[test]
fn unbounded_without_ttl_reports_full_at_max_keys() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::builder(factory(&time, one_failure_trips()))
        .max_keys(2)
        .build();
    reg.get_or_create(&1).unwrap();
    reg.get_or_create(&2).unwrap();
    assert!(reg.get_or_create(&3).is_err());
    reg.remove(&1).unwrap();
    assert!(reg.get_or_create(&3).is_ok());
    assert_eq!(reg.len(), 2);
}

#[test]
fn insert_sweeps_its_shard_every_half_ttl_without_explicit_calls() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::builder(factory(&time, one_failure_trips()))
        .idle_ttl(TTL)
        .shards(1)
        .build();
    for k in 0..100 {
        drop(reg.get_or_create(&k).unwrap());
    }
    time.advance(PAST_TTL);
    drop(reg.get_or_create(&1000).unwrap()); // the insert sweeps the (single) shard
    assert_eq!(reg.len(), 1);
}

#[test]
fn removed_breaker_handles_keep_working_and_key_restarts_closed() {
    let time = ManualClock::new();
    let reg: Registry<String> = Registry::new(factory(&time, one_failure_trips()));
    let a = reg.get_or_create("a").unwrap();
    a.try_acquire().unwrap().failure();
    let removed = reg.remove("a").unwrap();
    assert_eq!(removed.state(), State::Open);
    assert_eq!(a.state(), State::Open);
    assert_eq!(reg.get_or_create("a").unwrap().state(), State::Closed);
}

#[test]
fn concurrent_get_or_create_makes_one_breaker_per_key() {
    let time = ManualClock::new();
    let reg: Registry<u32> = Registry::builder(factory(&time, one_failure_trips()))
        .max_keys(1_000)
        .build();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for k in 0..2_000 {
                    let _ = reg.get_or_create(&(k % 1_500));
                }
            });
        }
    });
    assert_eq!(reg.len(), 1_000);
    let mut n = 0;
    reg.for_each(|_, b| {
        assert_eq!(b.handle_count(), 1);
        n += 1;
    });
    assert_eq!(n, 1_000);
}
