//! The closed path of a shared breaker against a local one, in one run (G1: no remote call on
//! the closed path, a few nanoseconds more than local): `local`, `shared` (through the
//! `SharedCircuitBreaker` handle) and `shared breaker` (the shared `CircuitBreaker` itself,
//! as a pipeline or `#[circuit_breaker]` calls it).
//!
//! `cargo bench -p breaker-redis --bench closed_path`. The shared breaker is registered with a
//! store connected to a `redis-server` started on a free loopback port (flushing every second,
//! as by default); without `redis-server` on `PATH` the store is started unconnected, which
//! takes the same closed path.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_redis::{Store, StoreConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn redis() -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a loopback port");
    let url = format!("redis://127.0.0.1:{port}/");
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok();
    if child.is_some() {
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    } else {
        eprintln!("redis-server not found: the store runs unconnected (same closed path)");
    }
    (Server(child), url)
}

fn closed_path(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (_server, url) = redis();
    let _guard = rt.enter();
    let store = Store::start(StoreConfig::new(&url, "bench").unwrap());
    let local = CircuitBreaker::builder(BreakerPolicy::default())
        .name("local")
        .build()
        .unwrap();
    let breaker = CircuitBreaker::builder(BreakerPolicy::default())
        .name("shared")
        .build()
        .unwrap();
    let shared = store.share(&breaker).unwrap();
    let mut g = c.benchmark_group("closed_path");
    g.bench_function("local", |b| {
        b.iter(|| black_box(&local).try_acquire().unwrap().success())
    });
    // Through the handle (one more relaxed load: the store's status).
    g.bench_function("shared", |b| {
        b.iter(|| black_box(&shared).try_acquire().unwrap().success())
    });
    // The shared breaker itself, as a pipeline or `#[circuit_breaker]` calls it.
    g.bench_function("shared breaker", |b| {
        b.iter(|| black_box(&breaker).try_acquire().unwrap().success())
    });
    g.finish();
    eprintln!("store after the run: {:?}", store.stats());
}

criterion_group!(benches, closed_path);
criterion_main!(benches);
