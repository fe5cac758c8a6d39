//! The pure decisions taken on the state word (`state.rs`) and its stamps.
//!
//! The functions below are pure: they take a word, the stamp they need, `now` and the limits
//! of the policy in force, and return what to do — the next word and what happened — without
//! touching an atomic, a clock or a policy. The machine (`machine/`) applies them with one
//! compare-and-swap loop. Nothing here knows where the word lives: an `AtomicU64` in this
//! process, or a key in a shared store (Redis) for a fleet-wide breaker, where the same
//! functions decide over the word read from the store and the caller applies the result with
//! the store's own compare-and-set (`breaker-redis`, through the hidden [`decide`](super::decide)
//! module). Times are readings of one clock in one unit on the 48-bit circle: microseconds in
//! this process, the store's milliseconds in the fleet.
//!
//! - [`admit`]: may a call go ahead now (closed, a probe, a rejection)?
//! - [`end_probe`]: a half-open probe ended; re-open, close, or release its slot?
//! - [`trip`]: a closed-state rule fired; open, unless the closed period has already ended?
//! - [`rate_trip`]: which rate rule, if any, the window's totals fire.
//! - [`force`]: `force_open`, `force_closed`, `reset`, and transitions decided elsewhere.
//! - [`cooldown`]: how long an opening lasts (growth with the open streak, then jitter).
//!
//! # Slow probes count
//! A half-open period keeps its generation until a probe's verdict ends it. When every probe
//! slot is taken and the newest probe has been outstanding for the probe wait, one more probe
//! is admitted *in the same period* ([`admit_half_open`]): the hung probes keep their slots, so
//! a late success still counts towards closing and a late failure still re-opens. The bound on
//! probes is then: at most `half_open_probes` probes admitted within the last probe wait (the
//! wait measured with the admitting calls' clock readings), and at most [`MAX_IN_FLIGHT`] in
//! all. (Until this rule, a takeover started a new period and ignored the hung probes' results,
//! so while every call took longer than the wait no probe ever counted and the breaker never
//! closed.)

use super::event::TransitionReason;
use super::policy::BreakerPolicy;
use super::rejected::RejectReason;
use super::state::{ahead, newer, pack_count, span, unpack_count, State, Word, MAX_IN_FLIGHT};
use super::window::WindowCounts;
use std::time::Duration;

/// The limits of the policy in force that the half-open decisions read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// At most this many probes in flight.
    pub half_open_probes: u32,
    /// Close after this many successful probes.
    pub successes_to_close: u32,
    /// How long the newest probe may be outstanding, with every slot taken, before one more
    /// probe is admitted in the same period: in the unit of the times given to
    /// [`admit_half_open`] ([`Limits::new`] gives microseconds).
    pub probe_wait: u64,
}

