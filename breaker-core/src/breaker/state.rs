//! The state word and the stamps beside it.
//!
//! # The word
//! The breaker's whole position in its state machine is one `u64` (low to high bits):
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
//! and a permit from an older generation can never touch the counts of the current one.
//!
//! # Stamps
//! Two more values belong to a generation but do not fit in the word: when it was entered, and
//! `at` (open: the deadline; half-open: when the newest probe was admitted). Each is kept as a
//! *stamp*: microseconds in 48 bits tagged with the generation's low 16 bits, so a reader can
//! tell a stamp of the generation in force from one left by an earlier one. Times are compared
//! in serial-number arithmetic on the 48-bit circle ([`span`]): a difference is exact up to
//! 2^47 µs (about 4.46 years) either way, so the absolute clock reading never matters (a
//! custom clock counting from 1970 is fine) and a reading past 2^48 µs never wraps into an
//! early admission. Cooldowns and probe waits are validated to at most
//! [`MAX_COOLDOWN`](super::MAX_COOLDOWN) (365 days), well inside that range.
//!
//!
//! The decisions taken on the word are `rules.rs`.

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

/// The generations' mask: a generation is 24 bits, wrapping (compare with [`newer`]).
pub const GEN_MASK: u32 = (1 << 24) - 1;

/// The most probes in flight a word can count (its 16-bit field).
pub const MAX_IN_FLIGHT: u32 = 0xffff;

/// A decoded state word. Plain data: the same value whether it lives in an atomic of this
/// process or in a shared store. [`encode`](Word::encode) packs it into a `u64`, low to high
/// bits: the state tag (0..3), half-open successes (3..16), half-open probes in flight
/// (16..32), the open streak (32..40), the generation (40..64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// The state.
    pub state: State,
    /// Half-open: successful probes so far in this generation (13 bits).
    pub successes: u32,
    /// Half-open: probes in flight (16 bits, at most [`MAX_IN_FLIGHT`]).
    pub in_flight: u32,
    /// Consecutive openings since the breaker last closed (8 bits, at most 255).
    pub streak: u32,
    /// Bumped by every transition: 24 bits, wrapping ([`GEN_MASK`], [`newer`]).
    pub generation: u32,
}

impl Word {
    pub(crate) const INITIAL: u64 = 0; // closed, generation 0

    /// The word of encoding `w` (any `u64` decodes; a tag above 4 reads as forced closed).
    #[inline]
    pub fn decode(w: u64) -> Word {
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

    /// The `u64` encoding; fields too wide for their bits are capped.
    #[inline]
    pub fn encode(self) -> u64 {
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

    /// Whether a raw word is open, without decoding the rest (the rejection path).
    #[inline]
    pub(crate) fn raw_is_open(w: u64) -> bool {
        w & 0b111 == State::Open.tag()
    }

    #[inline]
    pub(crate) fn raw_generation(w: u64) -> u32 {
        (w >> 40) as u32
    }

    /// The word after a transition to `state`: next generation, probe counts cleared.
    pub fn transition(self, state: State, streak: u32) -> Word {
        Word {
            state,
            successes: 0,
            in_flight: 0,
            streak,
            generation: (self.generation + 1) & GEN_MASK,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Time on the 48-bit circle, and stamps.

const MICROS_MASK: u64 = (1 << 48) - 1;

/// The longest span told apart from a negative one: 2^47 - 1 µs, about 4.46 years.
pub(crate) const MAX_SPAN_MICROS: u64 = (1 << 47) - 1;

/// A clock reading (nanoseconds) as microseconds on the 48-bit circle.
#[inline]
pub(crate) fn micros(nanos: u64) -> u64 {
    (nanos / 1_000) & MICROS_MASK
}

/// `to - from` in microseconds on the 48-bit circle, as a signed span (serial-number
/// arithmetic): negative when `to` is before `from`.
#[inline]
pub(crate) fn span(from: u64, to: u64) -> i64 {
    let d = to.wrapping_sub(from) & MICROS_MASK;
    if d > MAX_SPAN_MICROS {
        d as i64 - (1i64 << 48)
    } else {
        d as i64
    }
}

/// `to - from` in microseconds on the 48-bit circle when `to` is after `from` (the span is
/// positive), else `None`: `span(from, to) > 0` without `span`'s branch, one shift and one
/// signed compare (the open state's rule runs on every rejection).
#[inline(always)]
pub(crate) fn ahead(from: u64, to: u64) -> Option<u64> {
    // The span on the circle in the top 48 bits: positive as a signed number exactly when it
    // is in `1..=MAX_SPAN_MICROS` (`2^47 - 1`).
    let d = (to.wrapping_sub(from) << 16) as i64;
    (d > 0).then_some(d as u64 >> 16)
}

/// `at + by` microseconds on the 48-bit circle (`by` capped at [`MAX_SPAN_MICROS`], so the
/// result is always after `at`).
#[inline]
pub(crate) fn later(at: u64, by: u64) -> u64 {
    at.wrapping_add(by.min(MAX_SPAN_MICROS)) & MICROS_MASK
}

/// A stamp: microseconds on the 48-bit circle, tagged with the low 16 bits of the generation it
/// belongs to.
#[inline]
pub(crate) fn pack_stamp(micros: u64, generation: u32) -> u64 {
    ((micros & MICROS_MASK) << 16) | u64::from(generation & 0xffff)
}

/// The time in `stamp` if it belongs to `generation`.
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

/// The generation and count of a counter word (see [`pack_count`]).
#[inline]
pub(crate) fn unpack_count(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

/// Whether generation `a` is newer than `b`, in 24-bit wrapping arithmetic (serial-number
/// arithmetic: `a` is newer when it is at most 2^23 - 1 transitions ahead of `b`).
#[inline]
pub fn newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & GEN_MASK;
    d != 0 && d < (1 << 23)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `ahead` is `span > 0` on the edges of the circle: equal, one either side, the longest
    /// span each way, and across the wrap.
    #[test]
    fn ahead_is_a_positive_span_at_the_edges() {
        let half = MAX_SPAN_MICROS;
        let cases = [
            (0, 0, None),
            (5, 6, Some(1)),
            (6, 5, None),
            (0, half, Some(half)),
            (0, half + 1, None),
            (half + 1, 0, None),
            (half + 2, 0, Some(half)),
            (MICROS_MASK, 0, Some(1)),
            (0, MICROS_MASK, None),
            (MICROS_MASK - 2, 3, Some(6)),
        ];
        for (from, to, want) in cases {
            assert_eq!(ahead(from, to), want, "ahead({from}, {to})");
            assert_eq!(
                ahead(from, to).is_some(),
                span(from, to) > 0,
                "span({from}, {to})"
            );
        }
    }

    proptest! {
        #[test]
        fn ahead_agrees_with_span(from in 0..=MICROS_MASK, to in 0..=MICROS_MASK) {
            let s = span(from, to);
            prop_assert_eq!(ahead(from, to), (s > 0).then_some(s as u64));
        }
    }
}
