//! Every column of the README's comparison table in one run: this library through the API a
//! user reaches first (`CircuitBreaker::new(policy)` with its defaults, `try_acquire()` +
//! `Permit::success()`, and a breaker-only `Pipeline::call` for the async column), the tuned
//! paths (a factory, totals off) as separate rows, and `failsafe` 1.3, `recloser` 1.4 and
//! `tower-resilience` 0.9 (its `circuitbreaker` crate, driven as a tower `Service`) through
//! their own most direct sync and async APIs, with the same shape of policy.
//!
//! `cargo bench -p breaker-core --bench breaker -- --warm-up-time 1 --measurement-time 2`
//!
//! The memory figures (heap bytes and allocations per breaker, heap allocations per call) come
//! first, from a counting global allocator; then the API each row goes through; then criterion.
//! Figures from one run are comparable with each other (ratios); absolute times depend on the
//! machine and its load.
//!
//! Instruction counts, which unlike times do not depend on the machine's load: with
//! `BREAKER_IR=<row>,<calls>` the binary makes that many calls of one row and exits, for
//! `valgrind --tool=callgrind` (rows: `new/<shape>`, `factory/<shape>` (totals off),
//! `totals/<shape>` (a factory's breaker with totals on),
//! `failsafe/consecutive`, `failsafe/time_window`, `recloser/count_window`, `open/new`,
//! `open/failsafe`, `open/recloser`, `async/new/<shape>` (a breaker-only `Pipeline::call`),
//! `async/failsafe`, `async/failsafe/time_window`, `async/recloser`, `create/new/<shape>`,
//! `create/failsafe`, `create/recloser`, `create/tower`, and `empty` and `async/empty`: the
//! harness alone, sync and async;
//! shapes: `consecutive`, `count_window`, `time_window`). Only the calls are counted (the
//! function `measured`), so one call's cost is the count divided by the calls, less the
//! harness's (`empty`, or `async/empty` for an `async/` row):
//!
//! ```text
//! B=$(ls -t target/release/deps/breaker-* | grep -v '\.d$' | head -1)
//! BREAKER_IR=new/count_window,100000 valgrind --tool=callgrind --toggle-collect='*measured*' \
//!     --callgrind-out-file=/dev/null $B 2>&1 | grep refs
//! ```
//!
//! `breaker-core/benches/ir.sh` runs every row this way and prints the table.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow};
use breaker_core::pipeline::Pipeline;
use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use failsafe::CircuitBreaker as _;
use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tower::{Layer as _, Service};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// --- The three policy shapes -----------------------------------------------------------------

const COOLDOWN: Duration = Duration::from_secs(30);

/// 5 consecutive failures, 30 s cooldown (the default policy).
fn consecutive() -> BreakerPolicy {
    BreakerPolicy::default()
}

/// 50 % of the last 100 calls, at least 10 calls.
fn count_window() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Count(100),
        min_calls: 10,
        ..BreakerPolicy::default()
    }
}

/// 50 % over 30 s in 10 buckets, at least 10 calls.
fn time_window() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Time {
            length: Duration::from_secs(30),
            buckets: 10,
        },
        min_calls: 10,
        ..BreakerPolicy::default()
    }
}

/// A policy shape: its name in the output, and its policy.
type Shape = (&'static str, fn() -> BreakerPolicy);

const SHAPES: [Shape; 3] = [
    ("consecutive", consecutive),
    ("count_window", count_window),
    ("time_window", time_window),
];

// --- This library ----------------------------------------------------------------------------

/// The default API: `CircuitBreaker::new(policy)`.
fn ours(policy: BreakerPolicy) -> CircuitBreaker {
    CircuitBreaker::new(policy).unwrap()
}

/// The tuned path: one factory, totals off (the default, said explicitly).
fn ours_factory(policy: BreakerPolicy) -> breaker_core::breaker::BreakerFactory {
    CircuitBreaker::builder(policy)
        .totals(false)
        .build_factory()
        .unwrap()
}

/// A factory with lifetime totals on (opt-in).
fn ours_factory_totals(policy: BreakerPolicy) -> breaker_core::breaker::BreakerFactory {
    CircuitBreaker::builder(policy)
        .totals(true)
        .build_factory()
        .unwrap()
}

#[inline]
fn ours_call(b: &CircuitBreaker) {
    if let Ok(p) = b.try_acquire() {
        p.success();
    }
}

fn ours_pipeline(policy: BreakerPolicy) -> Pipeline {
    Pipeline::builder().breaker_policy(policy).build().unwrap()
}

// --- failsafe ----------------------------------------------------------------------------------

type FailsafeConsecutive = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
>;
type FailsafeTime = failsafe::StateMachine<
    failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::Constant>,
    (),
>;

fn failsafe_consecutive() -> FailsafeConsecutive {
    let backoff = failsafe::backoff::constant(COOLDOWN);
    let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
    failsafe::Config::new().failure_policy(policy).build()
}

/// failsafe's time window: a success rate of at least 50 % over 30 s, at least 10 calls.
fn failsafe_time() -> FailsafeTime {
    let backoff = failsafe::backoff::constant(COOLDOWN);
    let policy = failsafe::failure_policy::success_rate_over_time_window(
        0.5,
        10,
        Duration::from_secs(30),
        backoff,
    );
    failsafe::Config::new().failure_policy(policy).build()
}

// --- recloser (count window only) ------------------------------------------------------------

fn recloser() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .half_open_len(1)
        .open_wait(COOLDOWN)
        .build()
}

