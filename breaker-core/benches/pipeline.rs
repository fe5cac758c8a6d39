//! The cost of a successful call through `retry > breaker > timeout`, against the bare call,
//! on a current-thread runtime. Target: under 100 ns added.
//!
//! Each sample runs its iterations inside one `block_on`, so the runtime's entry cost is not
//! counted (`iter_custom`): the figures are per call.
//!
//! Run: `cargo bench -p breaker-core --bench pipeline -- --warm-up-time 1 --measurement-time 3`
//!
//! Instruction counts, which unlike times do not depend on the machine's load: with
//! `PIPELINE_IR=<variant>,<calls>` (variant `bare`, `empty`, `breaker` or `full`) the binary
//! makes that many calls and exits, for `valgrind --tool=callgrind`. The cost of one call is the
//! difference between two call counts divided by the difference of the counts:
//!
//! ```text
//! B=$(ls -t target/release/deps/pipeline-* | grep -v '\.d$' | head -1)
//! for n in 0 100000; do PIPELINE_IR=full,$n valgrind --tool=callgrind \
//!     --callgrind-out-file=/dev/null $B 2>&1 | grep refs; done
//! ```
#![allow(missing_docs)]

use breaker_core::breaker::BreakerPolicy;
use breaker_core::pipeline::Pipeline;
use breaker_core::retry::RetryPolicy;
use criterion::{criterion_group, Criterion};
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

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// The three pipelines measured: empty, breaker only, `retry > breaker > timeout`.
fn pipelines() -> (Pipeline, Pipeline, Pipeline) {
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
    (empty, breaker_only, full)
}

/// The `full` policy from a config registry: a pipeline that follows reloads, as a
/// `policy = ".."` function runs (one `ArcSwap` load and reference count more per call).
fn live() -> breaker_core::config::LivePipeline {
    use breaker_core::config::{Format, Loader, PolicyRegistry};
    let text = "[policies.p]\nretry = \"3x\"\nidempotent = true\n\
                breaker = \"5 consecutive, open 30s\"\ntimeout = \"1s\"\n\
                order = \"retry > breaker > timeout\"\n";
    let registry = PolicyRegistry::load(Loader::text(text, Format::Toml)).unwrap();
    registry.pipeline("p").unwrap()
}

/// `PIPELINE_IR=<variant>,<calls>`: makes the calls and exits (see the module docs).
fn count_instructions(spec: &str) {
    let (variant, calls) = spec.split_once(',').expect("PIPELINE_IR=<variant>,<calls>");
    let calls: u64 = calls.parse().expect("a number of calls");
    let rt = runtime();
    let _guard = rt.enter();
    let (empty, breaker_only, full) = pipelines();
    match variant {
        "bare" => timed(&rt, calls, op),
        "empty" => timed(&rt, calls, || empty.call(op)),
        "breaker" => timed(&rt, calls, || breaker_only.call(op)),
        "full" => timed(&rt, calls, || full.call(op)),
        other => panic!("unknown variant `{other}`; expected `bare`, `empty`, `breaker` or `full`"),
    };
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let _guard = rt.enter();
    let (empty, breaker_only, full) = pipelines();

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
    let live = live();
    g.bench_function("retry > breaker > timeout, reloadable", |b| {
        b.iter_custom(|n| timed(&rt, n, || live.call(op)))
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(spec) = std::env::var("PIPELINE_IR") {
        return count_instructions(&spec);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
