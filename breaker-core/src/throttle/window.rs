//! The throttler's sliding window: 16 time buckets of two counts, lock-free.

use crate::sync::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per window.
const BUCKETS: usize = 16;

/// A window of `BUCKETS` buckets, each `len` nanoseconds long. A bucket holds its two counts
/// in one word (`requests << 32 | accepts`) and, beside it, the index (`now / len`, plus one;
/// 0 is "never used") of the span it counts. A bucket found holding an older span is reset
/// by whoever first swaps in the new index; an add that races that reset may be lost (a count
/// or two, once per bucket per lap), which a rule over hundreds of calls does not notice.
pub(super) struct Window {
    len: u64,
    stamps: [AtomicU64; BUCKETS],
    counts: [AtomicU64; BUCKETS],
}

impl Window {
    pub(super) fn new(window: Duration) -> Window {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        Window {
            len: (nanos / BUCKETS as u64).max(1),
            stamps: std::array::from_fn(|_| AtomicU64::new(0)),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds to the bucket of `now`.
    pub(super) fn add(&self, now: u64, requests: u32, accepts: u32) {
        let index = now / self.len + 1;
        let slot = (index % BUCKETS as u64) as usize;
        let delta = u64::from(requests) << 32 | u64::from(accepts);
        let stamp = &self.stamps[slot];
        let mut seen = stamp.load(Ordering::Acquire);
        while seen < index {
            match stamp.compare_exchange(seen, index, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.counts[slot].store(delta, Ordering::Release);
                    return;
                }
                Err(actual) => seen = actual,
            }
        }
        // The bucket holds this span (or, for a clock read just before another call moved it
        // on, the next one: counted there, a bucket's length early).
        self.counts[slot].fetch_add(delta, Ordering::AcqRel);
    }

    /// The requests and accepts of the buckets within the window at `now`.
    pub(super) fn totals(&self, now: u64) -> (u32, u32) {
        let index = now / self.len + 1;
        let oldest = index.saturating_sub(BUCKETS as u64 - 1);
        let (mut requests, mut accepts) = (0u32, 0u32);
        for (stamp, counts) in self.stamps.iter().zip(&self.counts) {
            let s = stamp.load(Ordering::Acquire);
            if s >= oldest && s <= index && s != 0 {
                let c = counts.load(Ordering::Acquire);
                requests = requests.saturating_add((c >> 32) as u32);
                accepts = accepts.saturating_add(c as u32);
            }
        }
        (requests, accepts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_age_out_a_bucket_at_a_time() {
        let w = Window::new(Duration::from_secs(16)); // 1 s buckets
        let s = 1_000_000_000u64;
        w.add(0, 3, 1);
        w.add(s / 2, 1, 1);
        w.add(5 * s, 2, 0);
        assert_eq!(w.totals(5 * s), (6, 2));
        // At 15.9 s the first bucket is still in the window; at 16 s it has left it.
        assert_eq!(w.totals(16 * s - 1), (6, 2));
        assert_eq!(w.totals(16 * s), (2, 0));
        // The slot of the first bucket, reused a lap later, starts from zero.
        w.add(16 * s, 1, 1);
        assert_eq!(w.totals(16 * s), (3, 1));
        assert_eq!(w.totals(40 * s), (0, 0));
    }
}
