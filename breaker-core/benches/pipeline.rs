//! The cost of a successful call through `retry > breaker > timeout`, against the bare call,
//! on a current-thread runtime. Target: under 100 ns added.
//!
//! Each sample runs its iterations inside one `block_on`, so the runtime's entry cost is not
//! counted (`iter_custom`): the figures are per call.
//!
//! Run: `cargo bench -p breaker-core --bench pipeline -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use breaker_core::breaker::BreakerPolicy;
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::RetryPolicy;
use criterion::{criterion_group, criterion_main, Criterion};
use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

async fn op() -> Result<u64, ()> {
    Ok(black_box(7))
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
    g.bench_function("bare call", |b| b.iter_custom(|n| timed(&rt, n, op)));
    g.bench_function("empty pipeline", |b| {
        b.iter_custom(|n| timed(&rt, n, || empty.call(op)))
    });
    g.bench_function("breaker", |b| {
        b.iter_custom(|n| timed(&rt, n, || breaker_only.call(op)))
    });
    g.bench_function("retry > breaker > timeout", |b| {
        b.iter_custom(|n| timed(&rt, n, || full.call(op)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