impl Limits {
    /// The limits of `policy` for a half-open period of open streak `streak`, the probe wait
    /// in microseconds (it defaults to that streak's cooldown).
    pub fn new(policy: &BreakerPolicy, streak: u32) -> Limits {
        let wait = policy
            .max_probe_wait
            .unwrap_or_else(|| policy.cooldown_for(streak));
        Limits {
            half_open_probes: policy.half_open_probes,
            successes_to_close: policy.successes_to_close,
            probe_wait: u64::try_from(wait.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

/// A decision's effect on the word: the word to swap in, if any.
pub(crate) trait Decision {
    /// The next word, or `None` if the decision writes nothing.
    fn next(&self) -> Option<Word>;
}

/// What [`admit`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Closed: admitted, nothing to write.
    Closed,
    /// Forced closed: admitted, nothing recorded.
    Unrecorded,
    /// Rejected.
    Reject {
        /// Why.
        reason: RejectReason,
        /// Open: the rest of the cooldown, in the unit of the times given.
        retry_after: Option<u64>,
    },
    /// Admitted as a probe of `next`'s generation once `next` is swapped in.
    Probe {
        /// The word to swap in.
        next: Word,
        /// Set when that swap is a transition (a new half-open period).
        entered: Option<TransitionReason>,
    },
}

impl Decision for Admit {
    fn next(&self) -> Option<Word> {
        match self {
            Admit::Probe { next, .. } => Some(*next),
            _ => None,
        }
    }
}

/// What [`end_probe`], [`trip`] and [`force`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The word has moved past the generation the outcome belongs to: nothing to do (a late
    /// result).
    Stale,
    /// Swap in this word; no transition (a probe slot released, a success counted).
    Update(Word),
    /// Swap in this word: a transition, for this reason.
    Enter(Word, TransitionReason),
}

impl Decision for Step {
    fn next(&self) -> Option<Word> {
        match self {
            Step::Stale => None,
            Step::Update(w) | Step::Enter(w, _) => Some(*w),
        }
    }
}

/// May a call go ahead at `now`? `at` is the stamp of `w`'s generation: the deadline when
/// open, the newest probe's admission when half-open (unused otherwise). All times are in one
/// unit on the 48-bit circle (microseconds in this process).
pub fn admit(w: Word, at: u64, now: u64, limits: &Limits) -> Admit {
    match w.state {
        State::Closed => Admit::Closed,
        State::ForcedClosed => Admit::Unrecorded,
        State::ForcedOpen => Admit::Reject {
            reason: RejectReason::ForcedOpen,
            retry_after: None,
        },
        State::Open => admit_open(w, at, now),
        State::HalfOpen => admit_half_open(w, at, now, limits),
    }
}

/// [`admit`] for an open word whose deadline is `until`: rejected with the rest of the
/// cooldown, or, once it has passed, promoted to half-open with this call as the first probe
/// (the lazy promotion: no timer).
#[inline]
pub fn admit_open(w: Word, until: u64, now: u64) -> Admit {
    debug_assert_eq!(w.state, State::Open);
    if let Some(left) = open_left(until, now) {
        return Admit::Reject {
            reason: RejectReason::Open,
            retry_after: Some(left),
        };
    }
    let mut next = w.transition(State::HalfOpen, w.streak);
    next.in_flight = 1;
    Admit::Probe {
        next,
        entered: Some(TransitionReason::CooldownElapsed),
    }
}

/// The rule of [`admit_open`] alone: the microseconds left until deadline `until` at `now`,
/// or `None` once it has passed. (The open-state rejection path applies it to the raw word
/// without decoding it.)
#[inline(always)]
pub fn open_left(until: u64, now: u64) -> Option<u64> {
    ahead(now, until)
}

/// [`admit`] for a half-open word whose newest probe was admitted at `newest`: a free slot is
/// reserved; with every slot taken, once the newest probe has been outstanding for
/// `probe_wait`, one more probe is admitted in the same half-open period (a hung probe must
/// not wedge the breaker, case BR-04; the hung probes keep their slots and their results still
/// count: see "Slow probes count" in `rules.rs`). Rejected at [`MAX_IN_FLIGHT`].
pub fn admit_half_open(w: Word, newest: u64, now: u64, limits: &Limits) -> Admit {
    debug_assert_eq!(w.state, State::HalfOpen);
    if let Some(reserved) = free_slot(w, limits) {
        return reserved;
    }
    let waited = span(newest, now).max(0) as u64;
    if waited < limits.probe_wait || w.in_flight >= MAX_IN_FLIGHT {
        return Admit::Reject {
            reason: RejectReason::HalfOpenFull,
            retry_after: None,
        };
    }
    Admit::Probe {
        next: Word {
            in_flight: w.in_flight + 1,
            ..w
        },
        entered: None,
    }
}

/// The first rule of [`admit_half_open`], which needs no stamp: a free slot is reserved.
/// `None` when every slot is taken.
#[inline]
pub fn free_slot(w: Word, limits: &Limits) -> Option<Admit> {
    (w.in_flight < limits.half_open_probes).then_some(Admit::Probe {
        next: Word {
            in_flight: w.in_flight + 1,
            ..w
        },
        entered: None,
    })
}

/// How a half-open probe ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeEnd {
    /// Succeeded: counts towards closing.
    Success,
    /// Failed: re-opens.
    Failure,
    /// A success that took at least the slow-call duration: a failed probe.
    Slow,
    /// Ignored or cancelled: the slot is released, no verdict (BR-01, BR-03, BR-08).
    Neutral,
}

/// A probe of `generation` ended with `end`: a failure (or a slow success) re-opens, a success
/// counts towards closing, a neutral end releases the slot; a probe of another generation is
/// [`Step::Stale`] (it holds no slot of this one, case BR-12).
pub fn end_probe(w: Word, generation: u32, end: ProbeEnd, limits: &Limits) -> Step {
    if w.state != State::HalfOpen || w.generation != generation {
        // A probe of an earlier half-open period: it holds no slot of this one (BR-12).
        return Step::Stale;
    }
    let release = Word {
        in_flight: w.in_flight.saturating_sub(1),
        ..w
    };
    match end {
        ProbeEnd::Failure => Step::Enter(reopen(w), TransitionReason::ProbeFailed),
        ProbeEnd::Slow => Step::Enter(reopen(w), TransitionReason::SlowCallRate),
        ProbeEnd::Success if w.successes + 1 >= limits.successes_to_close => Step::Enter(
            w.transition(State::Closed, 0),
            TransitionReason::ProbesSucceeded,
        ),
        ProbeEnd::Success => Step::Update(Word {
            successes: w.successes + 1,
            ..release
        }),
        ProbeEnd::Neutral => Step::Update(release),
    }
}

/// A closed-state rule fired on evidence from closed `generation`: open, unless that closed
/// period has already ended.
pub fn trip(w: Word, generation: u32, reason: TransitionReason) -> Step {
    if w.state == State::Closed && w.generation == generation {
        Step::Enter(reopen(w), reason)
    } else {
        Step::Stale
    }
}

/// A change to `to` whatever the word (`force_open`, `force_closed`, `reset`, or a transition
/// decided elsewhere), for `reason`: always a transition. The open streak entered is `streak`
/// (capped at 255), or by default one more than `w`'s when opening (as [`reopen`]) and 0
/// otherwise.
pub fn force(w: Word, to: State, reason: TransitionReason, streak: Option<u32>) -> Forced {
    let streak = streak
        .unwrap_or(if to == State::Open {
            reopen(w).streak
        } else {
            0
        })
        .min(0xff);
    Forced {
        next: w.transition(to, streak),
        reason,
    }
}

/// What [`force`] decided: always a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forced {
    /// The word entered.
    pub next: Word,
    /// Why.
    pub reason: TransitionReason,
}

