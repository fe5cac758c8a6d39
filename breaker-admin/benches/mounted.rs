//! The closed path of a breaker with and without the admin mounted: the same call
//! (`try_acquire` + `success`, lifetime totals on, as the dashboard's rates need), first with
//! no admin, then while an admin samples the breaker every 10 ms (25 times more often than the
//! default) with 1,000 event-stream readers connected over loopback; beside it, in the same
//! process at the same time, a breaker the admin does not sample (same neighbours, same CPU
//! competition: the difference between the two is what sampling costs the call). Peers in one
//! run: compare the lines, not the numbers across machines.
//!
//! `cargo bench -p breaker-admin --bench mounted`
#![allow(missing_docs)] // criterion's macros

use breaker_admin::Admin;
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn breaker(name: &str) -> CircuitBreaker {
    CircuitBreaker::builder(BreakerPolicy::default())
        .name(name)
        .totals(true)
        .build()
        .unwrap()
}

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed_path");
    let watched = breaker("watched");
    let other = breaker("other");
    let call = |b: &CircuitBreaker| {
        let b = b.clone();
        move |bench: &mut criterion::Bencher<'_>| {
            bench.iter(|| black_box(&b).try_acquire().unwrap().success())
        }
    };
    g.bench_function("no admin", call(&watched));

    // The admin and its readers live on a runtime of their own thread; it samples `watched`
    // only, so `other` measures the same call with the same neighbours, unsampled.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mounted = rt.block_on(async {
        let admin = Admin::builder()
            .breaker(&watched)
            .sample_every(Duration::from_millis(10))
            .max_event_readers(1000)
            .build();
        let server = admin.listen().await.unwrap();
        let addr = server.local_addr();
        let mut readers = Vec::new();
        for _ in 0..1000 {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await.unwrap();
            readers.push(s);
        }
        assert_eq!(admin.event_readers(), 1000);
        (admin, server, readers)
    });
    g.bench_function("mounted, sampled", call(&watched));
    g.bench_function("mounted, not sampled", call(&other));
    g.bench_function("mounted, sampled (again)", call(&watched));
    drop(mounted);
    drop(rt);
    g.finish();
}

criterion_group!(benches, closed_path);
criterion_main!(benches);
