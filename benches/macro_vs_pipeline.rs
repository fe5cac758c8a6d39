//! `#[circuit_breaker]` costs no more than the same pipeline built by hand: a successful call
//! through `retry > breaker > timeout` (the default order of `threshold`, `retry`, `timeout`),
//! and the same with one breaker per key, on a current-thread runtime. The two of each pair
//! should be within noise; the attribute's keyed registry is bounded (idle eviction reads the
//! clock on each lookup), so "annotated, key" compares with "by hand, key, bounded".
//!
//! Each sample runs its iterations inside one `block_on` (`iter_custom`), so the figures are
//! per call, without the runtime's entry cost.
//!
//! Run: `cargo bench -p breaker --bench macro_vs_pipeline -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use breaker::breaker::{BreakerPolicy, CircuitBreaker};
use breaker::circuit_breaker;
use breaker::clock::Clock;
use breaker::pipeline::{AllErrors, Pipeline};
use breaker::registry::Registry;
use criterion::{criterion_group, Criterion};
use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

#[derive(Debug)]
struct Down;

#[circuit_breaker(threshold = 5, retry = "3x", timeout = "1s")]
async fn annotated(id: u64) -> Result<u64, Down> {
    Ok(black_box(id))
}

#[circuit_breaker(threshold = 5, retry = "3x", timeout = "1s", key = host)]
async fn annotated_keyed(host: &str, id: u64) -> Result<u64, Down> {
    let _ = host;
    Ok(black_box(id))
}

/// What the attribute builds: the same policy, the breaker on tokio's clock.
fn by_hand() -> Pipeline {
    Pipeline::builder()
        .breaker_policy(BreakerPolicy {
            consecutive_failures: Some(5),
            ..BreakerPolicy::default()
        })
        .clock(Clock::tokio())
        .retry("3x".parse().unwrap())
        .idempotent(true)
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

async fn op(id: u64) -> Result<u64, Down> {
    Ok(black_box(id))
}

/// Runs `call` `iters` times inside one `block_on` and returns the time taken.
fn timed<F, Fut>(rt: &Runtime, iters: u64, mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call().await);
        }
        start.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let pipeline = by_hand();
    let factory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(5),
        ..BreakerPolicy::default()
    })
    .clock(Clock::tokio())
    .build_factory()
    .unwrap();
    let keys: Registry<String> = Registry::new(factory.clone());
    // What `key = ..` builds since its registries are bounded: at most 10,000 keys, idle
    // eviction after 10 minutes (one clock reading per lookup), no per-key totals, tagged.
    let bounded: Registry<String> = Registry::builder(factory)
        .max_keys(10_000)
        .idle_ttl(Duration::from_secs(600))
        .totals(false)
        .build_tagged();
    let host = black_box("inventory.internal");

    let mut g = c.benchmark_group("macro_vs_pipeline");
    g.bench_function("annotated", |b| {
        b.iter_custom(|n| timed(&rt, n, || annotated(7)))
    });
    g.bench_function("by hand", |b| {
        b.iter_custom(|n| timed(&rt, n, || pipeline.call(|| op(7))))
    });
    g.bench_function("annotated, key", |b| {
        b.iter_custom(|n| timed(&rt, n, || annotated_keyed(host, 7)))
    });
    g.bench_function("by hand, key", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let breaker = keys.get_or_create(&host.to_string()).unwrap();
                pipeline
                    .call_with_breaker(&breaker, &AllErrors, || op(7))
                    .await
            })
        })
    });
    g.bench_function("by hand, key, bounded", |b| {
        b.iter_custom(|n| {
            timed(&rt, n, || async {
                let breaker = bounded.get_or_create(&host.to_string()).unwrap();
                pipeline
                    .call_with_breaker(&breaker, &AllErrors, || op(7))
                    .await
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