// --- tower-resilience ------------------------------------------------------------------------

type Inner = tower::util::ServiceFn<fn(u64) -> std::future::Ready<Result<u64, ()>>>;
type TowerBreaker = tower_resilience_circuitbreaker::CircuitBreaker<
    Inner,
    tower_resilience_circuitbreaker::DefaultClassifier,
>;

fn echo(x: u64) -> std::future::Ready<Result<u64, ()>> {
    std::future::ready(Ok(x))
}

fn fail(_: u64) -> std::future::Ready<Result<u64, ()>> {
    std::future::ready(Err(()))
}

fn tower_layer(
    shape: &str,
) -> tower_resilience_circuitbreaker::CircuitBreakerLayer<
    tower_resilience_circuitbreaker::DefaultClassifier,
> {
    use tower_resilience_circuitbreaker::{CircuitBreakerLayer, SlidingWindowType};
    let b = CircuitBreakerLayer::builder().wait_duration_in_open(COOLDOWN);
    match shape {
        "consecutive" => b.consecutive_failures(5),
        "count_window" => b
            .failure_rate_threshold(0.5)
            .sliding_window_size(100)
            .minimum_number_of_calls(10),
        _ => b
            .failure_rate_threshold(0.5)
            .sliding_window_type(SlidingWindowType::TimeBased)
            .sliding_window_duration(Duration::from_secs(30))
            .minimum_number_of_calls(10),
    }
    .build()
}

fn tower_with(shape: &str, f: fn(u64) -> std::future::Ready<Result<u64, ()>>) -> TowerBreaker {
    tower_layer(shape).layer(tower::service_fn(f))
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
fn noop_waker() -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    const VTABLE: RawWakerVTable = RawWakerVTable::new(|_| RAW, |_| {}, |_| {}, |_| {});
    const RAW: RawWaker = RawWaker::new(std::ptr::null(), &VTABLE);
    // SAFETY: every function of the vtable ignores the (null) data pointer.
    unsafe { Waker::from_raw(RAW) }
}

/// Polls `f` to completion with a no-op waker (every future here is ready at once, or after
/// an uncontended lock; a contended one is polled again).
fn poll_now<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::hint::spin_loop();
    }
}

/// One call through a tower-resilience service: `poll_ready`, then `call`, as tower does.
fn tower_call(s: &mut TowerBreaker) -> bool {
    poll_now(std::future::poll_fn(|cx| s.poll_ready(cx))).unwrap();
    poll_now(s.call(7)).is_ok()
}

// --- Runners ---------------------------------------------------------------------------------

