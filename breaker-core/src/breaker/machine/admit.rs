//! Admission: the closed state's call goes ahead with two loads; an open breaker rejects by
//! its hint (`hint.rs`) while the cooldown has well over a tick to go; every other call is
//! decided by `rules::admit` and its parts through the update loop.

use super::{duration_micros, Heavy, Inner, Write, NO_LIMITS};
use crate::breaker::event::Cause;
use crate::breaker::permit::{Kind, Ticket};
use crate::breaker::rejected::{RejectReason, Rejected};
use crate::breaker::rules::{self, Admit, Decision, Limits, ProbeEnd};
use crate::breaker::state::{later, micros, pack_stamp, unpack_stamp, State, Word};
use crate::breaker::totals::Counter;
use crate::sync::Ordering;
use std::time::Duration;

impl Inner {
    /// Asks for a permit (see [`CircuitBreaker::try_acquire`](crate::breaker::CircuitBreaker::try_acquire),
    /// which inlines the closed path itself).
    #[inline(always)]
    pub(crate) fn acquire(&self) -> Result<Ticket, Rejected> {
        let raw = self.state.load(Ordering::Acquire);
        if Word::raw_is_closed(raw) {
            return Ok(self.closed_ticket(raw));
        }
        match self.reject_by_hint(raw) {
            Some(left) => Err(self.reject_open(left)),
            None => self.acquire_slow(raw),
        }
    }

    /// The ticket of a call admitted by closed word `raw` (`rules::admit`'s `Closed`: nothing
    /// to swap): its generation, and its start when a slow-call rule needs one.
    #[inline(always)]
    pub(crate) fn closed_ticket(&self, raw: u64) -> Ticket {
        let start = if self.shared.hot.slow_nanos() != 0 {
            Some(self.shared.clock.now_nanos())
        } else {
            None
        };
        Ticket::new(Word::raw_generation(raw), Kind::Closed, start)
    }

    pub(crate) fn reject(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        self.reject_nanos(reason, Rejected::retry_after_nanos(retry_after))
    }

    /// The rejection of an open breaker by its hint, `left` nanoseconds before the hint's
    /// deadline, once [`Inner::rejected`] has run: the value alone.
    #[inline(always)]
    pub(crate) fn reject_open(&self, left: u64) -> Rejected {
        Rejected::from_nanos(RejectReason::Open, left, self.shared.name)
    }

    /// [`Inner::reject`] with the rest of the cooldown in nanoseconds (`Rejected`'s encoding).
    #[inline(always)]
    fn reject_nanos(&self, reason: RejectReason, retry_after: u64) -> Rejected {
        self.rejected(reason, retry_after);
        Rejected::from_nanos(reason, retry_after, self.shared.name)
    }

    /// Whether [`Inner::rejected`] has anything to do: something listens at debug level, or
    /// the breaker keeps optional parts (totals among them).
    #[inline(always)]
    pub(crate) fn rejection_has_work(&self) -> bool {
        tracing::level_enabled!(tracing::Level::DEBUG) || self.heavy().is_some()
    }

