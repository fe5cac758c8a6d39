//! Scale of the keyed rate limiters: 100,000 limiters in one process, with no task or
//! thread working in the background, and the bytes each key costs (from a counting
//! allocator). Its own binary, like `registry_scale`: the allocator counts the whole process.

use breaker_core::clock::{Clock, ManualClock};
use breaker_core::ratelimit::{RateLimitPolicy, RateLimiters};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[path = "support/counting.rs"]
mod counting;
use counting::{threads, Counting, LIVE};

#[global_allocator]
static ALLOC: Counting = Counting;

const KEYS: u64 = 100_000;

#[test]
fn one_hundred_thousand_keyed_limiters_no_task_no_thread_bounded_bytes_per_key() {
    let time = ManualClock::new();
    let limiters: RateLimiters<u64> =
        RateLimiters::builder(RateLimitPolicy::per_second(10).burst(2))
            .clock(Clock::manual(&time))
            .max_keys(KEYS as usize)
            .idle_ttl(Duration::from_secs(600))
            .build()
            .unwrap();
    let threads_before = threads();
    let bytes_before = LIVE.load(Ordering::Relaxed);
    for k in 0..KEYS {
        assert!(limiters.get_or_create(&k).unwrap().try_acquire().is_ok());
    }
    assert_eq!(limiters.len(), KEYS as usize);
    let bytes = LIVE.load(Ordering::Relaxed) - bytes_before;
    let per_key = bytes as f64 / KEYS as f64;
    println!("{KEYS} keys: {bytes} bytes allocated, {per_key:.1} bytes per key");
    println!(
        "RateLimiters::memory_bytes() = {} ({:.1} per key)",
        limiters.memory_bytes(),
        limiters.memory_bytes() as f64 / KEYS as f64
    );
    // The limiter's shared block (its GCRA state, policy and clock) and a 24-byte slot and a
    // control byte at a load factor >= 7/16.
    assert!(per_key < 240.0, "{per_key} bytes per key");

    // Each key kept its own state: its second permit is there, its third is not.
    for k in (0..KEYS).step_by(1000) {
        let limiter = limiters.get(&k).unwrap();
        assert!(limiter.try_acquire().is_ok());
        assert!(limiter.try_acquire().is_err());
    }
    // Nothing runs in the background: no new thread.
    assert_eq!(threads(), threads_before);
    // Idle and refilled after the TTL: every limiter goes, and the memory with it.
    time.advance(Duration::from_secs(3600));
    assert_eq!(limiters.evict_idle(), KEYS as usize);
    assert!(limiters.is_empty());
}
