//! The admission paths of the rate limit, adaptive limit and throttling layers, beside their
//! peers in the same run: `governor`'s own direct limiter (the GCRA arithmetic our limiter
//! uses, on its default `quanta` clock) and the bulkhead (a tokio semaphore) for the adaptive
//! limit.
//!
//! `cargo bench -p breaker-core --bench layers` (`-- --quick` for a short run). The README's
//! table has the figures of one run with the ratio to the peer.
//!
//! - `rate/admit`: a permit from a limiter that always has one (10^9 per second, burst 10^6);
//!   `rate/reject`: the refusal of a spent limiter (one permit per hour), with its `retry_after`.
//! - `rate_keyed/admit`: a permit of one of 10,000 keys in turn, the key's limiter looked up
//!   (already made): our bounded `RateLimiters::try_acquire` (sharded table, 10,000 keys at
//!   most, idle TTL) beside `governor`'s keyed limiter (its unbounded `dashmap` store); both
//!   hash the key with std's `RandomState` (SipHash).
//! - `adaptive/admit+release`: take a slot and free it without a sample (a lock-free CAS and a
//!   `fetch_sub`); `adaptive/admit+success`: the same with an AIMD sample (one more CAS);
//!   `bulkhead/admit+release`: the same on the fixed bulkhead.
//! - `throttle/admit+success`: admission (the window's totals, no draw while nothing is shed)
//!   and the accepted outcome.

use breaker_core::adaptive::{AdaptiveLimitPolicy, AdaptiveLimiter, LimitAlgorithm};
use breaker_core::bulkhead::{Bulkhead, BulkheadPolicy};
use breaker_core::ratelimit::{RateLimitPolicy, RateLimiter, RateLimiters};
use breaker_core::throttle::{ThrottlePolicy, Throttler};
use criterion::Criterion;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

fn rate(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate");
    let open = RateLimitPolicy::per_second(1_000_000_000).burst(1_000_000);
    let ours = RateLimiter::new(open).unwrap();
    g.bench_function("admit/breaker", |b| {
        b.iter(|| black_box(ours.try_acquire()).is_ok())
    });
    let quota = governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
        .allow_burst(NonZeroU32::new(1_000_000).unwrap());
    let theirs = governor::RateLimiter::direct(quota);
    g.bench_function("admit/governor", |b| {
        b.iter(|| black_box(theirs.check()).is_ok())
    });

    let spent =
        RateLimiter::new(RateLimitPolicy::new(1, Duration::from_secs(3600)).burst(1)).unwrap();
    spent.try_acquire().unwrap();
    g.bench_function("reject/breaker", |b| {
        b.iter(|| black_box(spent.try_acquire()).unwrap_err().retry_after)
    });
    let quota = governor::Quota::with_period(Duration::from_secs(3600)).unwrap();
    let theirs = governor::RateLimiter::direct(quota);
    let _ = theirs.check();
    let clock = governor::clock::DefaultClock::default();
    g.bench_function("reject/governor", |b| {
        b.iter(|| {
            use governor::clock::Clock as _;
            black_box(theirs.check())
                .unwrap_err()
                .wait_time_from(clock.now())
        })
    });
    g.finish();
}

const KEYS: u64 = 10_000;

fn rate_keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate_keyed");
    let open = RateLimitPolicy::per_second(1_000_000_000).burst(1_000_000);
    let ours: RateLimiters<u64> = RateLimiters::builder(open)
        .max_keys(KEYS as usize)
        .idle_ttl(Duration::from_secs(600))
        .build()
        .unwrap();
    for k in 0..KEYS {
        ours.get_or_create(&k).unwrap();
    }
    let mut k = 0;
    g.bench_function("admit/breaker", |b| {
        b.iter(|| {
            k = (k + 1) % KEYS;
            black_box(ours.try_acquire(&k)).is_ok()
        })
    });
    let quota = governor::Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
        .allow_burst(NonZeroU32::new(1_000_000).unwrap());
    let theirs = governor::RateLimiter::keyed(quota);
    for k in 0..KEYS {
        let _ = theirs.check_key(&k);
    }
    let mut k = 0;
    g.bench_function("admit/governor", |b| {
        b.iter(|| {
            k = (k + 1) % KEYS;
            black_box(theirs.check_key(&k)).is_ok()
        })
    });
    g.finish();
}

fn adaptive(c: &mut Criterion) {
    let mut g = c.benchmark_group("adaptive");
    let limiter =
        AdaptiveLimiter::new(AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 1000)).unwrap();
    g.bench_function("admit+release/breaker", |b| {
        b.iter(|| drop(black_box(limiter.try_acquire().unwrap())))
    });
    g.bench_function("admit+success/breaker", |b| {
        b.iter(|| black_box(limiter.try_acquire().unwrap()).success())
    });
    let bulkhead = Bulkhead::new(BulkheadPolicy {
        max_concurrent: 1000,
        max_wait: Duration::ZERO,
    })
    .unwrap();
    g.bench_function("admit+release/bulkhead", |b| {
        b.iter(|| drop(black_box(bulkhead.try_acquire().unwrap())))
    });
    g.finish();
}

fn throttle(c: &mut Criterion) {
    let mut g = c.benchmark_group("throttle");
    let throttler = Throttler::new(ThrottlePolicy::default()).unwrap();
    g.bench_function("admit+success/breaker", |b| {
        b.iter(|| black_box(throttler.try_acquire().unwrap()).success())
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    rate(&mut c);
    rate_keyed(&mut c);
    adaptive(&mut c);
    throttle(&mut c);
    c.final_summary();
}
