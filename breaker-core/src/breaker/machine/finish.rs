//! The ends of calls and probes, trips, and changes forced by hand or by a fleet: each a
//! decision of `rules.rs` applied by the update loop, then [`Inner::entered`] for a
//! transition.

use super::Inner;
use crate::breaker::event::Cause;
use crate::breaker::event::TransitionReason;
use crate::breaker::permit::{Kind, Ticket};
use crate::breaker::policy::NeutralProbe;
use crate::breaker::remote::FleetProbeEnd;
use crate::breaker::rules::{self, Count, Limits, ProbeEnd, Step};
use crate::breaker::state::{State, Word};
use crate::breaker::totals::Counter;
use crate::classify::Outcome;
use crate::sync::Ordering;

impl Inner {
    /// Applies a permit's end: `None` is a cancellation.
    #[inline(always)]
    pub(crate) fn finish(&self, t: Ticket, outcome: Option<Outcome>) {
        if outcome == Some(Outcome::Success) && self.closed_success_in_steady_state(t) {
            return;
        }
        self.finish_any(t, outcome);
    }

    /// Applies a success of ticket `t` and returns `true` if it is a closed call's that
    /// changes no state but its counts: not slow (no slow-call rule, so no start), with no
    /// consecutive failures of its period to reset, and either nothing else kept (no window,
    /// totals or fleet hook) or, of the closed period in force, a window that needs nothing
    /// (no window, a count window full of successes, or a time window in its steady state,
    /// which has then counted it: `WindowSlot::plain_success_is_done`). The steady state of a
    /// healthy breaker, decided with loads (and the totals' add, when they are on); every
    /// other end goes through [`Inner::finish_any`], which would do the same here.
    ///
    /// A breaker that keeps nothing else does not read the word: whether `t`'s period is still
    /// in force changes nothing for a success then (`finish_any` would find it late and count
    /// it in totals it does not keep). The counter is read first, by the consecutive-failure
    /// rule itself ([`rules::count_outcome`]): it is written by the closed path only, so it
    /// holds a count to reset only if a failure of that rule left one.
    #[inline(always)]
    fn closed_success_in_steady_state(&self, t: Ticket) -> bool {
        if t.kind() != Kind::Closed || t.start().is_some() {
            return false;
        }
        // The rule of `bump_consecutive`, which a success changes only to reset a count.
        let c = self.consecutive.load(Ordering::Acquire);
        if rules::count_outcome(c, t.generation(), false) != Count::Keep {
            return false;
        }
        let Some(h) = self.heavy() else {
            return true;
        };
        let raw = self.state.load(Ordering::Acquire);
        if !Word::raw_is_closed(raw) || Word::raw_generation(raw) != t.generation() {
            return false;
        }
        // A `match`, not `Option::map_or`: that one is not always inlined.
        let steady = h.fleet.get().is_none()
            && match &h.window {
                None => true,
                Some(slot) => slot.plain_success_is_done(&self.shared, t.generation()),
            };
        if steady {
            // `Heavy` found again, not `h`: kept across the window's call, it would take a
            // saved register in every caller, whose closed path then pays its push and pop.
            self.count(Counter::Succeeded);
        }
        steady
    }

    /// Applies a permit's end, every case (see [`Inner::finish`]).
    #[inline(never)]
    fn finish_any(&self, t: Ticket, outcome: Option<Outcome>) {
        self.count(match outcome {
            Some(Outcome::Success) => Counter::Succeeded,
            Some(Outcome::Failure) => Counter::Failed,
            Some(Outcome::Ignored) => Counter::Ignored,
            None => Counter::Cancelled,
        });
        match t.kind() {
            Kind::Unrecorded => {}
            Kind::Closed => {
                self.finish_closed(t, outcome);
                if let Some(slot) = self.fleet() {
                    self.fleet_finish(slot, t, outcome);
                }
            }
            Kind::Probe => self.finish_probe(t, outcome),
        }
    }

    fn finish_probe(&self, t: Ticket, outcome: Option<Outcome>) {
        let policy = self.shared.policy.load();
        // Read only when needed: for the slow-call rule (a ticket has a start only under one),
        // and for a transition, after its swap (what it stamps is fenced like every stamp).
        let read = t.start().map(|_| self.shared.clock.now_nanos());
        let outcome = match outcome {
            Some(Outcome::Ignored) if policy.neutral_probe == NeutralProbe::CountAsSuccess => {
                Some(Outcome::Success)
            }
            o => o,
        };
        let end = match outcome {
            Some(Outcome::Failure) => ProbeEnd::Failure,
            // A slow probe counts as a failed probe when a slow-call rule is set.
            Some(Outcome::Success) if read.is_some_and(|now| self.is_slow(&t, now)) => {
                ProbeEnd::Slow
            }
            Some(Outcome::Success) => ProbeEnd::Success,
            _ => ProbeEnd::Neutral,
        };
        if let (Some(token), Some(slot)) = (t.fleet_token(), self.fleet()) {
            let fleet_end = match end {
                ProbeEnd::Success => FleetProbeEnd::Success,
                ProbeEnd::Failure | ProbeEnd::Slow => FleetProbeEnd::Failure,
                ProbeEnd::Neutral => FleetProbeEnd::Neutral,
            };
            slot.hook.end_probe(token, fleet_end);
        }
        let raw = self.state.load(Ordering::Acquire);
        let (from, step) = self.update(raw, |w| {
            Some(rules::end_probe(
                w,
                t.generation(),
                end,
                &Limits::new(&policy, w.streak),
            ))
        });
        match step {
            // Cancellations of stale probes are not "late results".
            Step::Stale if outcome.is_some() => self.count(Counter::Late),
            Step::Enter(next, reason) => {
                let now = read.unwrap_or_else(|| self.shared.clock.now_nanos());
                self.entered(from, next, reason, now, Cause::default());
            }
            Step::Stale | Step::Update(_) => {}
        }
    }

    /// Trips closed word `raw` for `reason`, if it is still in force; `now` is the reading the
    /// outcome was recorded at, if one was taken. Returns whether this thread tripped it.
    #[cold]
    #[inline(never)]
    pub(crate) fn trip(
        &self,
        raw: u64,
        reason: TransitionReason,
        cause: Cause,
        now: Option<u64>,
    ) -> bool {
        let now = now.unwrap_or_else(|| self.shared.clock.now_nanos());
        let generation = Word::raw_generation(raw);
        let (from, step) = self.update(raw, |w| Some(rules::trip(w, generation, reason)));
        match step {
            Step::Enter(next, reason) => {
                self.entered(from, next, reason, now, cause);
                true
            }
            _ => false,
        }
    }

    /// A manual change to `to`, always applied.
    pub(crate) fn manual(&self, to: State) {
        self.force(to, TransitionReason::Manual, None, Cause::default());
    }

    /// Moves to `to` whatever the state (a manual change, or a transition decided elsewhere),
    /// with open streak `streak` (`None`: one more than the current streak when opening, else
    /// 0). Returns the word entered.
    pub(crate) fn force(
        &self,
        to: State,
        reason: TransitionReason,
        streak: Option<u32>,
        cause: Cause,
    ) -> Word {
        let now = self.shared.clock.now_nanos();
        let raw = self.state.load(Ordering::Acquire);
        let (from, forced) = self.update(raw, |w| Some(rules::force(w, to, reason, streak)));
        self.entered(from, forced.next, forced.reason, now, cause);
        forced.next
    }
}
