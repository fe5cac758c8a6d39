//! The breaker's hot paths, side by side with `failsafe` 1.3 and `recloser` 1.4 in one run.
//!
//! `cargo bench -p breaker-core --bench breaker` runs everything; the memory figures (bytes per
//! breaker, heap allocations per call) are printed first, from a counting global allocator.
//! The table in README.md comes from this bench.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow};
use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use failsafe::CircuitBreaker as _;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

fn consecutive() -> BreakerPolicy {
    BreakerPolicy::default() // 5 consecutive failures, 30 s cooldown
}

fn time_window() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        },
        min_calls: 20,
        ..BreakerPolicy::default()
    }
}

fn count_window() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Count(100),
        min_calls: 20,
        ..BreakerPolicy::default()
    }
}

fn ours(policy: BreakerPolicy, totals: bool) -> CircuitBreaker {
    CircuitBreaker::builder(policy)
        .totals(totals)
        .build()
        .unwrap()
}

fn failsafe_consecutive() -> impl failsafe::CircuitBreaker + Clone + Send + Sync {
    let backoff = failsafe::backoff::constant(Duration::from_secs(30));
    let policy = failsafe::failure_policy::consecutive_failures(5, backoff);
    failsafe::Config::new().failure_policy(policy).build()
}

fn recloser() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .half_open_len(1)
        .open_wait(Duration::from_secs(30))
        .build()
}

#[inline]
fn ours_call(b: &CircuitBreaker) {
    if let Ok(p) = b.try_acquire() {
        p.success();
    }
}

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed_path");
    let b = ours(consecutive(), false);
    g.bench_function("breaker/consecutive", |x| {
        x.iter(|| ours_call(black_box(&b)))
    });
    let b = ours(consecutive(), true);
    g.bench_function("breaker/consecutive+totals", |x| {
        x.iter(|| ours_call(black_box(&b)))
    });
    let b = ours(time_window(), false);
    g.bench_function("breaker/time_window", |x| {
        x.iter(|| ours_call(black_box(&b)))
    });
    let b = ours(count_window(), false);
    g.bench_function("breaker/count_window", |x| {
        x.iter(|| ours_call(black_box(&b)))
    });
    let f = failsafe_consecutive();
    g.bench_function("failsafe/consecutive", |x| {
        x.iter(|| black_box(&f).call(|| Ok::<(), ()>(())))
    });
    let r = recloser();
    g.bench_function("recloser/count_window", |x| {
        x.iter(|| black_box(&r).call(|| Ok::<(), ()>(())))
    });
    g.finish();
}

fn open_rejection(c: &mut Criterion) {
    let mut g = c.benchmark_group("open_rejection");
    let b = ours(consecutive(), false);
    b.force_open();
    // A real trip, so the rejection path reads the clock to check the cooldown.
    let b = {
        let b2 = ours(consecutive(), false);
        for _ in 0..5 {
            b2.try_acquire().unwrap().failure();
        }
        drop(b);
        b2
    };
    g.bench_function("breaker", |x| {
        x.iter(|| black_box(&b).try_acquire().is_err())
    });
    let f = failsafe_consecutive();
    for _ in 0..5 {
        let _ = f.call(|| Err::<(), ()>(()));
    }
    g.bench_function("failsafe", |x| {
        x.iter(|| black_box(&f).call(|| Ok::<(), ()>(())).is_err())
    });
    let r = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(10)
        .open_wait(Duration::from_secs(30))
        .build();
    for _ in 0..20 {
        let _ = r.call(|| Err::<(), ()>(()));
    }
    g.bench_function("recloser", |x| {
        x.iter(|| black_box(&r).call(|| Ok::<(), ()>(())).is_err())
    });
    g.finish();
}

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

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("two_threads_closed");
    g.throughput(Throughput::Elements(2));
    let b = ours(consecutive(), false);
    g.bench_function(BenchmarkId::new("breaker", "consecutive"), |x| {
        x.iter_custom(|iters| on_threads(2, iters, &|| ours_call(&b)))
    });
    let b = ours(consecutive(), true);
    g.bench_function(BenchmarkId::new("breaker", "consecutive+totals"), |x| {
        x.iter_custom(|iters| on_threads(2, iters, &|| ours_call(&b)))
    });
    let b = ours(time_window(), false);
    g.bench_function(BenchmarkId::new("breaker", "time_window"), |x| {
        x.iter_custom(|iters| on_threads(2, iters, &|| ours_call(&b)))
    });
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
    g.finish();
}