/// `threads` threads each make `iters` calls; returns the wall time.
fn on_threads(threads: usize, iters: u64, call: &(dyn Fn() + Sync)) -> Duration {
    let barrier = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..iters {
                    call();
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Runs `call` `iters` times inside one `block_on` (so the runtime's entry is not counted).
fn timed<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, mut call: F) -> Duration
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

async fn op() -> Result<u64, ()> {
    Ok(black_box(7))
}

// --- Groups ----------------------------------------------------------------------------------

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed");
    for (name, policy) in SHAPES {
        let b = ours(policy());
        g.bench_function(BenchmarkId::new("breaker new", name), |x| {
            x.iter(|| ours_call(black_box(&b)))
        });
        let b = ours_factory(policy()).create();
        g.bench_function(BenchmarkId::new("breaker factory totals off", name), |x| {
            x.iter(|| ours_call(black_box(&b)))
        });
        let mut t = tower_with(name, echo);
        g.bench_function(BenchmarkId::new("tower-resilience", name), |x| {
            x.iter(|| tower_call(black_box(&mut t)))
        });
    }
    let f = failsafe_consecutive();
    g.bench_function(BenchmarkId::new("failsafe", "consecutive"), |x| {
        x.iter(|| black_box(&f).call(|| Ok::<(), ()>(())))
    });
    let f = failsafe_time();
    g.bench_function(BenchmarkId::new("failsafe", "time_window"), |x| {
        x.iter(|| black_box(&f).call(|| Ok::<(), ()>(())))
    });
    let r = recloser();
    g.bench_function(BenchmarkId::new("recloser", "count_window"), |x| {
        x.iter(|| black_box(&r).call(|| Ok::<(), ()>(())))
    });
    // Not a breaker: the floor under a time window's success, which reads the coarse clock
    // (its bucket depends on the reading) on top of what a consecutive breaker's success does.
    g.bench_function("coarse clock read alone", |x| x.iter(coarse_now));
    g.finish();
}

/// One read of the clock a time window's buckets follow (`CLOCK_MONOTONIC_COARSE` on Linux),
/// as the library reads it, in nanoseconds.
#[cfg(target_os = "linux")]
#[inline(never)]
fn coarse_now() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Elsewhere the library's time windows read the precise clock.
#[cfg(not(target_os = "linux"))]
fn coarse_now() -> u64 {
    breaker_core::clock::Clock::system().now_nanos()
}

fn open_rejection(c: &mut Criterion) {
    let mut g = c.benchmark_group("open_rejection");
    // Real trips, so every path checks its cooldown.
    let b = ours(consecutive());
    for _ in 0..5 {
        b.try_acquire().unwrap().failure();
    }
    assert!(b.try_acquire().is_err());
    g.bench_function("breaker new", |x| {
        x.iter(|| black_box(&b).try_acquire().is_err())
    });
    let f = failsafe_consecutive();
    for _ in 0..5 {
        let _ = f.call(|| Err::<(), ()>(()));
    }
    assert!(f.call(|| Ok::<(), ()>(())).is_err());
    g.bench_function("failsafe", |x| {
        x.iter(|| black_box(&f).call(|| Ok::<(), ()>(())).is_err())
    });
    let r = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(10)
        .open_wait(COOLDOWN)
        .build();
    for _ in 0..20 {
        let _ = r.call(|| Err::<(), ()>(()));
    }
    assert!(r.call(|| Ok::<(), ()>(())).is_err());
    g.bench_function("recloser", |x| {
        x.iter(|| black_box(&r).call(|| Ok::<(), ()>(())).is_err())
    });
    let mut t = tower_with("consecutive", fail);
    for _ in 0..5 {
        tower_call(&mut t);
    }
    g.bench_function("tower-resilience", |x| {
        x.iter(|| !tower_call(black_box(&mut t)))
    });
    g.finish();
}

fn async_closed(c: &mut Criterion) {
    let rt = runtime();
    let _guard = rt.enter();
    let mut g = c.benchmark_group("async_closed");
    for (name, policy) in SHAPES {
        let p = ours_pipeline(policy());
        g.bench_function(BenchmarkId::new("breaker Pipeline::call", name), |x| {
            x.iter_custom(|n| timed(&rt, n, || p.call(op)))
        });
        let t = tower_with(name, echo);
        g.bench_function(BenchmarkId::new("tower-resilience", name), |x| {
            x.iter_custom(|n| {
                let t = t.clone();
                timed(&rt, n, move || {
                    let mut t = t.clone();
                    async move {
                        std::future::poll_fn(|cx| t.poll_ready(cx)).await.unwrap();
                        t.call(7).await
                    }
                })
            })
        });
    }
    let f = failsafe_consecutive();
    g.bench_function(BenchmarkId::new("failsafe", "consecutive"), |x| {
        x.iter_custom(|n| timed(&rt, n, || failsafe::futures::CircuitBreaker::call(&f, op())))
    });
    let f = failsafe_time();
    g.bench_function(BenchmarkId::new("failsafe", "time_window"), |x| {
        x.iter_custom(|n| timed(&rt, n, || failsafe::futures::CircuitBreaker::call(&f, op())))
    });
    let r = recloser::AsyncRecloser::from(recloser());
    g.bench_function(BenchmarkId::new("recloser", "count_window"), |x| {
        x.iter_custom(|n| timed(&rt, n, || r.call(op())))
    });
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("two_threads_closed");
    g.throughput(Throughput::Elements(2));
    for (name, policy) in SHAPES {
        let b = ours(policy());
        g.bench_function(BenchmarkId::new("breaker new", name), |x| {
            x.iter_custom(|iters| on_threads(2, iters, &|| ours_call(&b)))
        });
        let b = ours_factory(policy()).create();
        g.bench_function(BenchmarkId::new("breaker factory totals off", name), |x| {
            x.iter_custom(|iters| on_threads(2, iters, &|| ours_call(&b)))
        });
    }
    let f = failsafe_consecutive();
    g.bench_function(BenchmarkId::new("failsafe", "consecutive"), |x| {
        x.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                let _ = f.call(|| Ok::<(), ()>(()));
            })
        })
    });
    let r = recloser();
    g.bench_function(BenchmarkId::new("recloser", "count_window"), |x| {
        x.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                let _ = r.call(|| Ok::<(), ()>(()));
            })
        })
    });
    for name in ["consecutive", "count_window"] {
        let t = tower_with(name, echo);
        g.bench_function(BenchmarkId::new("tower-resilience", name), |x| {
            x.iter_custom(|iters| {
                on_threads(2, iters, &|| {
                    tower_call(&mut t.clone());
                })
            })
        });
    }
    g.finish();
}

