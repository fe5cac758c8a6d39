//! The state word: the breaker's whole state machine position in one `u64`, and the pure
//! decisions taken on it.
//!
//! Layout (low to high bits):
//!
//! | bits   | field                                                   |
//! |--------|---------------------------------------------------------|
//! | 0..3   | state tag ([`State`])                                   |
//! | 3..16  | half-open: successful probes so far in this generation  |
//! | 16..32 | half-open: probes in flight                             |
//! | 32..40 | open streak: consecutive openings since last closed     |
//! | 40..64 | generation (24 bits, wrapping), bumped on every transition |
//!
//! Because the tag, the generation and the probe counts share one word, admitting a probe is a
//! single compare-and-swap that both checks and reserves a slot (no check-then-increment race),
//! and a permit from an older generation can never touch the counts of the current one. The
//! functions here are pure: they compute the next word from the current one. Where the word
//! lives (an `AtomicU64` in this process today, a shared store later) is the caller's business.

use std::fmt;

/// The position of a circuit breaker in its state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls flow; outcomes are recorded and may trip the breaker.
    Closed,
    /// Calls are rejected until the cooldown ends.
    Open,
    /// A limited number of probe calls test the dependency.
    HalfOpen,
    /// Manually isolated: every call is rejected until [`reset`](super::CircuitBreaker::reset).
    ForcedOpen,
    /// Manually disabled: every call is admitted and nothing is recorded.
    ForcedClosed,
}

impl State {
    /// Every state, in declaration order (for example to read a state back from its
    /// [`as_str`](Self::as_str) name).
    pub const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::ForcedClosed,
    ];

    pub(crate) const fn tag(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::ForcedClosed => 4,
        }
    }

    /// The lowercase name: `closed`, `open`, `half-open`, `forced-open`, `forced-closed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced-open",
            State::ForcedClosed => "forced-closed",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) const GEN_MASK: u32 = (1 << 24) - 1;

/// A decoded state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub state: State,
    pub successes: u32,
    pub in_flight: u32,
    pub streak: u32,
    pub generation: u32,
}

impl Word {
    pub(crate) const INITIAL: u64 = 0; // closed, generation 0

    #[inline]
    pub(crate) fn decode(w: u64) -> Word {
        let state = match w & 0b111 {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::ForcedClosed,
        };
        Word {
            state,
            successes: ((w >> 3) & 0x1fff) as u32,
            in_flight: ((w >> 16) & 0xffff) as u32,
            streak: ((w >> 32) & 0xff) as u32,
            generation: (w >> 40) as u32,
        }
    }

    #[inline]
    pub(crate) fn encode(self) -> u64 {
        debug_assert!(self.successes <= 0x1fff && self.in_flight <= 0xffff);
        self.state.tag()
            | (u64::from(self.successes.min(0x1fff)) << 3)
            | (u64::from(self.in_flight.min(0xffff)) << 16)
            | (u64::from(self.streak.min(0xff)) << 32)
            | (u64::from(self.generation & GEN_MASK) << 40)
    }

    /// Tag of a raw word, without decoding the rest (the hot path).
    #[inline]
    pub(crate) fn raw_is_closed(w: u64) -> bool {
        w & 0b111 == 0
    }

    #[inline]
    pub(crate) fn raw_generation(w: u64) -> u32 {
        (w >> 40) as u32
    }

    /// The word after a transition to `state`: next generation, probe counts cleared.
    pub(crate) fn transition(self, state: State, streak: u32) -> Word {
        Word {
            state,
            successes: 0,
            in_flight: 0,
            streak,
            generation: (self.generation + 1) & GEN_MASK,
        }
    }
}

/// A timestamp tagged with the low 16 bits of the generation it belongs to: microseconds since
/// the clock's origin in the high 48 bits (about 8.9 years). The tag lets a reader notice that
/// the transition which will write the timestamp has not written it yet.
#[inline]
pub(crate) fn pack_stamp(micros: u64, generation: u32) -> u64 {
    (micros << 16) | u64::from(generation & 0xffff)
}

#[inline]
pub(crate) fn unpack_stamp(stamp: u64, generation: u32) -> Option<u64> {
    if stamp & 0xffff == u64::from(generation & 0xffff) {
        Some(stamp >> 16)
    } else {
        None
    }
}

/// Counter word of the consecutive-failure rule: `(generation << 32) | count`. The generation
/// tag resets the count lazily on entry into a new closed period and keeps late results of an
/// earlier generation out.
#[inline]
pub(crate) fn pack_count(generation: u32, count: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(count)
}

#[inline]
pub(crate) fn unpack_count(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

/// Whether generation `a` is newer than `b`, in 24-bit wrapping arithmetic.
#[inline]
pub(crate) fn newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & GEN_MASK;
    d != 0 && d < (1 << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips() {
        let w = Word {
            state: State::HalfOpen,
            successes: 8191,
            in_flight: 65535,
            streak: 255,
            generation: GEN_MASK,
        };
        assert_eq!(Word::decode(w.encode()), w);
        let next = w.transition(State::Closed, 0);
        assert_eq!(next.generation, 0, "generation wraps at 24 bits");
        assert!(newer(0, GEN_MASK));
        assert!(!newer(GEN_MASK, 0));
    }

    #[test]
    fn stamp_tag_detects_generation() {
        let s = pack_stamp(123_456, 7);
        assert_eq!(unpack_stamp(s, 7), Some(123_456));
        assert_eq!(unpack_stamp(s, 8), None);
    }
}
