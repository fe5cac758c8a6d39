//! Opt-in figures for a store with many shared breakers (not run by default: it registers
//! 300,000 breakers and takes about a minute on a 2-core VM). Prints what the README's Redis
//! section and the changelog cite:
//!
//! ```text
//! cargo test --release -p breaker-redis --test redis scale -- --ignored --nocapture
//! ```
//!
//! With the default `StoreConfig` (250 ms operation timeout, 1 s flush interval):
//! - 200,000 shared breakers, the server paused until the store is degraded: the time of a
//!   flush while the store's breaker allows no attempt;
//! - 100,000 shared breakers, the server paused until the store is degraded, then resumed:
//!   how long until the store is healthy again (asserted: within 30 s).

use crate::common::unique_ns;
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_redis::{ReplicaId, SharedCircuitBreaker, Store, StoreConfig, StoreError};
use std::time::{Duration, Instant};

async fn store_with(url: &str, n: usize) -> (Store, Vec<SharedCircuitBreaker>) {
    let ns = unique_ns("scale");
    let cfg = StoreConfig::new(url, &ns)
        .unwrap()
        .replica(ReplicaId::new("r0").unwrap());
    let store = Store::connect(cfg).await.unwrap();
    let shared = (0..n)
        .map(|i| {
            let b = CircuitBreaker::builder(BreakerPolicy::default())
                .name(format!("k{i}"))
                .build()
                .unwrap();
            store.share(&b).unwrap()
        })
        .collect();
    store.sync().await.unwrap();
    (store, shared)
}

/// Pauses the server and counts until the store is degraded (bounded, 20 s).
async fn degrade(s: &crate::common::Server, store: &Store, one: &SharedCircuitBreaker) {
    s.pause();
    let start = Instant::now();
    while !store.stats().degraded {
        one.try_acquire().unwrap().success();
        let _ = store.flush_now().await;
        assert!(start.elapsed() < Duration::from_secs(20), "never degraded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in figures: registers 300,000 shared breakers"]
async fn scale_figures_of_a_store_with_many_shared_breakers() {
    let s = server!();
    let (store, shared) = store_with(&s.url(), 200_000).await;
    degrade(&s, &store, &shared[0]).await;
    let start = Instant::now();
    let mut refused = 0;
    for _ in 0..50 {
        if matches!(store.flush_now().await, Err(StoreError::Degraded { .. })) {
            refused += 1;
        }
    }
    println!(
        "200,000 breakers, degraded: {:?} per flush ({refused} of 50 not attempted)",
        start.elapsed() / 50
    );
    s.resume();
    drop((store, shared));

    let (store, shared) = store_with(&s.url(), 100_000).await;
    degrade(&s, &store, &shared[0]).await;
    s.resume();
    let start = Instant::now();
    while store.stats().degraded {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the store with 100,000 breakers never recovered: {:?}",
            store.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "100,000 breakers: healthy {:?} after the server came back",
        start.elapsed()
    );
}
