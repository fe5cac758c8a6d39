//! Sliding windows for the failure-rate and slow-call rules, O(1) per recorded outcome: the
//! totals the rules read, and the sequential windows that the breakers' lock-free ones
//! (`ring.rs`, `striped.rs`) are tested against.
//!
//! Both kinds keep running totals next to the raw data, so evaluating a rule after each outcome
//! (case BR-14) never rescans the window. The count window is a ring of the last `n` outcomes;
//! the time window is a ring of buckets indexed by `now / bucket_length`, where buckets that
//! aged out are cleared on the next access (amortised O(1): each bucket is cleared at most once
//! per lap).

#[cfg(test)]
use super::policy::SlidingWindow;

/// Totals of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Calls recorded in the window (ignored and cancelled calls never are).
    pub calls: u32,
    /// Of those, failures.
    pub failures: u32,
    /// Of those, slow calls (successful or not).
    pub slow: u32,
}

impl WindowCounts {
    #[cfg(test)]
    fn add(&mut self, o: Sample) {
        self.calls += 1;
        self.failures += u32::from(o.failure);
        self.slow += u32::from(o.slow);
    }

    #[cfg(test)]
    fn sub(&mut self, calls: u32, failures: u32, slow: u32) {
        self.calls -= calls;
        self.failures -= failures;
        self.slow -= slow;
    }

    /// Failures as a percentage of calls (0 for an empty window).
    pub fn failure_rate(&self) -> f64 {
        percent(self.failures, self.calls)
    }

    /// Slow calls as a percentage of calls (0 for an empty window).
    pub fn slow_rate(&self) -> f64 {
        percent(self.slow, self.calls)
    }

    /// `self.failure_rate() >= p`, without a division unless the rate is near `p`.
    #[inline(always)]
    pub(crate) fn failure_rate_at_least(&self, p: f64) -> bool {
        percent_at_least(self.failures, self.calls, p)
    }

    /// `self.slow_rate() >= p`, without a division unless the rate is near `p`.
    #[inline(always)]
    pub(crate) fn slow_rate_at_least(&self, p: f64) -> bool {
        percent_at_least(self.slow, self.calls, p)
    }
}

/// `percent(part, whole) >= p`, the same answer bit for bit, for the rules evaluated after every
/// recorded outcome. A floating-point division costs more than the rest of a count window's
/// path, so a multiplication first settles every case clearly below `p`: `fl(100 part / whole)`
/// is at most `(100 part / whole)(1 + u)` and `fl(p whole)` at least `p whole (1 - u)` (`u` =
/// 2^-53), so `100 part < fl(p whole)(1 - 1e-9)` implies `fl(100 part / whole) < p`. Everything
/// else (near `p`, above it, an empty window, a value that is not finite) takes the division.
#[inline(always)]
fn percent_at_least(part: u32, whole: u32, p: f64) -> bool {
    let x = f64::from(part) * 100.0;
    if x < p * f64::from(whole) * (1.0 - 1e-9) {
        return false;
    }
    percent(part, whole) >= p
}

fn percent(part: u32, whole: u32) -> f64 {
    if whole == 0 {
        0.0
    } else {
        f64::from(part) * 100.0 / f64::from(whole)
    }
}

/// One recorded outcome as the window sees it.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub failure: bool,
    pub slow: bool,
}

#[cfg(test)]
const PRESENT: u8 = 1;
#[cfg(test)]
const FAILURE: u8 = 2;
#[cfg(test)]
const SLOW: u8 = 4;

/// A sequential window: the reference that the breakers' lock-free windows are property-tested
/// against (the count window of `ring.rs`, the striped time window of `striped.rs`).
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum Window {
    Count {
        ring: Box<[u8]>,
        next: usize,
        counts: WindowCounts,
    },
    Time {
        bucket_nanos: u64,
        /// Per bucket: (calls, failures, slow).
        buckets: Box<[[u32; 3]]>,
        /// Index (`now / bucket_nanos`) of the newest bucket written or cleared.
        head: u64,
        counts: WindowCounts,
    },
}

