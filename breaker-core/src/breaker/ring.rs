//! A lock-free count window: the last `n` recorded outcomes of a closed period, O(1) per
//! outcome.
//!
//! Why: a count window's calls have one global order, so it cannot be striped per thread like
//! the time window; behind a lock, every outcome paid the lock and two threads fought over it.
//! Here an outcome takes a position with one `fetch_add`, swaps its sample into the ring slot
//! of that position, and applies the difference between the sample it wrote and the one it
//! evicted to running totals kept in one word. A sample evicting one with the same flags writes
//! no total, and leaves the slot alone when it already holds the same sample.
//!
//! - **The steady state is read-only.** A success recorded while the totals say the window is
//!   full of plain successes (`n` calls, no failure, no slow call) changes nothing at all: any
//!   sample it could evict is a plain success, so the window after it is the same multiset,
//!   and the order of identical samples cannot be observed (whichever is evicted first, the
//!   next failure still leaves the window `n` calls later). It takes no position and writes
//!   nothing; two loads decide it, so a healthy dependency's calls scale with threads as they
//!   do under the consecutive rule. Under races it is linearised before the writes of threads
//!   that took a position but had not yet applied their totals.
//!
//! - **Generations.** The window belongs to one closed period. `start` holds that period's
//!   generation, the position where its window began and how many times it moved (4 bits); the
//!   first outcome of a newer period moves it, and the totals word carries the move count, so
//!   the first outcome to update the totals after a move starts from zero (the mover records
//!   right after its move, so the totals never fall 8 moves behind). An evicted sample counts only if it was written
//!   in this period: its slot was written after `start` (the first lap evicts nothing) and its
//!   tag (the generation's low bits, kept in the slot) matches.
//! - **Exact when sequential.** One thread recording, the window is the sequential ring
//!   (`Window::Count`, kept as the reference it is property-tested against).
//! - **Races.** Totals are changed by a compare-and-swap of the whole word, field by field, so
//!   they equal the sum of what every thread added and evicted. A field may dip below zero for
//!   an instant when a thread that evicted a sample applies its change before the thread that
//!   wrote that sample; such a reading is taken as zero. Only when more outcomes than the window
//!   holds are recorded while one thread is between taking its position and swapping its slot
//!   (a window of a handful of calls under many threads) can a sample be evicted before it was
//!   written, which makes the totals approximate, like the time window's shared stripes. The
//!   same holds for one slot when an outcome of the previous closed period (admitted before a
//!   trip, recorded after the next close) races the first outcomes of the new one: it is
//!   counted as late and changes no total, but its slot write may replace one new sample.

use super::state::newer;
use super::window::WindowCounts;
use crate::sync::{AtomicU64, AtomicU8, Ordering};

const PRESENT: u8 = 1;
const FAILURE: u8 = 2;
const SLOW: u8 = 4;
/// The generation's low bits kept in a slot.
const SLOT_TAG_SHIFT: u32 = 3;
const SLOT_TAG_MASK: u8 = 0x1f;

/// The totals word: calls, failures and slow calls in 20 bits each (a window holds at most
/// `MAX_COUNT_WINDOW` = 1,000,000 calls < 2^20), and the start's move count (4 bits) on top.
const FIELD_BITS: u32 = 20;
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;
const TAG_SHIFT: u32 = 60;
/// The three fields of the totals word.
const FIELDS: u64 = (1 << TAG_SHIFT) - 1;
/// A field above this reads as a dip below zero (see the module docs).
const FIELD_NEGATIVE: u64 = 1 << (FIELD_BITS - 1) | 1 << (FIELD_BITS - 2);

/// `start`: the generation (24 bits), the move count (4 bits) and the position (36 bits, a
/// circle) where the generation's window began.
const GEN_SHIFT: u32 = 40;
const MOVES_SHIFT: u32 = 36;
const POS_BITS: u32 = 36;
const POS_MASK: u64 = (1 << POS_BITS) - 1;

/// What recording an outcome found.
pub(crate) enum Recorded {
    /// A newer closed period owns the window: the outcome changed nothing.
    Late,
    /// A success recorded in a window full of plain successes (`n` calls, no failure, no slow
    /// call): nothing changed, and no rule can fire on a window without failures and slow
    /// calls (thresholds are in `(0, 100]`), so there is nothing to evaluate.
    Healthy,
    /// The window's totals after the outcome.
    Counts(WindowCounts),
}

