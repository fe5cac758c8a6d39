//! The state word, the stamps beside it, and the pure decisions taken on them.
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
//! # Decisions
//! The functions below are pure: they take a word, the stamp they need, `now` and the limits
//! of the policy in force, and return what to do — the next word and what happened — without
//! touching an atomic, a clock or a policy. The machine (`machine.rs`) applies them with one
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
use super::window::WindowCounts;
use std::fmt;
use std::time::Duration;

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

/// A decoded state word (see the [module docs](self) for its bit layout). Plain data: the
/// same value whether it lives in an atomic of this process or in a shared store.
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

#[inline]
pub(crate) fn unpack_count(w: u64) -> (u32, u32) {
    // Generations are 24 bits; the top 8 bits of the field carry the high bits of an open
    // state's coarse-clock hint (`machine.rs`, `pack_hint`), which share this word.
    (((w >> 32) as u32) & GEN_MASK, w as u32)
}

/// Whether generation `a` is newer than `b`, in 24-bit wrapping arithmetic (serial-number
/// arithmetic: `a` is newer when it is at most 2^23 - 1 transitions ahead of `b`).
#[inline]
pub fn newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & GEN_MASK;
    d != 0 && d < (1 << 23)
}

// ---------------------------------------------------------------------------------------------
// Decisions.

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
    let left = span(now, until);
    (left > 0).then_some(left as u64)
}

/// [`admit`] for a half-open word whose newest probe was admitted at `newest`: a free slot is
/// reserved; with every slot taken, once the newest probe has been outstanding for
/// `probe_wait`, one more probe is admitted in the same half-open period (a hung probe must
/// not wedge the breaker, case BR-04; the hung probes keep their slots and their results still
/// count: see the [module docs](self#slow-probes-count)). Rejected at [`MAX_IN_FLIGHT`].
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

#[cfg(test)]
mod tests;
