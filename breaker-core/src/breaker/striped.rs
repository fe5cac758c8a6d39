//! A lock-free, per-thread striped time window.
//!
//! Why: a time window is where high-traffic breakers record every call. With one shared set of
//! counters, every success would write the same cache lines from every core and throughput would
//! collapse as threads are added. Here each thread writes its own stripe of buckets (one stripe
//! per CPU, rounded up to a power of two), and the window is summed across stripes only when a
//! rule could actually fire:
//!
//! - after every failure and every slow call;
//! - after a success, only if the last evaluation was in an earlier bucket (buckets may have aged
//!   out since, which can raise the rates) or found fewer than `min_calls` calls (this success
//!   may open the gate).
//!
//! Otherwise a success cannot raise a rate (adding a success to `f / c` gives `f / (c + 1)`),
//! so skipping the sum is exact: the rules are still re-evaluated after every outcome that could
//! change their verdict (case BR-14).
//!
//! Each bucket carries a tag `(generation, bucket index)`; a stale tag means "empty", so entering
//! a new closed period or a new bucket resets nothing eagerly. When more threads than stripes
//! share a stripe, a reset racing an increment can lose that one increment; with one thread per
//! stripe the counts are exact.

use super::totals::thread_index;
use super::window::WindowCounts;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

const INDEX_BITS: u32 = 40;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

#[derive(Default)]
struct Bucket {
    tag: AtomicU64,
    calls: AtomicU32,
    failures: AtomicU32,
    slow: AtomicU32,
}

/// Two buckets per cache line, so stripes never share a line.
#[repr(align(64))]
#[derive(Default)]
struct Line([Bucket; 2]);

pub(crate) struct StripedTimeWindow {
    bucket_nanos: u64,
    buckets: usize,
    lines_per_stripe: usize,
    stripe_mask: usize,
    lines: Box<[Line]>,
    /// `(tag << 1) | gate_open` of the newest evaluation.
    last_eval: AtomicU64,
    /// The newest bucket seen, `(index << SLOT_BITS) | slot`: while a reading falls in it, a
    /// call finds its bucket with a multiply and a compare instead of two divisions.
    cursor: AtomicU64,
}

const SLOT_BITS: u32 = 24;

fn tag(generation: u32, index: u64) -> u64 {
    (u64::from(generation) << INDEX_BITS) | (index & INDEX_MASK)
}

impl StripedTimeWindow {
    pub(crate) fn new(bucket_nanos: u64, buckets: u32, stripes: usize) -> Self {
        let buckets = buckets.max(1) as usize;
        let stripes = stripes.max(1).next_power_of_two();
        let lines_per_stripe = buckets.div_ceil(2);
        let lines = (0..stripes * lines_per_stripe)
            .map(|_| Line::default())
            .collect();
        StripedTimeWindow {
            bucket_nanos: bucket_nanos.max(1),
            buckets,
            lines_per_stripe,
            stripe_mask: stripes - 1,
            lines,
            last_eval: AtomicU64::new(u64::MAX),
            cursor: AtomicU64::new(0),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.lines)
    }

    fn bucket(&self, stripe: usize, slot: usize) -> &Bucket {
        &self.lines[stripe * self.lines_per_stripe + slot / 2].0[slot % 2]
    }

    /// The bucket index of `now` and its slot in the ring.
    #[inline(always)]
    fn locate(&self, now: u64) -> (u64, usize) {
        let c = self.cursor.load(Ordering::Relaxed);
        let index = c >> SLOT_BITS;
        if now.wrapping_sub(index.wrapping_mul(self.bucket_nanos)) < self.bucket_nanos {
            return (index, (c & ((1 << SLOT_BITS) - 1)) as usize);
        }
        self.locate_slow(now)
    }

    #[cold]
    #[inline(never)]
    fn locate_slow(&self, now: u64) -> (u64, usize) {
        let index = now / self.bucket_nanos;
        let slot = (index % self.buckets as u64) as usize;
        // Any thread's value is a correct cache entry (index and slot travel together).
        self.cursor
            .store((index << SLOT_BITS) | slot as u64, Ordering::Relaxed);
        (index, slot)
    }

