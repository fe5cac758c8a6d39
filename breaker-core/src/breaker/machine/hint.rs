//! The open state's hint: how an open breaker rejects with one read of the coarse clock.
//!
//! Reading the precise clock costs more than the rest of a rejection, and an open breaker
//! rejects every call for its whole cooldown. So the transition into open ([`Inner::entered`])
//! leaves a *hint* in its own field ([`Inner::hint`]): a reading of the coarse clock
//! (`CLOCK_MONOTONIC_COARSE` on Linux: a memory read through the vDSO) before which the
//! cooldown surely has time left, as a stamp of the open generation (`state::pack_stamp`: 48
//! bits of time, the generation's low 16 bits), in units of `2^10` ns so that a reading
//! converts with a shift. A rejection then applies the one rule of an open breaker,
//! `rules::admit_open`, to the hint and the coarse reading, exactly as the precise path applies
//! it to the stamped deadline and the precise reading: while it rejects, that is the answer;
//! once the hint has passed, the precise path decides (so recovery is never later than by the
//! precise clock alone).
//!
//! The hint is `coarse + left - margin`, where `left` is the cooldown's rest by the precise
//! clock read *after* the coarse one (so a pause between the two reads makes the hint earlier,
//! never later) and the margin is the coarse clock's resolution plus 0.1 % of `left` (for rate
//! differences between the two clocks): a coarse reading before the hint is before the precise
//! deadline. Without a coarse clock, or with less than the margin to go, no hint is left and
//! the precise path decides every rejection. A hint is read only with the generation of the
//! word in force (the stamp's tag), so one left by an earlier open period is never used; the
//! tag is the generation's low 16 bits, and a hint 65,536 transitions old would also have to
//! be years old to read as in the future (the 48-bit circle spans 4.5 years of units).

use super::{Inner, Write};
use crate::breaker::rejected::RejectReason;
use crate::breaker::rules;
use crate::breaker::state::{micros, span, unpack_stamp, Word};
use crate::sync::Ordering;

/// The hint's unit: `2^10` ns (1.024 µs), so a coarse reading converts with a shift.
const HINT_SHIFT: u32 = 10;

/// A coarse reading (nanoseconds) in hint units.
#[inline(always)]
fn hint_units(coarse_nanos: u64) -> u64 {
    coarse_nanos >> HINT_SHIFT
}

impl Inner {
    /// The rejection of raw word `raw` by its hint: `Some(nanoseconds left)` when `raw` is open
    /// and the open state's rule (`rules::open_left`, the rule of `rules::admit_open`) rejects
    /// at the coarse clock's reading against the hint; `None` (decide the precise way)
    /// otherwise: not open, no coarse clock, no hint of this generation, or the hint passed.
    #[inline(always)]
    pub(crate) fn open_by_hint(&self, raw: u64) -> Option<u64> {
        if !Word::raw_is_open(raw) {
            return None;
        }
        let until = unpack_stamp(self.hint.load(Ordering::Acquire), Word::raw_generation(raw))?;
        // A hint of this generation was left, so this clock has a coarse source
        // (`leave_hint`): read it without asking again.
        let coarse = self.shared.clock.coarse_now()?;
        rules::open_left(until, hint_units(coarse)).map(|left| left << HINT_SHIFT)
    }

    /// [`Inner::open_by_hint`] and what a rejection does besides its value (its `tracing`
    /// event, its count in the totals: [`Inner::rejected`]), out of line, for
    /// [`CircuitBreaker::try_acquire`](crate::breaker::CircuitBreaker::try_acquire): the answer
    /// comes back in registers, and the caller writes the [`Rejected`](crate::breaker::Rejected)
    /// itself, so a caller that drops it unread writes nothing and keeps no register for it.
    #[inline(never)]
    pub(crate) fn reject_by_hint(&self, raw: u64) -> Option<u64> {
        let left = self.open_by_hint(raw)?;
        if self.rejection_has_work() {
            // A tail call: nothing of this frame is kept across it.
            return self.rejected_by_hint(left);
        }
        Some(left)
    }

    /// [`Inner::reject_by_hint`]'s rejection when it has work besides its value.
    #[cold]
    #[inline(never)]
    fn rejected_by_hint(&self, left: u64) -> Option<u64> {
        self.rejected(RejectReason::Open, left);
        Some(left)
    }

    /// Leaves the hint of open generation `g`, whose deadline stamp in force is `until`
    /// (microseconds on the precise clock); see the module docs for the margin. Written like
    /// every stamp, fenced by the generation ([`Inner::stamp`]): not once the word has moved
    /// past `g`.
    pub(super) fn leave_hint(&self, g: u32, until: u64) {
        let Some(c) = self.shared.clock.coarse() else {
            return;
        };
        let left_us = span(micros(self.shared.clock.now_nanos()), until);
        let Ok(left) = u64::try_from(left_us) else {
            return;
        };
        let left = left.saturating_mul(1_000);
        let margin = c.resolution.saturating_add(left / 1_024);
        let Some(ahead) = left.checked_sub(margin) else {
            return;
        };
        let hint = hint_units(c.now.wrapping_add(ahead));
        self.stamp(&self.hint, g, hint, Write::Latest);
    }
}