fn create_100k(c: &mut Criterion) {
    let mut g = c.benchmark_group("create_100k");
    g.sample_size(10);
    for (name, policy) in SHAPES {
        let p = policy();
        g.bench_function(BenchmarkId::new("breaker new", name), |x| {
            x.iter(|| (0..100_000).map(|_| ours(p.clone())).collect::<Vec<_>>())
        });
        let factory = ours_factory_totals(policy());
        g.bench_function(BenchmarkId::new("breaker factory totals on", name), |x| {
            x.iter(|| (0..100_000).map(|_| factory.create()).collect::<Vec<_>>())
        });
        let factory = ours_factory(policy());
        g.bench_function(BenchmarkId::new("breaker factory totals off", name), |x| {
            x.iter(|| (0..100_000).map(|_| factory.create()).collect::<Vec<_>>())
        });
    }
    g.bench_function(BenchmarkId::new("failsafe", "consecutive"), |x| {
        x.iter(|| {
            (0..100_000)
                .map(|_| failsafe_consecutive())
                .collect::<Vec<_>>()
        })
    });
    g.bench_function(BenchmarkId::new("failsafe", "time_window"), |x| {
        x.iter(|| (0..100_000).map(|_| failsafe_time()).collect::<Vec<_>>())
    });
    g.bench_function(BenchmarkId::new("recloser", "count_window"), |x| {
        x.iter(|| (0..100_000).map(|_| recloser()).collect::<Vec<_>>())
    });
    g.bench_function(BenchmarkId::new("tower-resilience", "consecutive"), |x| {
        x.iter(|| {
            (0..100_000)
                .map(|_| tower_with("consecutive", echo))
                .collect::<Vec<_>>()
        })
    });
    g.finish();
}

// --- Memory ----------------------------------------------------------------------------------

/// Heap bytes and allocations per value (plus its inline size in the bytes), over 10,000.
fn heap_per<T>(make: impl Fn() -> T) -> (usize, f64) {
    const N: usize = 10_000;
    let mut v = Vec::with_capacity(N);
    let bytes = BYTES.load(Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst);
    for _ in 0..N {
        v.push(make());
    }
    let heap = BYTES.load(Ordering::SeqCst) - bytes;
    let n = ALLOCS.load(Ordering::SeqCst) - allocs;
    drop(v);
    (heap / N + std::mem::size_of::<T>(), n as f64 / N as f64)
}

fn allocations_per_call(call: impl Fn()) -> f64 {
    const N: usize = 1_000_000;
    call(); // warm up (thread-local stripe index, lazily made parts)
    let before = ALLOCS.load(Ordering::SeqCst);
    for _ in 0..N {
        call();
    }
    (ALLOCS.load(Ordering::SeqCst) - before) as f64 / N as f64
}

fn row(label: &str, (bytes, allocs): (usize, f64)) {
    println!("  {label:<58} {bytes:>6} B  {allocs:>5.1}");
}

