//! Contention scaling: 1, 2, 4, 8, 16 threads calling one shared breaker, closed and open
//! paths, total calls per second, side by side with `failsafe` and `recloser`.
//!
//! `cargo bench -p breaker-core --bench scaling` (or run the built binary with
//! `--threads 1,2,4,8,16 --millis 300`). Prints a Markdown table.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow};
use failsafe::CircuitBreaker as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// A table row: its label and the measurement for a thread count.
type Row = (&'static str, Box<dyn Fn(usize) -> f64>);

fn measure(threads: usize, millis: u64, call: &(dyn Fn() + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        call();
                    }
                    n += 256;
                }
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(millis));
        stop.store(true, Ordering::Relaxed);
        start.elapsed()
    });
    total.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
}

fn ours(policy: BreakerPolicy, totals: bool) -> CircuitBreaker {
    CircuitBreaker::builder(policy)
        .totals(totals)
        .build()
        .unwrap()
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

/// 50 % of the last 100 calls, at least 10 calls (recloser's shape).
fn count_window() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        window: SlidingWindow::Count(100),
        min_calls: 10,
        ..BreakerPolicy::default()
    }
}

fn failsafe_cb() -> impl failsafe::CircuitBreaker + Sync {
    let backoff = failsafe::backoff::constant(Duration::from_secs(30));
    failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(5, backoff))
        .build()
}

fn recloser_cb() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .half_open_len(1)
        .open_wait(Duration::from_secs(30))
        .build()
}

fn ours_call(b: &CircuitBreaker) {
    if let Ok(p) = std::hint::black_box(b).try_acquire() {
        p.success();
    }
}

fn main() {
    let mut threads = vec![1usize, 2, 4, 8, 16];
    let mut millis = 300u64;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--threads" => {
                threads = args[i + 1].split(',').map(|t| t.parse().unwrap()).collect();
                i += 1;
            }
            "--millis" => {
                millis = args[i + 1].parse().unwrap();
                i += 1;
            }
            _ => {} // cargo bench passes `--bench`
        }
        i += 1;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("scaling on {cpus} CPUs, {millis} ms per cell, million calls per second (total)\n");
    let mut rows: Vec<Row> = Vec::new();
    rows.push((
        "breaker closed, consecutive",
        Box::new(move |t| {
            let b = ours(BreakerPolicy::default(), false);
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "breaker closed, consecutive + totals",
        Box::new(move |t| {
            let b = ours(BreakerPolicy::default(), true);
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "breaker closed, time window",
        Box::new(move |t| {
            let b = ours(time_window(), false);
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "breaker closed, count window (100 calls)",
        Box::new(move |t| {
            let b = ours(count_window(), false);
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "breaker closed, count window, `CircuitBreaker::new` (defaults)",
        Box::new(move |t| {
            let b = CircuitBreaker::new(count_window()).unwrap();
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "breaker open rejection",
        Box::new(move |t| {
            let b = ours(BreakerPolicy::default(), false);
            for _ in 0..5 {
                b.try_acquire().unwrap().failure();
            }
            measure(t, millis, &|| ours_call(&b))
        }),
    ));
    rows.push((
        "failsafe closed, consecutive",
        Box::new(move |t| {
            let f = failsafe_cb();
            measure(t, millis, &|| {
                let _ = std::hint::black_box(&f).call(|| Ok::<(), ()>(()));
            })
        }),
    ));
    rows.push((
        "failsafe open rejection",
        Box::new(move |t| {
            let f = failsafe_cb();
            for _ in 0..5 {
                let _ = f.call(|| Err::<(), ()>(()));
            }
            measure(t, millis, &|| {
                let _ = std::hint::black_box(&f).call(|| Ok::<(), ()>(()));
            })
        }),
    ));
    rows.push((
        "recloser closed, count window",
        Box::new(move |t| {
            let r = recloser_cb();
            measure(t, millis, &|| {
                let _ = std::hint::black_box(&r).call(|| Ok::<(), ()>(()));
            })
        }),
    ));
    rows.push((
        "recloser open rejection",
        Box::new(move |t| {
            let r = recloser::Recloser::custom()
                .error_rate(0.5)
                .closed_len(10)
                .open_wait(Duration::from_secs(30))
                .build();
            for _ in 0..20 {
                let _ = r.call(|| Err::<(), ()>(()));
            }
            measure(t, millis, &|| {
                let _ = std::hint::black_box(&r).call(|| Ok::<(), ()>(()));
            })
        }),
    ));
    print!("| case |");
    for t in &threads {
        print!(" {t} thr |");
    }
    println!();
    print!("|---|");
    for _ in &threads {
        print!("---:|");
    }
    println!();
    for (name, run) in rows {
        print!("| {name} |");
        for &t in &threads {
            print!(" {:.1} |", run(t) / 1e6);
        }
        println!();
    }
}