    /// Records one outcome of closed-state `generation` at `now`. Returns the window totals if
    /// a rule could fire (see the module docs), `None` if evaluation can be skipped.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        generation: u32,
        now: u64,
        failure: bool,
        slow: bool,
        min_calls: u32,
    ) -> Option<WindowCounts> {
        let (index, slot) = self.locate(now);
        let want = tag(generation, index);
        let b = self.bucket(thread_index() & self.stripe_mask, slot);
        let have = b.tag.load(Ordering::Acquire);
        if have != want {
            // A bucket from an earlier lap or generation: claim and clear it. If the tag is
            // *newer* than ours (a clock reading that went backwards), count into it anyway:
            // the sample is not lost, only attributed to a slightly later bucket.
            let have_gen = (have >> INDEX_BITS) as u32;
            let stale = have_gen != generation || (have & INDEX_MASK) < (want & INDEX_MASK);
            if stale
                && b.tag
                    .compare_exchange(have, want, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                b.calls.store(0, Ordering::Relaxed);
                b.failures.store(0, Ordering::Relaxed);
                b.slow.store(0, Ordering::Relaxed);
            }
        }
        b.calls.fetch_add(1, Ordering::Relaxed);
        if failure {
            b.failures.fetch_add(1, Ordering::Relaxed);
        }
        if slow {
            b.slow.fetch_add(1, Ordering::Relaxed);
        }
        if !failure && !slow && self.last_eval.load(Ordering::Acquire) == (want << 1) | 1 {
            return None;
        }
        let counts = self.sum(generation, index);
        self.last_eval.store(
            (want << 1) | u64::from(counts.calls >= min_calls),
            Ordering::Release,
        );
        Some(counts)
    }

    /// The totals of closed-state `generation` as of `now`.
    pub(crate) fn counts(&self, generation: u32, now: u64) -> WindowCounts {
        self.sum(generation, now / self.bucket_nanos)
    }

    fn sum(&self, generation: u32, index: u64) -> WindowCounts {
        let oldest = index.saturating_sub(self.buckets as u64 - 1);
        let mut c = WindowCounts::default();
        for stripe in 0..=self.stripe_mask {
            for slot in 0..self.buckets {
                let b = self.bucket(stripe, slot);
                let t = b.tag.load(Ordering::Acquire);
                let i = t & INDEX_MASK;
                if (t >> INDEX_BITS) as u32 == generation && i >= oldest && i <= index {
                    c.calls += b.calls.load(Ordering::Relaxed);
                    c.failures += b.failures.load(Ordering::Relaxed);
                    c.slow += b.slow.load(Ordering::Relaxed);
                }
            }
        }
        c
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::breaker::policy::SlidingWindow;
    use crate::breaker::window::{Sample, Window};
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        /// The striped window agrees with the sequential time window (`Window::Time`, kept as
        /// the reference) on every total, for any outcomes on a clock that never goes back.
        #[test]
        fn agrees_with_the_sequential_time_window(
            buckets in 1u32..8,
            bucket_ms in 1u64..50,
            steps in prop::collection::vec((0u64..120, any::<bool>(), any::<bool>()), 1..200),
        ) {
            let bucket_nanos = bucket_ms * 1_000_000;
            let striped = StripedTimeWindow::new(bucket_nanos, buckets, 1);
            let mut reference = Window::new(SlidingWindow::Time {
                length: Duration::from_nanos(bucket_nanos * u64::from(buckets)),
                buckets,
            });
            let mut now = 0;
            for (step_ms, failure, slow) in steps {
                now += step_ms * 1_000_000;
                let want = reference.record(Sample { failure, slow }, now);
                striped.record(1, now, failure, slow, u32::MAX);
                prop_assert_eq!(striped.counts(1, now), want, "at {} ms", now / 1_000_000);
            }
        }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn buckets_age_out_and_generations_reset() {
        let w = StripedTimeWindow::new(S, 10, 4);
        assert!(w.record(1, 0, true, false, 1).is_some());
        w.record(1, 5 * S, true, false, 1);
        assert_eq!(w.counts(1, 9 * S).failures, 2);
        assert_eq!(
            w.counts(1, 10 * S).failures,
            1,
            "bucket [0s,1s) aged out at 10s"
        );
        assert_eq!(w.counts(1, 15 * S).calls, 0);
        assert_eq!(
            w.counts(2, 5 * S).calls,
            0,
            "another generation sees an empty window"
        );
        // Lapped bucket: index 15 reuses slot 5 and clears it.
        w.record(1, 15 * S, false, false, 1);
        assert_eq!(w.counts(1, 15 * S).calls, 1);
    }

    #[test]
    fn successes_skip_evaluation_only_when_the_gate_is_open() {
        let w = StripedTimeWindow::new(S, 10, 1);
        assert!(
            w.record(1, 0, false, false, 2).is_some(),
            "gate closed: evaluate"
        );
        assert!(
            w.record(1, 0, false, false, 2).is_some(),
            "this call opens the gate"
        );
        assert!(
            w.record(1, 0, false, false, 2).is_none(),
            "gate open, same bucket: skip"
        );
        assert!(
            w.record(1, 0, true, false, 2).is_some(),
            "failures always evaluate"
        );
        assert!(
            w.record(1, 0, false, true, 2).is_some(),
            "slow calls always evaluate"
        );
        assert!(
            w.record(1, S, false, false, 2).is_some(),
            "new bucket: evaluate"
        );
    }
}