impl Decision for Forced {
    fn next(&self) -> Option<Word> {
        Some(self.next)
    }
}

impl From<Forced> for Step {
    fn from(f: Forced) -> Step {
        Step::Enter(f.next, f.reason)
    }
}

/// The open word after `w`: the streak is 1 after a closed period and grows by one on each
/// re-opening (capped at 255; it picks the grown cooldown).
pub fn reopen(w: Word) -> Word {
    let streak = if w.state == State::Closed {
        1
    } else {
        w.streak.saturating_add(1).min(0xff)
    };
    w.transition(State::Open, streak)
}

/// How long an opening of open streak `streak` lasts: the policy's cooldown for the streak
/// ([`BreakerPolicy::cooldown_for`]: growth by `cooldown_multiplier`, capped at
/// `cooldown_max`), less the jitter: `d * (1 - cooldown_jitter * draw)`, so it lies in
/// `[d * (1 - jitter), d]`. `draw` is uniform in `[0, 1]` (clamped), drawn by the caller (this
/// process draws it from the entry stamp and the generation, deterministically; the fleet from
/// its own generator).
pub fn cooldown(policy: &BreakerPolicy, streak: u32, draw: f64) -> Duration {
    let base = policy.cooldown_for(streak);
    if policy.cooldown_jitter > 0.0 {
        base.mul_f64(1.0 - policy.cooldown_jitter.min(1.0) * draw.clamp(0.0, 1.0))
    } else {
        base
    }
}

/// The thresholds the rate rules read: a [`BreakerPolicy`]'s, or its mirror's on the closed
/// path (read one at a time, so a window under `min_calls` reads one).
pub trait RateThresholds {
    /// Rate rules are not evaluated before the window holds this many calls.
    fn min_calls(&self) -> u32;
    /// The failure-rate threshold, percent.
    fn failure_rate_percent(&self) -> Option<f64>;
    /// The slow-call-rate threshold, percent.
    fn slow_rate_percent(&self) -> Option<f64>;
}

impl RateThresholds for BreakerPolicy {
    fn min_calls(&self) -> u32 {
        self.min_calls
    }

    fn failure_rate_percent(&self) -> Option<f64> {
        self.failure_rate_percent
    }

    fn slow_rate_percent(&self) -> Option<f64> {
        self.slow_call.map(|s| s.rate_percent)
    }
}

/// The rate rules on a window's totals: nothing before `min_calls` calls (case BR-17); then
/// the failure rate, then the slow-call rate, each compared with `>=` (BR-14). The reason of
/// the rule that fires, if one does.
#[inline]
pub fn rate_trip(rules: &impl RateThresholds, counts: WindowCounts) -> Option<TransitionReason> {
    if counts.calls < rules.min_calls() {
        return None;
    }
    if rules
        .failure_rate_percent()
        .is_some_and(|p| counts.failure_rate_at_least(p))
    {
        Some(TransitionReason::FailureRate)
    } else if rules
        .slow_rate_percent()
        .is_some_and(|p| counts.slow_rate_at_least(p))
    {
        Some(TransitionReason::SlowCallRate)
    } else {
        None
    }
}

/// What the consecutive-failure rule does with one outcome of closed `generation`, given its
/// counter word `c` ([`pack_count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// Nothing to write: a success with no failure of its period to reset, or an outcome of a
    /// period older than the counter's.
    Keep,
    /// Swap in this counter word; `failures` is the period's count after a failure.
    Write { next: u64, failures: Option<u32> },
}

/// The consecutive-failure rule on one outcome: a failure counts one more in its closed
/// period (the first failure of a period starts from zero: the count of an earlier period is
/// not carried over, case BR-25); a success resets the period's count to zero; an outcome of a
/// period older than the counter's changes nothing.
#[inline(always)]
pub(crate) fn count_outcome(c: u64, generation: u32, failure: bool) -> Count {
    let (g, n) = unpack_count(c);
    let n = if g == generation {
        n
    } else if newer(generation, g) {
        0
    } else {
        return Count::Keep;
    };
    if failure {
        let failures = n.saturating_add(1);
        Count::Write {
            next: pack_count(generation, failures),
            failures: Some(failures),
        }
    } else if n == 0 {
        Count::Keep
    } else {
        Count::Write {
            next: pack_count(generation, 0),
            failures: None,
        }
    }
}

#[cfg(test)]
mod tests;
