//! The latencies of recent attempts, for a percentile delay: lock-free.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// Latencies kept.
pub(super) const SAMPLES: usize = 256;
/// The percentile is recomputed every this many samples (and first after this many).
const EVERY: usize = 64;

/// A ring of the last [`SAMPLES`] latencies (nanoseconds) and the percentile last computed
/// over them. Recording is one `fetch_add` and one store; every [`EVERY`]th recording also
/// copies the ring and selects the percentile (O(`SAMPLES`), about a microsecond), so reading
/// the delay is one load.
pub(super) struct Latencies {
    ring: Box<[AtomicU64]>,
    next: AtomicUsize,
    /// The percentile, in nanoseconds; `u64::MAX` until first computed.
    current: AtomicU64,
    /// The percentile as a fraction, `0.5..=0.999`.
    quantile: f64,
}

impl Latencies {
    pub(super) fn new(percentile: f64) -> Latencies {
        Latencies {
            ring: (0..SAMPLES).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
            current: AtomicU64::new(u64::MAX),
            quantile: percentile / 100.0,
        }
    }

    /// Records one attempt's latency.
    pub(super) fn record(&self, nanos: u64) {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.ring[i % SAMPLES].store(nanos.max(1), Ordering::Relaxed);
        if (i + 1) % EVERY == 0 {
            self.recompute();
        }
    }

    #[cold]
    fn recompute(&self) {
        let mut copy: Vec<u64> = self
            .ring
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&n| n != 0)
            .collect();
        if copy.is_empty() {
            return;
        }
        // The nearest-rank percentile.
        let rank = ((self.quantile * copy.len() as f64).ceil() as usize).clamp(1, copy.len());
        let (_, p, _) = copy.select_nth_unstable(rank - 1);
        self.current.store(*p, Ordering::Relaxed);
    }

    /// The percentile last computed, `None` before the first [`EVERY`] samples.
    pub(super) fn percentile(&self) -> Option<u64> {
        let p = self.current.load(Ordering::Relaxed);
        (p != u64::MAX).then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_rank_percentile_of_the_last_samples() {
        let l = Latencies::new(95.0);
        for n in 1..=63 {
            l.record(n);
        }
        assert_eq!(l.percentile(), None);
        l.record(64);
        // 95% of 64 samples: rank 61.
        assert_eq!(l.percentile(), Some(61));
        for n in 65..=256 {
            l.record(n);
        }
        assert_eq!(l.percentile(), Some(244));
        // A lap later the ring holds 257..=512 only.
        for n in 257..=512 {
            l.record(n);
        }
        assert_eq!(l.percentile(), Some(256 + 244));
    }
}
