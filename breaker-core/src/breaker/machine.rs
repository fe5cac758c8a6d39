//! The atomic machine: where the state word lives in this process, and the one path every
//! transition takes.
//!
//! - **Decide, then swap.** Every change of the word is a pure decision from `state.rs` applied
//!   by [`Inner::update`], one compare-and-swap loop (governor's `measure_and_replace_one`): read
//!   the word, decide, swap; if another thread changed the word first, decide again on the word
//!   that won. A decision that needs the time (admission, a trip, a manual change) reads the
//!   clock before the loop; the end of a probe reads it only when it makes a transition, after
//!   its swap. Either way what is stamped after the swap is fenced (below), so it does not
//!   matter when a delayed writer gets to write.
//! - **One `entered`.** The thread whose swap made a transition calls [`Inner::entered`], which
//!   does what every transition does, in one place: the entry stamp, the deadline or first
//!   probe stamp, the totals, the `tracing` event and the listeners.
//! - **Fenced stamps.** A stamp is written by [`Inner::stamp`] with a compare-and-swap that
//!   never replaces a stamp of the generation in force and never writes once the word has moved
//!   past the writer's generation, so a writer delayed after its swap cannot clobber a newer
//!   generation's deadline (the stuck-open fault of issue 11).
//! - **No "not stamped yet" forever.** A reader that finds the generation in force without its
//!   stamp (the winner of the swap has not written it yet) writes it itself, once, from its own
//!   reading: an open breaker then admits a probe at most one cooldown later, whatever happened
//!   to the winner.

use super::builder::Shared;
use super::closed::WindowSlot;
use super::event::{Transition, TransitionReason};
use super::permit::{Kind, Ticket};
use super::policy::{NeutralProbe, MAX_COOLDOWN};
use super::rejected::{RejectReason, Rejected};
use super::remote::{FleetProbeEnd, FleetSlot};
use super::state::{
    self, later, micros, pack_stamp, span, unpack_count, unpack_stamp, Admit, Decision, Limits,
    ProbeEnd, State, Step, Word,
};
use super::totals::{Counter, Striped};
use super::window::WindowCounts;
use crate::classify::Outcome;
use crate::sync::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a breaker keeps only when it needs it (so a consecutive-rule breaker without totals
/// stays at 64 bytes).
pub(crate) struct Heavy {
    /// The sliding window (boxed, so a breaker without one keeps `Heavy` at 32 bytes).
    pub(crate) window: Option<Box<WindowSlot>>,
    pub(crate) totals: Option<Striped>,
    /// The key of a keyed breaker (`BreakerFactory::create_keyed`), for its events and
    /// rejections (shared, so a rejection names it without allocating).
    pub(crate) key: Option<Arc<str>>,
    /// A fleet-wide backend's hook, set once (`remote.rs`); empty for a local breaker.
    pub(crate) fleet: std::sync::OnceLock<Box<FleetSlot>>,
}

/// One breaker's state: the word, its stamps and counters.
pub(crate) struct Inner {
    /// The state word; see `state.rs`.
    pub(crate) state: AtomicU64,
    /// Open: when the cooldown ends. Half-open: when the newest probe was admitted. Closed and
    /// forced: when the state was entered. A stamp (`pack_stamp`), written by [`Inner::stamp`].
    pub(crate) at: AtomicU64,
    /// When the current state was entered (a stamp).
    pub(crate) since: AtomicU64,
    /// Consecutive failures while closed (`pack_count`).
    pub(crate) consecutive: AtomicU64,
    pub(crate) shared: Arc<Shared>,
    pub(crate) heavy: Option<Box<Heavy>>,
}

/// What caused a transition beyond its reason: the counts that tripped it, and for a
/// transition decided elsewhere, its deadline and who decided it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cause {
    /// The window's totals that caused a rate trip.
    pub(crate) window: WindowCounts,
    /// The consecutive failures that caused a trip.
    pub(crate) consecutive_failures: u32,
    /// An open state's deadline (nanoseconds on this breaker's clock) decided elsewhere;
    /// `None`: from the policy, here.
    pub(crate) open_until: Option<u64>,
    /// Who decided the transition, if not this process (a replica id).
    pub(crate) origin: Option<Arc<str>>,
}

