//! Latency of the calls a pipeline makes: a histogram of atomic buckets fed by a
//! [`Recorder`](breaker_core::record::Recorder) sink.
//!
//! # Why our own histogram
//! A recorder's sink runs on the caller's thread, inside the call's path, so recording must be
//! a few instructions with no lock and no allocation: one bucket index from the latency's
//! leading zeros and one relaxed `fetch_add`. `hdrhistogram` needs `&mut` (or a per-thread
//! recorder and a refresh step); a fixed array of `AtomicU64` needs neither.
//!
//! # Precision
//! Buckets are log-linear in microseconds: below 4 µs one bucket per microsecond, then four
//! buckets per power of two up to 2^37 µs (38 hours). A percentile is reported as the upper
//! edge of its bucket, so it reads at most 25 % high (and never low).

use breaker_core::record::{Entry, Recorded};
use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets: 4 exact ones below 4 µs, then 4 per power of two from 2^2 to 2^37 µs.
pub(crate) const BUCKETS: usize = 4 + 36 * 4;

/// The bucket of a latency of `us` microseconds.
pub(crate) fn bucket(us: u64) -> usize {
    if us < 4 {
        return us as usize;
    }
    let p = 63 - us.leading_zeros(); // floor(log2(us)) >= 2
    let p = p.min(37);
    let m = if p == 37 && us >> 37 > 1 {
        3
    } else {
        ((us >> (p - 2)) & 0b11) as u32
    };
    4 + ((p - 2) * 4 + m) as usize
}

/// The largest latency, in microseconds, that falls in bucket `i`.
pub(crate) fn upper_edge(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let p = (i - 4) / 4 + 2;
    let m = ((i - 4) % 4) as u64;
    ((5 + m) << (p - 2)) - 1
}

/// Cumulative counts of one pipeline's attempts.
pub(crate) struct Histogram {
    /// Attempts that reached the dependency (success, failure, ignored, timeout), by latency.
    buckets: [AtomicU64; BUCKETS],
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    /// Counts `entry` if the dependency was called (a local rejection or a cancellation has no
    /// latency of the dependency's).
    #[inline]
    pub(crate) fn record(&self, entry: &Entry) {
        if matches!(entry.outcome, Recorded::Rejected | Recorded::Cancelled) {
            return;
        }
        self.buckets[bucket(entry.latency_ns / 1_000)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn counts(&self) -> Box<[u64; BUCKETS]> {
        let mut out = Box::new([0u64; BUCKETS]);
        for (o, b) in out.iter_mut().zip(&self.buckets) {
            *o = b.load(Ordering::Relaxed);
        }
        out
    }
}

/// Percentiles of the attempts counted between two readings of a histogram, in microseconds
/// (upper bucket edges): `None` when no attempt was counted.
pub(crate) fn percentiles(
    now: &[u64; BUCKETS],
    before: Option<&[u64; BUCKETS]>,
    qs: &[f64],
) -> Option<(u64, Vec<u64>)> {
    let diff: Vec<u64> = match before {
        Some(b) => now
            .iter()
            .zip(b.iter())
            .map(|(n, b)| n - b.min(n))
            .collect(),
        None => now.to_vec(),
    };
    let total: u64 = diff.iter().sum();
    if total == 0 {
        return None;
    }
    let out = qs
        .iter()
        .map(|q| {
            // The rank of the q-th quantile, from 1.
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, n) in diff.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return upper_edge(i);
                }
            }
            upper_edge(BUCKETS - 1)
        })
        .collect();
    Some((total, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_latency_lands_in_a_bucket_whose_upper_edge_is_within_25_percent() {
        for us in (0..5_000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 36, u64::MAX / 1000]) {
            let i = bucket(us);
            assert!(i < BUCKETS, "{us} µs -> bucket {i}");
            let edge = upper_edge(i);
            if us < 1 << 38 {
                assert!(edge >= us, "{us} µs: edge {edge} below it");
                assert!(
                    edge as f64 <= us as f64 * 1.25 + 1.0,
                    "{us} µs: edge {edge}"
                );
            }
            if i > 0 && us < 1 << 37 {
                assert!(
                    upper_edge(i - 1) < us,
                    "{us} µs belongs above bucket {}",
                    i - 1
                );
            }
        }
    }

    #[test]
    fn percentiles_read_the_difference_between_two_readings() {
        let h = Histogram::new();
        let entry = |us: u64, outcome| Entry {
            t_ns: 0,
            latency_ns: us * 1_000,
            outcome,
            status: 0,
            attempt: 1,
        };
        for _ in 0..90 {
            h.record(&entry(1_000, Recorded::Success));
        }
        let before = h.counts();
        for _ in 0..99 {
            h.record(&entry(10, Recorded::Success));
        }
        h.record(&entry(400_000, Recorded::Timeout));
        // Rejections and cancellations never reached the dependency: not counted.
        h.record(&entry(0, Recorded::Rejected));
        h.record(&entry(0, Recorded::Cancelled));
        let (n, p) = percentiles(&h.counts(), Some(&before), &[0.5, 0.99, 1.0]).unwrap();
        assert_eq!(n, 100);
        assert_eq!(
            p,
            vec![
                upper_edge(bucket(10)),
                upper_edge(bucket(10)),
                upper_edge(bucket(400_000))
            ]
        );
        assert_eq!(upper_edge(bucket(10)), 11);
        assert!(percentiles(&h.counts(), Some(&h.counts()), &[0.5]).is_none());
    }
}
