//! The cost of a successful call through `retry > breaker > timeout`, against the bare call,
//! on a current-thread runtime. Target: under 100 ns added.
//!
//! Run: `cargo bench -p breaker-core --bench pipeline -- --warm-up-time 1 --measurement-time 3`

use breaker_core::breaker::BreakerPolicy;
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::RetryPolicy;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();

    let full = Pipeline::builder()
        .retry(RetryPolicy::default())
        .idempotent(true)
        .breaker_policy(BreakerPolicy::default())
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let breaker_only = Pipeline::builder()
        .breaker_policy(BreakerPolicy::default())
        .build()
        .unwrap();
    let empty = Pipeline::builder().build().unwrap();

    let mut g = c.benchmark_group("pipeline");
    g.bench_function("bare call", |b| {
        b.iter(|| {
            rt.block_on(async {
                let op = || async { Ok::<u64, ()>(black_box(7)) };
                black_box(op().await)
            })
        })
    });
    g.bench_function("empty pipeline", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(empty.call(|| async { Ok::<u64, ()>(black_box(7)) }).await)
            })
        })
    });
    g.bench_function("breaker", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(
                    breaker_only
                        .call(|| async { Ok::<u64, ()>(black_box(7)) })
                        .await,
                )
            })
        })
    });
    g.bench_function("retry > breaker > timeout", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(full.call(|| async { Ok::<u64, ()>(black_box(7)) }).await)
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