fn create_100k(c: &mut Criterion) {
    let mut g = c.benchmark_group("create_100k");
    g.sample_size(10);
    let factory = CircuitBreaker::builder(consecutive())
        .totals(false)
        .build_factory()
        .unwrap();
    g.bench_function("breaker", |x| {
        x.iter(|| (0..100_000).map(|_| factory.create()).collect::<Vec<_>>())
    });
    g.bench_function("failsafe", |x| {
        x.iter(|| {
            (0..100_000)
                .map(|_| failsafe_consecutive())
                .collect::<Vec<_>>()
        })
    });
    g.bench_function("recloser", |x| {
        x.iter(|| (0..100_000).map(|_| recloser()).collect::<Vec<_>>())
    });
    g.finish();
}

/// Heap bytes per breaker (plus the inline handle), measured over 10,000 breakers.
fn bytes_per<T>(make: impl Fn() -> T) -> usize {
    const N: usize = 10_000;
    let mut v = Vec::with_capacity(N);
    let before = BYTES.load(Ordering::SeqCst);
    for _ in 0..N {
        v.push(make());
    }
    let heap = BYTES.load(Ordering::SeqCst) - before;
    drop(v);
    heap / N + std::mem::size_of::<T>()
}

fn allocations_per_call(call: impl Fn()) -> f64 {
    const N: usize = 1_000_000;
    call(); // warm up (thread-local stripe index)
    let before = ALLOCS.load(Ordering::SeqCst);
    for _ in 0..N {
        call();
    }
    (ALLOCS.load(Ordering::SeqCst) - before) as f64 / N as f64
}

fn memory_report() {
    let factory = CircuitBreaker::builder(consecutive())
        .totals(false)
        .build_factory()
        .unwrap();
    let with_totals = CircuitBreaker::builder(consecutive())
        .build_factory()
        .unwrap();
    let time = CircuitBreaker::builder(time_window())
        .totals(false)
        .build_factory()
        .unwrap();
    println!("memory: bytes per breaker, heap included (shared policy not counted)");
    println!(
        "  breaker consecutive          {:>6}",
        bytes_per(|| factory.create())
    );
    println!(
        "  breaker consecutive+totals   {:>6}",
        bytes_per(|| with_totals.create())
    );
    println!(
        "  breaker time window (10 b.)  {:>6}",
        bytes_per(|| time.create())
    );
    println!(
        "  failsafe consecutive         {:>6}",
        bytes_per(failsafe_consecutive)
    );
    println!("  recloser count window (100)  {:>6}", bytes_per(recloser));
    let b = ours(consecutive(), true);
    let t = ours(time_window(), true);
    let f = failsafe_consecutive();
    let r = recloser();
    println!("heap allocations per call (1,000,000 calls)");
    println!(
        "  breaker consecutive+totals   {:>6}",
        allocations_per_call(|| ours_call(&b))
    );
    println!(
        "  breaker time window+totals   {:>6}",
        allocations_per_call(|| ours_call(&t))
    );
    println!(
        "  failsafe consecutive         {:>6}",
        allocations_per_call(|| {
            let _ = f.call(|| Ok::<(), ()>(()));
        })
    );
    println!(
        "  recloser count window        {:>6}",
        allocations_per_call(|| {
            let _ = r.call(|| Ok::<(), ()>(()));
        })
    );
}

fn main() {
    memory_report();
    let mut c = Criterion::default().configure_from_args();
    closed_path(&mut c);
    open_rejection(&mut c);
    two_threads(&mut c);
    create_100k(&mut c);
    c.final_summary();
}
