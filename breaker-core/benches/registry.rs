//! Keyed lookup + admission: `registry.get_or_create(&key)?.try_acquire()?.success()` over
//! 100,000 existing `u64` keys (system clock, idle TTL on, totals off), on 1 and 2 threads.
//!
//! With 2 threads each thread runs the full iteration count; the figure is wall time per
//! iteration, so it is the per-call latency while both threads hammer the registry.
//!
//! `CARGO_TARGET_DIR=... cargo bench -p breaker-core --bench registry`
//!
//! Measured on an idle 16-core x86-64 Linux machine (median, std `RandomState`, 64 shards):
//!
//! | case | 1 thread | 2 threads |
//! |---|---|---|
//! | spread over 100,000 keys | 149 ns | 244 ns |
//! | one hot key | 108 ns | 509 ns |
//! | unkeyed `try_acquire` + `success` (reference) | 30 ns | |
//!
//! The hot-key figure with 2 threads is the shard lock's reader count and the breaker's `Arc`
//! count bouncing between cores.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_core::registry::Registry;
use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;

fn registry() -> Registry<u64> {
    let factory = CircuitBreaker::builder(BreakerPolicy::default())
        .name("bench")
        .totals(false)
        .build_factory()
        .unwrap();
    let reg = Registry::builder(factory)
        .idle_ttl(Duration::from_secs(600))
        .build();
    for k in 0..KEYS {
        reg.get_or_create(&k).unwrap();
    }
    reg
}

/// A fixed pseudo-random key sequence (xorshift), so both threads and every run see the same.
fn keys(seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % KEYS
        })
        .collect()
}

fn run(reg: &Registry<u64>, keys: &[u64], iters: u64) {
    for i in 0..iters as usize {
        let key = keys[i & (keys.len() - 1)];
        let breaker = reg.get_or_create(black_box(&key)).unwrap();
        breaker.try_acquire().unwrap().success();
    }
}

fn bench(c: &mut Criterion) {
    let reg = registry();
    let mut group = c.benchmark_group("registry_lookup_admit");
    for threads in [1usize, 2] {
        for (name, hot) in [("spread_keys", false), ("one_hot_key", true)] {
            group.bench_function(BenchmarkId::new(name, format!("{threads}_threads")), |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for t in 0..threads {
                            let reg = &reg;
                            s.spawn(move || {
                                let ks = if hot {
                                    vec![7]
                                } else {
                                    keys(0x9e37 + t as u64)
                                };
                                run(reg, &ks, iters)
                            });
                        }
                    });
                    start.elapsed()
                })
            });
        }
    }
    group.finish();

    let breaker = reg.get_or_create(&1).unwrap();
    c.bench_function("unkeyed_try_acquire_success", |b| {
        b.iter(|| breaker.try_acquire().unwrap().success())
    });
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
}
