//! Scale of the keyed registry: 1,000,000 breakers in one process, with no task or thread
//! working in the background, and the bytes each key costs (from a counting allocator).
//!
//! One test per binary on purpose: the allocator counts the whole process and the thread count
//! must not see other tests' threads.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::registry::Registry;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[path = "support/counting.rs"]
mod counting;
use counting::{threads, Counting, LIVE};

#[global_allocator]
static ALLOC: Counting = Counting;

const KEYS: u64 = 1_000_000;

#[test]
fn one_million_keyed_breakers_no_task_no_thread_bounded_bytes_per_key() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let time = ManualClock::new();
        let factory = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(3),
            ..BreakerPolicy::default()
        })
        .name("tenants")
        .clock(Clock::manual(&time))
        .totals(false) // totals cost 64 bytes per CPU stripe per key; off for many keys
        .build_factory()
        .unwrap();
        let reg: Registry<u64> = Registry::builder(factory)
            .max_keys(KEYS as usize)
            .idle_ttl(Duration::from_secs(600))
            .build();
        let threads_before = threads();
        let bytes_before = LIVE.load(Ordering::Relaxed);

        for k in 0..KEYS {
            let b = reg.get_or_create(&k).unwrap();
            let p = b.try_acquire().unwrap();
            if k % 1000 == 0 {
                p.failure()
            } else {
                p.success()
            }
        }
        assert_eq!(reg.len(), KEYS as usize);
        let bytes = LIVE.load(Ordering::Relaxed) - bytes_before;
        let per_key = bytes as f64 / KEYS as f64;
        println!("{KEYS} keys: {bytes} bytes allocated, {per_key:.1} bytes per key");
        println!(
            "Registry::memory_bytes() = {} ({:.1} per key)",
            reg.memory_bytes(),
            reg.memory_bytes() as f64 / KEYS as f64
        );
        // 64-byte breaker + a 24-byte slot and a control byte at a load factor >= 7/16.
        assert!(per_key < 160.0, "{per_key} bytes per key");

        // Used a second time: every key is served by the breaker created for it.
        for k in (0..KEYS).step_by(1000) {
            reg.get_or_create(&k)
                .unwrap()
                .try_acquire()
                .unwrap()
                .failure();
        }
        assert_eq!(reg.get(&0).unwrap().snapshot().consecutive_failures, 2);
        assert_eq!(reg.get(&1).unwrap().state(), State::Closed);

        // Nothing runs in the background: no task, no new thread.
        let metrics = tokio::runtime::Handle::current().metrics();
        assert_eq!(metrics.num_alive_tasks(), 0);
        assert_eq!(threads(), threads_before);

        // Idle eviction is on the request path / explicit, and frees the memory.
        time.advance(Duration::from_secs(3600));
        assert_eq!(reg.evict_idle(), KEYS as usize);
        assert!(reg.is_empty());
    });
}