#[cfg(test)]
impl Window {
    pub(crate) fn new(shape: SlidingWindow) -> Window {
        match shape {
            SlidingWindow::Count(n) => Window::Count {
                ring: vec![0u8; n as usize].into_boxed_slice(),
                next: 0,
                counts: WindowCounts::default(),
            },
            SlidingWindow::Time { length, buckets } => {
                let buckets = buckets.max(1);
                let bucket_nanos = (length.as_nanos() / u128::from(buckets)).max(1) as u64;
                Window::Time {
                    bucket_nanos,
                    buckets: vec![[0u32; 3]; buckets as usize].into_boxed_slice(),
                    head: 0,
                    counts: WindowCounts::default(),
                }
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Window::Count { ring, next, counts } => {
                ring.fill(0);
                *next = 0;
                *counts = WindowCounts::default();
            }
            Window::Time {
                buckets,
                head,
                counts,
                ..
            } => {
                buckets.fill([0; 3]);
                *head = 0;
                *counts = WindowCounts::default();
            }
        }
    }

    /// Drops buckets that aged out by `now_nanos` (time windows only).
    fn expire(&mut self, now_nanos: u64) {
        if let Window::Time {
            bucket_nanos,
            buckets,
            head,
            counts,
        } = self
        {
            let index = now_nanos / *bucket_nanos;
            if index <= *head {
                return; // same bucket, or a clock reading that went backwards: keep the data
            }
            let n = buckets.len() as u64;
            let steps = (index - *head).min(n);
            for k in 1..=steps {
                let slot = ((*head + k) % n) as usize;
                let [c, f, s] = buckets[slot];
                counts.sub(c, f, s);
                buckets[slot] = [0; 3];
            }
            *head = index;
        }
    }

    /// Records one outcome at `now_nanos` and returns the totals after it.
    pub(crate) fn record(&mut self, sample: Sample, now_nanos: u64) -> WindowCounts {
        self.expire(now_nanos);
        match self {
            Window::Count { ring, next, counts } => {
                let old = ring[*next];
                if old & PRESENT != 0 {
                    counts.sub(1, u32::from(old & FAILURE != 0), u32::from(old & SLOW != 0));
                }
                ring[*next] = PRESENT
                    | if sample.failure { FAILURE } else { 0 }
                    | if sample.slow { SLOW } else { 0 };
                *next = (*next + 1) % ring.len();
                counts.add(sample);
                *counts
            }
            Window::Time {
                buckets,
                head,
                counts,
                ..
            } => {
                let slot = (*head % buckets.len() as u64) as usize;
                let b = &mut buckets[slot];
                b[0] += 1;
                b[1] += u32::from(sample.failure);
                b[2] += u32::from(sample.slow);
                counts.add(sample);
                *counts
            }
        }
    }

    /// The totals as of `now_nanos`.
    pub(crate) fn counts(&mut self, now_nanos: u64) -> WindowCounts {
        self.expire(now_nanos);
        match self {
            Window::Count { counts, .. } | Window::Time { counts, .. } => *counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: Sample = Sample {
        failure: false,
        slow: false,
    };
    const F: Sample = Sample {
        failure: true,
        slow: false,
    };

    #[test]
    fn the_rate_comparison_without_a_division_agrees_with_the_division() {
        let thresholds = [
            0.001,
            1.0,
            10.0,
            100.0 / 3.0,
            33.33,
            49.999_999_999,
            50.0,
            50.000_000_001,
            66.7,
            99.99,
            100.0,
        ];
        for p in thresholds {
            for whole in (0..=300).chain([999_999, 1_000_000]) {
                for part in (0..=whole.min(300)).chain([whole / 2, whole / 3, whole]) {
                    assert_eq!(
                        percent_at_least(part, whole, p),
                        percent(part, whole) >= p,
                        "{part} of {whole} against {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn count_window_evicts_oldest() {
        let mut w = Window::new(SlidingWindow::Count(3));
        w.record(F, 0);
        w.record(F, 0);
        w.record(S, 0);
        let c = w.record(S, 0); // evicts the first F
        assert_eq!(
            c,
            WindowCounts {
                calls: 3,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn time_window_drops_aged_buckets() {
        let mut w = Window::new(SlidingWindow::Time {
            length: Duration::from_secs(10),
            buckets: 10,
        });
        let s = 1_000_000_000;
        w.record(F, 0);
        w.record(F, 5 * s);
        assert_eq!(w.counts(9 * s).failures, 2);
        assert_eq!(
            w.counts(10 * s).failures,
            1,
            "bucket [0s,1s) aged out at 10s"
        );
        assert_eq!(w.counts(15 * s).calls, 0);
        assert_eq!(w.counts(1000 * s).calls, 0);
        // a reading that goes backwards keeps the data and does not panic
        w.record(S, 1000 * s);
        assert_eq!(w.record(S, 3 * s).calls, 2);
    }
}