fn memory_report() {
    println!("memory: bytes per breaker (inline + heap; a factory's shared policy not counted), allocations per breaker");
    for (name, policy) in SHAPES {
        row(
            &format!("breaker CircuitBreaker::new, {name}"),
            heap_per(|| ours(policy())),
        );
        row(
            &format!("breaker CircuitBreaker::new, {name}, after one call"),
            heap_per(|| {
                let b = ours(policy());
                ours_call(&b);
                b
            }),
        );
        let factory = ours_factory_totals(policy());
        row(
            &format!("breaker factory, totals on, {name}"),
            heap_per(|| factory.create()),
        );
        let factory = ours_factory(policy());
        row(
            &format!("breaker factory, totals off, {name}"),
            heap_per(|| factory.create()),
        );
    }
    row("failsafe consecutive", heap_per(failsafe_consecutive));
    row("failsafe time window", heap_per(failsafe_time));
    row("recloser count window (100)", heap_per(recloser));
    for (name, _) in SHAPES {
        row(
            &format!("tower-resilience {name}"),
            heap_per(|| tower_with(name, echo)),
        );
    }
    println!("heap allocations per call (1,000,000 calls)");
    for (name, policy) in SHAPES {
        let b = ours(policy());
        println!(
            "  breaker new, {name:<46} {:>6}",
            allocations_per_call(|| ours_call(&b))
        );
    }
    let f = failsafe_consecutive();
    println!(
        "  {:<58} {:>6}",
        "failsafe consecutive",
        allocations_per_call(|| {
            let _ = f.call(|| Ok::<(), ()>(()));
        })
    );
    let r = recloser();
    println!(
        "  {:<58} {:>6}",
        "recloser count window",
        allocations_per_call(|| {
            let _ = r.call(|| Ok::<(), ()>(()));
        })
    );
    let t = std::cell::RefCell::new(tower_with("consecutive", echo));
    println!(
        "  {:<58} {:>6}",
        "tower-resilience consecutive",
        allocations_per_call(|| {
            tower_call(&mut t.borrow_mut());
        })
    );
}

fn apis() {
    println!(
        "APIs per row:
  breaker new                 CircuitBreaker::new(policy) (defaults: lifetime totals off, system clock),
                              then try_acquire() + Permit::success(); open: try_acquire() -> Err
  breaker factory totals off  CircuitBreaker::builder(policy).totals(false).build_factory(), factory.create()
  breaker factory totals on   ... .totals(true).build_factory(), factory.create()
  breaker Pipeline::call      Pipeline::builder().breaker_policy(policy).build(), p.call(|| async {{..}})
                              on a current-thread tokio runtime
  failsafe                    Config::new().failure_policy(..).build(); sync: CircuitBreaker::call(|| ..);
                              async: failsafe::futures::CircuitBreaker::call(future);
                              time window: success_rate_over_time_window(0.5, 10, 30 s, constant 30 s)
  recloser                    Recloser::custom().error_rate(0.5).closed_len(100), call(|| ..);
                              async: AsyncRecloser::from(..).call(future)
  coarse clock read alone     clock_gettime(CLOCK_MONOTONIC_COARSE) (rustix, vDSO), as a time window reads
                              it for every outcome: the floor under a time window's success
  tower-resilience            CircuitBreakerLayer::builder()...build().layer(service_fn(..)) as a tower
                              Service: poll_ready then call, polled in place (sync rows) or awaited
                              on the tokio runtime (async rows); consecutive_failures(5), or
                              failure_rate_threshold(0.5) over 100 calls / 30 s, min 10 calls
policies: consecutive = 5 consecutive failures; count_window = 50 % of the last 100 calls, min 10;
          time_window = 50 % over 30 s in 10 buckets, min 10; cooldown 30 s everywhere"
    );
}

/// Runs `f` `times` times: the only code `valgrind --tool=callgrind
/// --toggle-collect='*measured*'` counts, so the count excludes start-up (the clock's
/// calibration varies by millions of instructions between runs) and each row's set-up.
#[inline(never)]
fn measured(times: u64, f: &dyn Fn()) {
    for _ in 0..times {
        f();
    }
}