pub(crate) struct CountWindow {
    start: AtomicU64,
    pos: AtomicU64,
    totals: AtomicU64,
    /// A position where a lap of the ring began (a multiple of its length): while a position is
    /// less than one lap past it, its slot is the difference, found without a division. Any
    /// thread's value is a correct entry, so it is written with a plain store, once a lap.
    lap: AtomicU64,
    ring: Box<[AtomicU8]>,
}

fn slot_tag(generation: u32) -> u8 {
    (generation as u8) & SLOT_TAG_MASK
}

fn unpack(word: u64) -> [u64; 3] {
    [
        word & FIELD_MASK,
        (word >> FIELD_BITS) & FIELD_MASK,
        (word >> (2 * FIELD_BITS)) & FIELD_MASK,
    ]
}

fn decode(word: u64) -> WindowCounts {
    let [calls, failures, slow] =
        unpack(word).map(|f| if f >= FIELD_NEGATIVE { 0 } else { f as u32 });
    WindowCounts {
        calls,
        failures,
        slow,
    }
}

/// The flag bits of a slot's sample (its tag aside).
const SAMPLE_FLAGS: u8 = PRESENT | FAILURE | SLOW;

/// The fields of totals word `word` (without its move count) after adding
/// `sample` and subtracting `evicted`, each field wrapping in its 20 bits (a dip below zero
/// reads as zero, see the module docs).
#[inline(always)]
fn apply(word: u64, sample: u8, evicted: Option<u8>) -> u64 {
    let old = evicted.unwrap_or(0);
    let mut next = 0;
    for (i, bit) in [PRESENT, FAILURE, SLOW].into_iter().enumerate() {
        let shift = i as u32 * FIELD_BITS;
        let field = (word >> shift) & FIELD_MASK;
        let field = field
            .wrapping_add(u64::from(sample & bit != 0))
            .wrapping_sub(u64::from(old & bit != 0));
        next |= (field & FIELD_MASK) << shift;
    }
    next
}

