//! The closed path of a breaker with and without the admin mounted: the same call
//! (`try_acquire` + `success`, lifetime totals on, as the dashboard's rates need) on one
//! breaker, first watched by nobody, then while an admin samples it every 10 ms (25 times more
//! often than the default) with 1,000 event-stream readers connected over loopback, then
//! watched by nobody again. Peers in one run: compare the three lines, not the numbers across
//! machines.
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
    // One breaker for all three lines, so its place in memory is the same.
    let b = breaker("inventory");
    let call = |bench: &mut criterion::Bencher<'_>| {
        bench.iter(|| black_box(&b).try_acquire().unwrap().success())
    };
    g.bench_function("unwatched", call);

    // The admin and its readers live on a runtime of their own thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mounted = rt.block_on(async {
        let admin = Admin::builder()
            .breaker(&b)
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
    g.bench_function("mounted", call);
    drop(mounted);
    drop(rt);
    g.bench_function("unwatched again", call);
    g.finish();
}

criterion_group!(benches, closed_path);
criterion_main!(benches);