/// How [`Inner::stamp`] treats a stamp already written for the same generation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// Keep it: the first writer of a generation wins (entry time, deadline).
    Once,
    /// Keep the later time (the newest probe's admission).
    Latest,
}

/// The open-state hint's unit: `2^20` ns (about 1.05 ms).
const HINT_SHIFT: u32 = 20;

/// The hint's width: 40 bits of units, a circle of about 36 years.
const HINT_MASK: u64 = (1 << 40) - 1;

/// The furthest a hint is ever left ahead: `2^31` units, about 26 days. A hint found further
/// ahead is one that expired more than `2^40 - 2^31` units ago (no call reached the breaker
/// for 36 years) and is ignored.
const HINT_AHEAD_MAX: u64 = 1 << 31;

/// A coarse reading in hint units, on the 40-bit circle.
#[inline]
fn hint_units(coarse_nanos: u64) -> u64 {
    (coarse_nanos >> HINT_SHIFT) & HINT_MASK
}

/// The counter word of open generation `g` holding `hint`: the generation where a closed
/// period's is (`state::pack_count`), the hint's low 32 bits as the count and its high 8 bits
/// in the generation field's top byte, which `state::unpack_count` masks off.
#[inline]
fn pack_hint(g: u32, hint: u64) -> u64 {
    ((hint >> 32) << 56) | (u64::from(g & state::GEN_MASK) << 32) | (hint & 0xffff_ffff)
}

/// The generation and hint of a counter word (see [`pack_hint`]).
#[inline]
fn unpack_hint(w: u64) -> (u32, u64) {
    let (g, low) = unpack_count(w);
    (g, ((w >> 56) << 32) | u64::from(low))
}