impl CountWindow {
    /// An empty window of `n` calls for closed `generation` onwards.
    pub(crate) fn new(n: u32, generation: u32) -> CountWindow {
        CountWindow {
            start: AtomicU64::new(u64::from(generation) << GEN_SHIFT),
            pos: AtomicU64::new(0),
            totals: AtomicU64::new(0),
            lap: AtomicU64::new(0),
            ring: (0..n.max(1)).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.ring.len()
    }

    /// The ring slot of position `p`: `p % n`, with a division only once a lap.
    #[inline(always)]
    fn slot_of(&self, p: u64, n: u64) -> usize {
        let d = p.wrapping_sub(self.lap.load(Ordering::Relaxed));
        if d < n {
            return d as usize;
        }
        self.slot_of_new_lap(p, n)
    }

    #[cold]
    #[inline(never)]
    fn slot_of_new_lap(&self, p: u64, n: u64) -> usize {
        let slot = p % n;
        self.lap.store(p - slot, Ordering::Relaxed);
        slot as usize
    }

    /// Whether the totals, of the closed period whose start moved `moves` times, say the
    /// window is full of plain successes.
    #[inline(always)]
    fn full_of_successes(&self, moves: u64) -> bool {
        let cur = self.totals.load(Ordering::Acquire);
        cur >> TAG_SHIFT == moves && cur & FIELDS == self.ring.len() as u64
    }

    /// Whether a plain success of closed `generation` would be [`Recorded::Healthy`]: the
    /// window belongs to `generation` and is full of plain successes. The same two loads as
    /// that path of [`record_outcome`](Self::record_outcome), for a caller that decides
    /// before calling it (the breaker, inline on its closed path).
    #[inline(always)]
    pub(crate) fn is_healthy(&self, generation: u32) -> bool {
        let cur = self.start.load(Ordering::Acquire);
        (cur >> GEN_SHIFT) as u32 == generation
            && self.full_of_successes((cur >> MOVES_SHIFT) & 0xf)
    }

    /// The position where `generation`'s window began and the start's move count, moving
    /// `start` there if `generation` is newer; `None` if a newer period owns the window (a late
    /// outcome).
    #[inline(always)]
    fn start_of(&self, generation: u32) -> Option<(u64, u64)> {
        let mut cur = self.start.load(Ordering::Acquire);
        loop {
            let have = (cur >> GEN_SHIFT) as u32;
            let moves = (cur >> MOVES_SHIFT) & 0xf;
            if have == generation {
                return Some((cur & POS_MASK, moves));
            }
            if !newer(generation, have) {
                return None;
            }
            let at = self.pos.load(Ordering::Acquire) & POS_MASK;
            let moves = (moves + 1) & 0xf;
            match self.start.compare_exchange(
                cur,
                (u64::from(generation) << GEN_SHIFT) | (moves << MOVES_SHIFT) | at,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((at, moves)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Records one outcome of closed `generation`. Returns the window's totals after it, or
    /// `None` for a late outcome (a newer closed period owns the window).
    #[cfg(test)]
    pub(crate) fn record(
        &self,
        generation: u32,
        failure: bool,
        slow: bool,
    ) -> Option<WindowCounts> {
        match self.record_outcome(generation, failure, slow) {
            Recorded::Late => None,
            Recorded::Healthy => Some(WindowCounts {
                calls: self.ring.len() as u32,
                failures: 0,
                slow: 0,
            }),
            Recorded::Counts(c) => Some(c),
        }
    }

    /// Records one outcome of closed `generation` (see [`Recorded`]).
    #[inline(always)]
    pub(crate) fn record_outcome(&self, generation: u32, failure: bool, slow: bool) -> Recorded {
        let Some((start, want)) = self.start_of(generation) else {
            return Recorded::Late;
        };
        let n = self.ring.len() as u64;
        if !failure && !slow && self.full_of_successes(want) {
            // A full window of successes stays one whatever success it evicts: nothing to
            // write, not even a position (see the module docs).
            return Recorded::Healthy;
        }
        let tag = slot_tag(generation);
        let sample = PRESENT
            | (u8::from(failure) * FAILURE)
            | (u8::from(slow) * SLOW)
            | (tag << SLOT_TAG_SHIFT);
        let p = self.pos.fetch_add(1, Ordering::AcqRel);
        let slot = &self.ring[self.slot_of(p, n)];
        // Distance from the window's start, on the 36-bit circle; a position taken before the
        // start moved (a straggler) reads as far ahead, and is treated as a first lap.
        let lap = p.wrapping_sub(start) & POS_MASK;
        let first_lap = lap < n || lap >= 1 << (POS_BITS - 1);
        let old = if slot.load(Ordering::Relaxed) == sample && !first_lap {
            sample
        } else {
            slot.swap(sample, Ordering::AcqRel)
        };
        let evicted = !first_lap && old & PRESENT != 0 && old >> SLOT_TAG_SHIFT == tag;
        // A sample evicting one with the same flags changes no total: the steady state of a
        // healthy dependency. Decided on the flag bits, with nothing built in memory (values
        // written field by field and read back whole stall the CPU's store forwarding).
        let unchanged = evicted && (old ^ sample) & SAMPLE_FLAGS == 0;
        let mut cur = self.totals.load(Ordering::Acquire);
        loop {
            let have = cur >> TAG_SHIFT;
            if have == want && unchanged {
                return Recorded::Counts(decode(cur)); // nothing changes: no write
            }
            let next = if have == want {
                apply(cur, sample, evicted.then_some(old))
            } else if newer4(want, have) {
                // The first update of this period starts from zero.
                apply(0, sample, evicted.then_some(old))
            } else {
                return Recorded::Late;
            };
            let next = (want << TAG_SHIFT) | next;
            match self
                .totals
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Recorded::Counts(decode(next)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// The totals of closed `generation` (zero if no outcome of it was recorded).
    pub(crate) fn counts(&self, generation: u32) -> WindowCounts {
        let word = self.totals.load(Ordering::Acquire);
        let start = self.start.load(Ordering::Acquire);
        let started = (start >> GEN_SHIFT) as u32 == generation;
        if started && word >> TAG_SHIFT == (start >> MOVES_SHIFT) & 0xf {
            decode(word)
        } else {
            WindowCounts::default()
        }
    }
}

/// Whether 4-bit move count `a` is newer than `b` (serial arithmetic: up to 7 moves ahead).
fn newer4(a: u64, b: u64) -> bool {
    let d = a.wrapping_sub(b) & 0xf;
    d != 0 && d < 8
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::breaker::policy::SlidingWindow;
    use crate::breaker::window::{Sample, Window};
    use proptest::prelude::*;

    proptest! {
        /// The lock-free count window agrees with the sequential one (`Window::Count`, kept as
        /// the reference) on every total after every outcome, across closed periods: a new
        /// generation starts an empty window, as the breaker's lock-guarded window cleared it.
        #[test]
        fn agrees_with_the_sequential_count_window(
            n in 1u32..40,
            steps in prop::collection::vec((any::<bool>(), any::<bool>(), 0u8..20), 1..300),
        ) {
            let ring = CountWindow::new(n, 0);
            let mut reference = Window::new(SlidingWindow::Count(n));
            let mut generation = 0u32;
            for (failure, slow, roll) in steps {
                if roll == 0 {
                    generation += 3; // a trip, a probe, a close
                    reference.clear();
                    prop_assert_eq!(ring.counts(generation), WindowCounts::default());
                }
                let want = reference.record(Sample { failure, slow }, 0);
                prop_assert_eq!(ring.record(generation, failure, slow), Some(want));
                prop_assert_eq!(ring.counts(generation), want);
            }
        }
    }

    #[test]
    fn late_outcomes_change_nothing() {
        let w = CountWindow::new(3, 5);
        w.record(5, true, false);
        w.record(6, false, false); // a newer period takes over
        assert_eq!(w.record(5, true, false), None, "older generation: late");
        assert_eq!(
            w.counts(6),
            WindowCounts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        assert_eq!(w.counts(5), WindowCounts::default());
    }

    #[test]
    fn a_slot_left_from_32_generations_ago_is_not_evicted() {
        // The slot tag is the generation's low 5 bits; the first lap never evicts, so a slot
        // last written 32 generations ago (same tag) is not subtracted.
        let w = CountWindow::new(2, 0);
        w.record(0, true, false);
        w.record(0, true, false);
        let c = w.record(32, false, false).unwrap();
        assert_eq!((c.calls, c.failures), (1, 0));
        let c = w.record(32, false, false).unwrap();
        assert_eq!((c.calls, c.failures), (2, 0));
        let c = w.record(32, true, false).unwrap(); // evicts this period's first success
        assert_eq!((c.calls, c.failures), (2, 1));
    }

    #[test]
    fn a_success_in_a_window_full_of_successes_takes_no_position() {
        let n = 5;
        let w = CountWindow::new(n, 1);
        let mut reference = Window::new(SlidingWindow::Count(n));
        let ok = Sample {
            failure: false,
            slow: false,
        };
        for _ in 0..n {
            assert!(matches!(
                w.record_outcome(1, false, false),
                Recorded::Counts(_)
            ));
            reference.record(ok, 0);
        }
        let pos = w.pos.load(Ordering::Relaxed);
        for _ in 0..1000 {
            assert!(matches!(
                w.record_outcome(1, false, false),
                Recorded::Healthy
            ));
            reference.record(ok, 0);
        }
        assert_eq!(w.pos.load(Ordering::Relaxed), pos, "no position taken");
        assert!(w.is_healthy(1));
        assert!(!w.is_healthy(2), "another closed period's window");
        // A failure still leaves the window `n` outcomes later, as in the sequential ring.
        let failure = Sample {
            failure: true,
            slow: false,
        };
        assert_eq!(w.record(1, true, false), Some(reference.record(failure, 0)));
        for i in 0..n {
            let c = w.record(1, false, false).unwrap();
            assert_eq!(c, reference.record(ok, 0));
            assert_eq!(
                c.failures,
                u32::from(i + 1 < n),
                "after {} successes",
                i + 1
            );
        }
        assert!(w.is_healthy(1), "the failure left the window");
        assert!(matches!(
            w.record_outcome(1, true, false),
            Recorded::Counts(_)
        ));
        assert!(!w.is_healthy(1), "a failure in the window");
        // A slow success is recorded, not skipped.
        assert!(matches!(w.record_outcome(1, false, true), Recorded::Counts(c) if c.slow == 1));
    }

    #[test]
    fn threads_keep_the_totals_consistent() {
        let w = CountWindow::new(64, 1);
        // Past the first lap, the totals follow what each thread evicts and writes, whatever
        // the interleaving (a thread preempted mid-record included).
        for _ in 0..64 {
            w.record(1, false, false);
        }
        std::thread::scope(|s| {
            for t in 0..4 {
                let w = &w;
                s.spawn(move || {
                    for i in 0..20_000u32 {
                        w.record(1, (i + t) % 3 == 0, i % 5 == 0);
                    }
                });
            }
        });
        // The totals equal what the ring holds.
        let mut want = WindowCounts::default();
        for s in w.ring.iter() {
            let s = s.load(Ordering::Relaxed);
            want.calls += u32::from(s & PRESENT != 0);
            want.failures += u32::from(s & FAILURE != 0);
            want.slow += u32::from(s & SLOW != 0);
        }
        assert_eq!(w.counts(1), want);
        assert_eq!(want.calls, 64);
    }
}