    /// What every rejection does besides its value, each part out of line: the `tracing`
    /// event (when something listens at debug level) and the totals' count.
    #[inline(always)]
    pub(crate) fn rejected(&self, reason: RejectReason, retry_after: u64) {
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            self.trace_rejection(reason, retry_after);
        }
        if let Some(h) = self.heavy() {
            Self::heavy_rejection(h);
        }
    }

    /// A rejection's part of [`Heavy`]: the totals' count. Out of line, so that the default
    /// breaker's rejection (no `Heavy`) saves no register for it.
    #[cold]
    #[inline(never)]
    fn heavy_rejection(h: &Heavy) {
        if let Some(totals) = &h.totals {
            totals.add(Counter::Rejected);
        }
    }

    /// The `tracing` event of a rejection, out of line: the rejection path keeps no frame for
    /// its fields when nothing listens at debug level.
    #[cold]
    #[inline(never)]
    fn trace_rejection(&self, reason: RejectReason, retry_after: u64) {
        let retry_after = Rejected::from_nanos(reason, retry_after, "").retry_after();
        tracing::debug!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            reason = reason.as_str(),
            retry_after = ?retry_after,
            "call rejected"
        );
    }

    /// Every admission but a closed one and an open one decided by the hint: through the
    /// update loop, on the precise clock.
    #[cold]
    #[inline(never)]
    pub(crate) fn acquire_slow(&self, raw: u64) -> Result<Ticket, Rejected> {
        // Read before any swap: the stamps written after it come from this reading. Each
        // decision reads the clock *after* the word it is taken on (`raw` was loaded before this
        // first reading; a retry reads it again), so its reading is no earlier than that of any
        // admission whose swap it sees. A retry on a stale reading broke the probe bound: a
        // promotion to half-open stamps its probe only after its swap, so a caller whose swap
        // had lost to it stamped the new period's newest probe with a reading from before that
        // probe's, and a takeover one probe wait after that stale reading admitted a second
        // probe within the wait of the first (`tests/loom.rs`,
        // `a_stale_reading_never_dates_the_first_probe_of_a_period`).
        let mut now = self.shared.clock.now_nanos();
        let mut retry = false;
        let mut policy = None;
        // A takeover's newest probe, as it read it: claimed after the swap (below).
        let mut takeover = None;
        let (from, admit) = self.update(raw, |w| {
            if std::mem::replace(&mut retry, true) {
                now = self.shared.clock.now_nanos();
            }
            let now_us = micros(now);
            takeover = None;
            match w.state {
                State::Open => Some(rules::admit_open(w, self.deadline(w, now_us)?, now_us)),
                State::HalfOpen => {
                    let p = policy.get_or_insert_with(|| self.shared.policy.load());
                    let limits = Limits::new(p, w.streak);
                    // The newest probe's stamp is read only when every slot is taken.
                    let admit = match rules::free_slot(w, &limits) {
                        Some(reserved) => {
                            // Stamped before the swap: whoever sees this probe's slot taken
                            // (after the swap) sees its admission too, so no takeover counts it
                            // older than it is.
                            self.stamp(&self.at, w.generation, now_us, Write::Latest)?;
                            reserved
                        }
                        None => {
                            let newest = self.newest_probe(w, now_us)?;
                            let admit = rules::admit_half_open(w, newest, now_us, &limits);
                            takeover = admit.next().map(|_| newest);
                            admit
                        }
                    };
                    Some(admit)
                }
                // Closed and forced: no stamp and no limit is read.
                _ => Some(rules::admit(w, 0, now_us, &NO_LIMITS)),
            }
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
                if let Some(reason) = entered {
                    self.entered(from, next, reason, now, Cause::default());
                }
                if let Some(newest) = takeover {
                    if !self.claim_takeover(next.generation, newest, micros(now)) {
                        return Err(self.reject(RejectReason::HalfOpenFull, None));
                    }
                    self.trace_takeover(next);
                }
                let ticket = Ticket::new(next.generation, Kind::Probe, slow_start());
                match self.fleet() {
                    None => Ok(ticket),
                    Some(slot) => self.fleet_probe(slot, ticket),
                }
            }
        }
    }

    /// Confirms a takeover of half-open `generation` whose slot this thread has just swapped in,
    /// decided on `newest` (the newest probe's stamp it read) at `now`: stamps `now` in place of
    /// exactly `newest`. If the stamp has changed since, the slot is released again and the
    /// takeover is refused (`false`).
    ///
    /// Why after the swap and not before: the word does not tell the slots apart, so a swap
    /// succeeds on a word that an end and a new admission have restored in the meantime (one
    /// probe ends, another takes its free slot: the same word). A free slot's admission stamps
    /// before its swap, so a takeover's swap that comes after it (and acquires it) then sees its
    /// stamp here, newer than `newest`, and does not admit a second probe within the wait of
    /// that one. (A stamp not newer than `newest` is a probe at least the wait old: harmless.)
    /// Two takeovers racing both swap in a slot, and only the first to stamp keeps its own.
    fn claim_takeover(&self, generation: u32, newest: u64, now: u64) -> bool {
        let claimed = self
            .at
            .compare_exchange(
                pack_stamp(newest, generation),
                pack_stamp(now, generation),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if !claimed {
            // A cancellation of the slot just taken (stale if the period has ended).
            let raw = self.state.load(Ordering::Acquire);
            self.update(raw, |w| {
                Some(rules::end_probe(
                    w,
                    generation,
                    ProbeEnd::Neutral,
                    &NO_LIMITS,
                ))
            });
        }
        claimed
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
}