/// A deterministic draw in `[0, 1)` from a seed, for cooldown jitter (SplitMix64 finaliser).
/// Deterministic under a manual clock, which keeps tests exact.
fn unit_draw(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Inner {
    pub(crate) fn key(&self) -> &str {
        self.heavy
            .as_ref()
            .and_then(|h| h.key.as_deref())
            .unwrap_or("")
    }

    #[inline(always)]
    pub(crate) fn count(&self, c: Counter) {
        if let Some(h) = &self.heavy {
            if let Some(t) = &h.totals {
                t.add(c);
            }
        }
    }

    // --- The update loop and the stamps -------------------------------------------------------

    /// The one compare-and-swap loop. `decide` sees the word (first `raw`) and returns a
    /// decision, or `None` to have the word read again (a stamp it needed belonged to a newer
    /// generation); a decision with a next word is swapped in, and if another thread changed
    /// the word first, `decide` runs again on the word that won. Returns the word the decision
    /// was taken on and the decision.
    #[inline]
    pub(crate) fn update<D: Decision>(
        &self,
        mut raw: u64,
        mut decide: impl FnMut(Word) -> Option<D>,
    ) -> (Word, D) {
        loop {
            let w = Word::decode(raw);
            let Some(d) = decide(w) else {
                raw = self.state.load(Ordering::Acquire);
                continue;
            };
            let Some(next) = d.next() else {
                return (w, d);
            };
            match self.state.compare_exchange(
                raw,
                next.encode(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return (w, d),
                Err(actual) => raw = actual,
            }
        }
    }

    /// Writes `value` as `generation`'s stamp in `cell`, fenced by the generation: a stamp of
    /// `generation` already there is kept (`Once`) or kept if later (`Latest`), and nothing is
    /// written once the word has moved past `generation`, so a delayed writer never replaces a
    /// newer generation's stamp. Returns the time `cell` holds for `generation` afterwards, or
    /// `None` if `generation` is no longer the one in force and its stamp was not written.
    ///
    /// Why this is enough: a newer generation's writer swaps the word *before* it stamps. If
    /// this writer's compare-and-swap of `cell` succeeds, it read the cell before the newer
    /// stamp landed (else the swap would fail on the changed value), and the newer writer, which
    /// stamps with the same loop, then replaces it. If it fails, it re-reads the cell; having
    /// seen the newer stamp (acquire), it sees the newer word and stops. (The word is not read
    /// when the cell already holds this generation's stamp: the swap from it succeeds only if no
    /// newer stamp has landed.)
    pub(crate) fn stamp(
        &self,
        cell: &AtomicU64,
        generation: u32,
        value: u64,
        write: Write,
    ) -> Option<u64> {
        let mut cur = cell.load(Ordering::Acquire);
        loop {
            match unpack_stamp(cur, generation) {
                Some(have) if write == Write::Once || span(value, have) >= 0 => return Some(have),
                // The cell holds this generation's stamp: a swap from it cannot replace a newer
                // generation's (that one would have changed the cell first).
                Some(_) => {}
                None => {
                    if Word::raw_generation(self.state.load(Ordering::Acquire)) != generation {
                        return None;
                    }
                }
            }
            match cell.compare_exchange(
                cur,
                pack_stamp(value, generation),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(value),
                Err(actual) => cur = actual,
            }
        }
    }

    /// The deadline of open word `w`. If its transition has not stamped it yet, this reader
    /// stamps the entry time and deadline itself (once), from `now`: the bounded way out of
    /// "not stamped yet". `None` if the word has moved on.
    #[inline]
    fn deadline(&self, w: Word, now: u64) -> Option<u64> {
        match unpack_stamp(self.at.load(Ordering::Acquire), w.generation) {
            Some(until) => Some(until),
            None => self.fill_deadline(w, now),
        }
    }

    #[cold]
    fn fill_deadline(&self, w: Word, now: u64) -> Option<u64> {
        let since = self.stamp(&self.since, w.generation, now, Write::Once)?;
        let cooldown = self.cooldown(w, since);
        let until = later(since, duration_micros(cooldown));
        self.stamp(&self.at, w.generation, until, Write::Once)
    }

    /// The newest probe's admission in half-open word `w`; if not stamped yet, stamped now
    /// (then the probe wait runs from this reading: at most one wait).
    fn newest_probe(&self, w: Word, now: u64) -> Option<u64> {
        match unpack_stamp(self.at.load(Ordering::Acquire), w.generation) {
            Some(t) => Some(t),
            None => self.stamp(&self.at, w.generation, now, Write::Once),
        }
    }

    /// The cooldown of open word `w` entered at `since` (µs): [`state::cooldown`], with a
    /// jitter draw from the entry time and the generation.
    fn cooldown(&self, w: Word, since: u64) -> Duration {
        let policy = self.shared.policy.load();
        let draw = if policy.cooldown_jitter > 0.0 {
            unit_draw(since ^ (u64::from(w.generation) << 40))
        } else {
            0.0
        };
        state::cooldown(&policy, w.streak, draw)
    }

    // --- Admission ------------------------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn acquire(&self) -> Result<Ticket, Rejected> {
        let w = self.state.load(Ordering::Acquire);
        if Word::raw_is_closed(w) {
            let start = if self.shared.hot.slow_nanos() != 0 {
                Some(self.shared.clock.now_nanos())
            } else {
                None
            };
            return Ok(Ticket::new(Word::raw_generation(w), Kind::Closed, start));
        }
        self.acquire_open(w)
    }

    /// An open breaker's rejections while its cooldown has well over a tick to go: one coarse
    /// clock read and the hint `entered` left in the consecutive-failure counter (see
    /// [`Inner::leave_hint`]). Everything else goes the precise way, `acquire_slow`.
    #[inline(never)]
    fn acquire_open(&self, raw: u64) -> Result<Ticket, Rejected> {
        if Word::raw_is_open(raw) {
            if let Some(c) = self.shared.clock.coarse() {
                let (g, hint) = unpack_hint(self.consecutive.load(Ordering::Acquire));
                if g == Word::raw_generation(raw) {
                    let left = hint.wrapping_sub(hint_units(c.now)) & HINT_MASK;
                    if left > 0 && left <= HINT_AHEAD_MAX {
                        return Err(self.reject_nanos(RejectReason::Open, left << HINT_SHIFT));
                    }
                }
            }
        }
        self.acquire_slow(raw)
    }

    /// Leaves the coarse hint of open generation `g`, whose deadline stamp in force is `until`
    /// (microseconds): the coarse clock's reading at which the cooldown is sure to have more
    /// than nothing left, in units of `2^HINT_SHIFT` ns, in the consecutive-failure counter (the
    /// counter of a closed generation, unused while open: a late closed result finds a newer
    /// generation there and writes nothing, and the next closed period starts it over).
    ///
    /// The hint is `coarse + left - margin`, where `left` is the cooldown's rest by the precise
    /// clock read *after* the coarse one (so a pause between the two reads makes the hint
    /// earlier, never later) and the margin is the coarse clock's resolution plus 0.1 % of
    /// `left` (for rate differences between the two clocks). A coarse reading before the hint
    /// is therefore before the precise deadline: the hint never delays recovery. Without a
    /// coarse clock, or for a cooldown over `2^31` units (26 days), no hint is left and every
    /// rejection reads the precise clock. The hint is 40 bits of units, so an expired one is
    /// never mistaken for a live one unless no call reached the breaker for 36 years (the first
    /// call after the deadline moves the breaker on, which retires the hint with its
    /// generation).
    fn leave_hint(&self, g: u32, until: u64) {
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
        if ahead >> HINT_SHIFT >= HINT_AHEAD_MAX {
            return;
        }
        let hint = hint_units(c.now.wrapping_add(ahead));
        let mut cur = self.consecutive.load(Ordering::Acquire);
        loop {
            let (owner, _) = unpack_count(cur);
            if state::newer(owner, g) {
                return; // a newer generation owns the counter
            }
            match self.consecutive.compare_exchange_weak(
                cur,
                pack_hint(g, hint),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    pub(super) fn reject(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        self.reject_nanos(reason, Rejected::retry_after_nanos(retry_after))
    }

    /// [`Inner::reject`] with the rest of the cooldown in nanoseconds (`Rejected`'s encoding):
    /// the open state's path, which has it in no other form.
    #[inline]
    fn reject_nanos(&self, reason: RejectReason, retry_after: u64) -> Rejected {
        self.count(Counter::Rejected);
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            self.trace_rejection(reason, retry_after);
        }
        Rejected::from_nanos(
            reason,
            retry_after,
            self.shared.name,
            self.heavy.as_ref().and_then(|h| h.key.clone()),
        )
    }

    /// The `tracing` event of a rejection, out of line: the rejection path keeps no frame for
    /// its fields when nothing listens at debug level.
    #[cold]
    #[inline(never)]
    fn trace_rejection(&self, reason: RejectReason, retry_after: u64) {
        let retry_after = Rejected::from_nanos(reason, retry_after, "", None).retry_after();
        tracing::debug!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            reason = reason.as_str(),
            retry_after = ?retry_after,
            "call rejected"
        );
    }

    #[cold]
    fn acquire_slow(&self, raw: u64) -> Result<Ticket, Rejected> {
        // Read once, before any swap: the stamps written after it come from this reading.
        let now = self.shared.clock.now_nanos();
        let now_us = micros(now);
        // What an open breaker does for every call until its deadline: the rule of
        // `admit_open` on the raw word and its stamped deadline, with nothing to swap.
        if Word::raw_is_open(raw) {
            let stamp = self.at.load(Ordering::Acquire);
            if let Some(until) = unpack_stamp(stamp, Word::raw_generation(raw)) {
                if let Some(left) = state::open_left(until, now_us) {
                    return Err(self.reject(RejectReason::Open, Some(Duration::from_micros(left))));
                }
            }
        }
        let mut policy = None;
        let (from, admit) = self.update(raw, |w| match w.state {
            State::Open => Some(state::admit_open(w, self.deadline(w, now_us)?, now_us)),
            State::HalfOpen => {
                let p = policy.get_or_insert_with(|| self.shared.policy.load());
                let limits = Limits::new(p, w.streak);
                // The newest probe's stamp is read only when every slot is taken.
                let admit = match state::free_slot(w, &limits) {
                    Some(reserved) => reserved,
                    None => {
                        let newest = self.newest_probe(w, now_us)?;
                        state::admit_half_open(w, newest, now_us, &limits)
                    }
                };
                if admit.next().is_some() {
                    // Stamped before the swap: whoever sees this probe's slot taken (after the
                    // swap) sees its admission too, so no takeover counts it older than it is.
                    self.stamp(&self.at, w.generation, now_us, Write::Latest)?;
                }
                Some(admit)
            }
            // Closed and forced: no stamp and no limit is read.
            _ => Some(state::admit(w, 0, now_us, &NO_LIMITS)),
        });
        let slow_start = || (self.shared.hot.slow_nanos() != 0).then_some(now);
        match admit {
            Admit::Closed => Ok(Ticket::new(from.generation, Kind::Closed, slow_start())),
            Admit::Unrecorded => Ok(Ticket::new(from.generation, Kind::Unrecorded, None)),
            Admit::Reject {
                reason,
                retry_after,
            } => Err(self.reject(reason, retry_after.map(Duration::from_micros))),
            Admit::Probe { next, entered } => {
                match entered {
                    Some(reason) => self.entered(from, next, reason, now, Cause::default()),
                    None if policy
                        .as_ref()
                        .is_some_and(|p| from.in_flight >= p.half_open_probes) =>
                    {
                        self.trace_takeover(next);
                    }
                    None => {}
                }
                let ticket = Ticket::new(next.generation, Kind::Probe, slow_start());
                match self.fleet() {
                    None => Ok(ticket),
                    Some(slot) => self.fleet_probe(slot, ticket),
                }
            }
        }
    }

    /// The `tracing` event of a takeover: every probe slot was held past the probe wait, and
    /// one more probe was admitted in the same half-open period.
    #[cold]
    fn trace_takeover(&self, next: Word) {
        tracing::debug!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            generation = next.generation,
            probes_in_flight = next.in_flight,
            "every probe slot was held past the probe wait: one more probe admitted in the same \
             half-open period (the held probes' results still count)"
        );
    }

    // --- Ends of calls --------------------------------------------------------------------------

    /// Applies a permit's end: `None` is a cancellation.
    #[inline(always)]
    pub(crate) fn finish(&self, t: Ticket, outcome: Option<Outcome>) {
        if outcome == Some(Outcome::Success) && self.closed_success_in_steady_state(t) {
            return;
        }
        self.finish_any(t, outcome);
    }

    /// Applies a success of ticket `t` and returns `true` if it is a closed call's that
    /// changes no state but its counts: not slow (no slow-call rule, so no start), of the
    /// closed period in force, with no consecutive failures to reset, no fleet hook, and no
    /// window, a count window full of successes, or a time window in its steady state (which
    /// has then counted it: `WindowSlot::plain_success_is_done`). The steady state of a healthy
    /// breaker, decided with loads (and the totals' add, when they are on); every other end
    /// goes through [`Inner::finish_any`], which would do the same here.
    #[inline(always)]
    fn closed_success_in_steady_state(&self, t: Ticket) -> bool {
        if t.kind() != Kind::Closed || t.start().is_some() {
            return false;
        }
        let raw = self.state.load(Ordering::Acquire);
        if !Word::raw_is_closed(raw) || Word::raw_generation(raw) != t.generation() {
            return false;
        }
        if self.shared.hot.consecutive() != 0 {
            // `bump_consecutive` writes on a success only to reset this period's count.
            let (g, n) = unpack_count(self.consecutive.load(Ordering::Acquire));
            if g == t.generation() && n != 0 {
                return false;
            }
        }
        let Some(h) = &self.heavy else {
            return true;
        };
        // A `match`, not `Option::map_or`: that one is not always inlined.
        let steady = h.fleet.get().is_none()
            && match &h.window {
                None => true,
                Some(slot) => slot.plain_success_is_done(&self.shared, t),
            };
        if steady {
            if let Some(totals) = &h.totals {
                totals.add(Counter::Succeeded);
            }
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
            Some(state::end_probe(
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
        let (from, step) = self.update(raw, |w| Some(state::trip(w, generation, reason)));
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
        let (from, forced) = self.update(raw, |w| Some(state::force(w, to, reason, streak)));
        self.entered(from, forced.next, forced.reason, now, cause);
        forced.next
    }

    // --- What every transition does -----------------------------------------------------------

    /// Everything that follows a transition this thread won, from `from` to `to` at `now`
    /// (nanoseconds, read before the swap): the entry stamp and `at` (the deadline, the first
    /// probe, or the entry time), the opened total, the `tracing` event and the listeners.
    /// Adding a field to a transition event is a change here and in [`Transition`].
    pub(crate) fn entered(
        &self,
        from: Word,
        to: Word,
        reason: TransitionReason,
        now: u64,
        cause: Cause,
    ) {
        let now_us = micros(now);
        let g = to.generation;
        // If the word has already moved past `g`, its stamps are not written (the newer
        // generation's are in force); the event still fires: the transition happened.
        let since = self
            .stamp(&self.since, g, now_us, Write::Once)
            .unwrap_or(now_us);
        let cooldown = match to.state {
            State::Open => {
                let (until, cooldown) = match cause.open_until {
                    Some(until) => {
                        let cooldown =
                            Duration::from_nanos(until.saturating_sub(now)).min(MAX_COOLDOWN);
                        (later(now_us, duration_micros(cooldown)), cooldown)
                    }
                    None => {
                        let cooldown = self.cooldown(to, since);
                        (later(since, duration_micros(cooldown)), cooldown)
                    }
                };
                if let Some(until) = self.stamp(&self.at, g, until, Write::Once) {
                    self.leave_hint(g, until);
                }
                self.count(Counter::Opened);
                Some(cooldown)
            }
            State::HalfOpen => {
                self.stamp(&self.at, g, now_us, Write::Latest);
                None
            }
            _ => {
                self.stamp(&self.at, g, since, Write::Once);
                None
            }
        };
        let local_trip = from.state == State::Closed && to.state == State::Open;
        let decided_here = cause.origin.is_none();
        self.emit(from.state, to, reason, now, cooldown, cause);
        if local_trip && decided_here {
            if let Some(slot) = self.fleet() {
                slot.hook.local_trip(g, reason);
            }
        }
    }

    fn emit(
        &self,
        from: State,
        to: Word,
        reason: TransitionReason,
        now: u64,
        cooldown: Option<Duration>,
        cause: Cause,
    ) {
        let window = cause.window;
        tracing::info!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            from = from.as_str(),
            to = to.state.as_str(),
            reason = reason.as_str(),
            generation = to.generation,
            consecutive_failures = cause.consecutive_failures,
            window_calls = window.calls,
            window_failures = window.failures,
            window_slow = window.slow,
            cooldown = ?cooldown,
            // Recorded only for a transition decided elsewhere (`None` records nothing).
            origin = cause.origin.as_deref(),
            "circuit breaker state transition"
        );
        if self.shared.listeners.is_empty() {
            return;
        }
        let event = Transition {
            name: Arc::from(self.shared.name),
            from,
            to: to.state,
            reason,
            at: Duration::from_nanos(now),
            generation: to.generation,
            window,
            consecutive_failures: cause.consecutive_failures,
            cooldown,
            origin: cause.origin,
        };
        for l in &self.shared.listeners {
            l(&event);
        }
    }
}

/// Limits for the decisions that read none (closed and forced states).
const NO_LIMITS: Limits = Limits {
    half_open_probes: 0,
    successes_to_close: 0,
    probe_wait: 0,
};

fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