/// `BREAKER_IR=<row>,<calls>`: makes the calls of one row and exits (see the module docs).
fn count_instructions(spec: &str) {
    let (row, calls) = spec.split_once(',').expect("BREAKER_IR=<row>,<calls>");
    let calls: u64 = calls.parse().expect("a number of calls");
    let shape = |name: &str| {
        SHAPES
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("unknown shape `{name}`"))
            .1()
    };
    let repeat = |f: &dyn Fn()| measured(calls, f);
    match row.split_once('/').unwrap_or((row, "")) {
        ("new", s) => {
            let b = ours(shape(s));
            repeat(&|| ours_call(black_box(&b)));
        }
        ("factory", s) => {
            let b = ours_factory(shape(s)).create();
            repeat(&|| ours_call(black_box(&b)));
        }
        ("totals", s) => {
            let b = ours_factory_totals(shape(s)).create();
            repeat(&|| ours_call(black_box(&b)));
        }
        ("failsafe", "consecutive") => {
            let f = failsafe_consecutive();
            repeat(&|| drop(black_box(&f).call(|| Ok::<(), ()>(()))));
        }
        ("failsafe", "time_window") => {
            let f = failsafe_time();
            repeat(&|| drop(black_box(&f).call(|| Ok::<(), ()>(()))));
        }
        ("recloser", "count_window") => {
            let r = recloser();
            repeat(&|| drop(black_box(&r).call(|| Ok::<(), ()>(()))));
        }
        ("open", peer) => {
            let b = ours(consecutive());
            let f = failsafe_consecutive();
            let r = recloser::Recloser::custom()
                .error_rate(0.5)
                .closed_len(10)
                .open_wait(COOLDOWN)
                .build();
            for _ in 0..20 {
                if let Ok(p) = b.try_acquire() {
                    p.failure();
                }
                let _ = f.call(|| Err::<(), ()>(()));
                let _ = r.call(|| Err::<(), ()>(()));
            }
            match peer {
                "new" => repeat(&|| {
                    black_box(black_box(&b).try_acquire().is_err());
                }),
                "failsafe" => repeat(&|| drop(black_box(&f).call(|| Ok::<(), ()>(())))),
                "recloser" => repeat(&|| drop(black_box(&r).call(|| Ok::<(), ()>(())))),
                other => panic!("unknown open row `{other}`"),
            }
        }
        ("async", peer) => {
            let rt = runtime();
            let _guard = rt.enter();
            let n = calls;
            match peer.split_once('/').unwrap_or((peer, "")) {
                ("new", s) => {
                    let p = ours_pipeline(shape(s));
                    measured(1, &|| {
                        timed(&rt, n, || p.call(op));
                    });
                }
                // The async harness alone: the runtime's loop awaiting the bare operation.
                ("empty", "") => measured(1, &|| {
                    timed(&rt, n, op);
                }),
                ("failsafe", "time_window") => {
                    let f = failsafe_time();
                    measured(1, &|| {
                        timed(&rt, n, || failsafe::futures::CircuitBreaker::call(&f, op()));
                    });
                }
                ("failsafe", "") => {
                    let f = failsafe_consecutive();
                    measured(1, &|| {
                        timed(&rt, n, || failsafe::futures::CircuitBreaker::call(&f, op()));
                    });
                }
                ("recloser", "") => {
                    let r = recloser::AsyncRecloser::from(recloser());
                    measured(1, &|| {
                        timed(&rt, n, || r.call(op()));
                    });
                }
                _ => panic!("unknown async row `{peer}`"),
            }
        }
        // One creation first, outside the count: the first one calibrates the system clock
        // (millions of instructions, once per process).
        ("create", "failsafe") => {
            drop(failsafe_consecutive());
            repeat(&|| drop(black_box(failsafe_consecutive())));
        }
        ("create", "recloser") => {
            drop(recloser());
            repeat(&|| drop(black_box(recloser())));
        }
        ("create", "tower") => {
            drop(tower_with("consecutive", echo));
            repeat(&|| drop(black_box(tower_with("consecutive", echo))));
        }
        // The harness alone: the loop and the call through `&dyn Fn` that every row pays.
        ("empty", "") => repeat(&|| {
            black_box(());
        }),
        ("create", rest) => {
            let s = rest.strip_prefix("new/").expect("create/new/<shape>");
            let p = shape(s);
            drop(ours(p.clone()));
            repeat(&|| drop(black_box(ours(p.clone()))));
        }
        _ => panic!("unknown row `{row}`"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("BREAKER_IR") {
        return count_instructions(&spec);
    }
    apis();
    memory_report();
    let mut c = Criterion::default().configure_from_args();
    closed_path(&mut c);
    open_rejection(&mut c);
    async_closed(&mut c);
    two_threads(&mut c);
    create_100k(&mut c);
    c.final_summary();
}
