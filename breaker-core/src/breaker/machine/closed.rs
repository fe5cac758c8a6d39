//! The closed state's rules: the consecutive-failure count and the sliding window's rate
//! rules, and the trips they decide. The window's stores are `store.rs`.

use super::Inner;
use crate::breaker::event::Cause;
use crate::breaker::event::TransitionReason;
use crate::breaker::permit::Ticket;
use crate::breaker::rules::{self, Count};
use crate::breaker::state::{unpack_count, Word};
use crate::breaker::store::Record;
use crate::breaker::totals::Counter;
use crate::breaker::window::WindowCounts;
use crate::classify::Outcome;
use crate::sync::Ordering;

impl Inner {
    /// Applies a closed call's end: updates the counts and trips if a rule fires.
    #[inline(always)]
    pub(super) fn finish_closed(&self, t: Ticket, outcome: Option<Outcome>) {
        let failure = match outcome {
            Some(Outcome::Success) => false,
            Some(Outcome::Failure) => true,
            // Ignored and cancelled calls are neutral in closed state.
            _ => return,
        };
        let raw = self.state.load(Ordering::Acquire);
        if !Word::raw_is_closed(raw) || Word::raw_generation(raw) != t.generation() {
            self.count(Counter::Late);
            return;
        }
        let threshold = self.shared.hot.consecutive();
        if threshold != 0 {
            if let Some(count) = self.bump_consecutive(t.generation(), failure) {
                if count >= threshold
                    && self.trip(
                        raw,
                        TransitionReason::ConsecutiveFailures,
                        Cause {
                            consecutive_failures: count,
                            ..Cause::default()
                        },
                        None,
                    )
                {
                    return;
                }
            }
        }
        if let Some(slot) = self.heavy().and_then(|h| h.window.as_ref()) {
            // The healthy steady state, decided inline: a success (not slow: a ticket has a
            // start only under a slow-call rule) in a count window full of successes changes
            // nothing and cannot trip (`ring.rs`); one in a time window's current bucket after
            // an evaluation there found enough calls is one increment (`striped.rs`).
            if !failure
                && t.start().is_none()
                && slot.plain_success_is_done(&self.shared, t.generation())
            {
                return;
            }
            match slot.record(&self.shared, t.generation(), t.start(), failure) {
                Record::Evaluate(counts, now) => self.evaluate(counts, raw, now),
                Record::Skip => {}
                Record::Late => self.count(Counter::Late),
            }
        }
    }

    /// Applies the consecutive-failure rule ([`rules::count_outcome`]) to an outcome of
    /// closed `generation` with a compare-and-swap loop; returns the count after a failure,
    /// `None` after a success or if the count belongs to a newer generation.
    #[inline]
    fn bump_consecutive(&self, generation: u32, failure: bool) -> Option<u32> {
        let mut cur = self.consecutive.load(Ordering::Acquire);
        loop {
            let Count::Write { next, failures } = rules::count_outcome(cur, generation, failure)
            else {
                return None;
            };
            match self.consecutive.compare_exchange_weak(
                cur,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return failures,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The consecutive failures of closed `generation`.
    pub(super) fn consecutive_failures(&self, generation: u32) -> u32 {
        let (g, n) = unpack_count(self.consecutive.load(Ordering::Acquire));
        if g == generation {
            n
        } else {
            0
        }
    }

    /// Whether the call of `t`, ending at `now`, was slow under the slow-call rule in force.
    pub(super) fn is_slow(&self, t: &Ticket, now: u64) -> bool {
        self.shared.is_slow(t.start(), now)
    }

    /// Checks the rate rules against `counts`, after an outcome recorded in the closed state
    /// `raw` (at `now`, if the clock was read), and trips if one fires. The thresholds come
    /// from the policy's mirror (`Hot`), so this loads no `ArcSwap`.
    #[inline]
    fn evaluate(&self, counts: WindowCounts, raw: u64, now: Option<u64>) {
        // One fixed comparison, `>=`, after every recorded outcome (BR-14, BR-17).
        let Some(reason) = rules::rate_trip(&self.shared.hot, counts) else {
            return;
        };
        let cause = Cause {
            window: counts,
            ..Cause::default()
        };
        self.trip(raw, reason, cause, now);
    }
}
