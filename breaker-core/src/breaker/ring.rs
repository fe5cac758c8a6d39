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
mod tests;
