//! Permits: permission to make one call, released exactly once.
//!
//! A permit carries a [`Ticket`]: the generation that admitted it and its kind. Recording
//! consumes the permit; dropping it unrecorded is a cancellation (or a failure while the thread
//! panics). Either way the ticket reaches [`Inner::finish`] once: the `done` bit guards the
//! in-place recording path that the pipeline uses.

use super::machine::Inner;
use crate::classify::Outcome;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Closed = 0,
    Probe = 1,
    Unrecorded = 2,
}

/// Permission to make one call, from
/// [`CircuitBreaker::try_acquire`](super::CircuitBreaker::try_acquire).
///
/// Record the call's outcome with [`success`](Permit::success), [`failure`](Permit::failure),
/// [`ignored`](Permit::ignored) or [`record`](Permit::record). Dropping the permit without
/// recording is a *cancellation*: neutral, the half-open slot (if any) is released and nothing
/// is counted but [`Totals::cancelled`](super::Totals::cancelled). Dropping it while the thread
/// is panicking records a failure. Either way the slot is released exactly once.
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct Permit<'a> {
    pub(super) inner: &'a Inner,
    pub(super) ticket: Ticket,
}

/// Like [`Permit`], but owns a handle to its breaker, so it is `'static` (for spawned tasks and
/// tower services).
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct OwnedPermit {
    pub(super) inner: triomphe::Arc<Inner>,
    pub(super) ticket: Ticket,
}

/// What a permit carries: the generation it was admitted in, its kind, whether its outcome has
/// been recorded, and when it started (only under a slow-call rule).
///
/// Packed in two words, each written with one store: a permit is moved and read right after it
/// is made, and a value written in pieces and then read whole stalls the CPU's store
/// forwarding, which cost more than the rest of the closed path.
#[derive(Clone, Copy)]
pub(super) struct Ticket {
    /// Bits 0..32 the generation, 32..34 the kind, bit 34 done, bit 35 whether `start` is set,
    /// 36..64 a probe's fleet lease token plus one (0: none; see `remote.rs`).
    bits: u64,
    start: u64,
}

impl Ticket {
    const DONE: u64 = 1 << 34;
    const TIMED: u64 = 1 << 35;

    #[inline(always)]
    pub(super) fn new(generation: u32, kind: Kind, start: Option<u64>) -> Ticket {
        let timed = if start.is_some() { Ticket::TIMED } else { 0 };
        Ticket {
            bits: u64::from(generation) | (kind as u64) << 32 | timed,
            start: start.unwrap_or(0),
        }
    }

    #[inline(always)]
    pub(super) fn generation(&self) -> u32 {
        self.bits as u32
    }

    #[inline(always)]
    pub(super) fn kind(&self) -> Kind {
        match (self.bits >> 32) & 0b11 {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Unrecorded,
        }
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.bits & Ticket::DONE != 0
    }

    #[inline(always)]
    fn set_done(&mut self) {
        self.bits |= Ticket::DONE;
    }

    const TOKEN_SHIFT: u32 = 36;

    /// This ticket, carrying fleet lease token `token` (at most 27 bits).
    pub(super) fn with_fleet_token(mut self, token: u32) -> Ticket {
        self.bits |= (u64::from(token) + 1) << Ticket::TOKEN_SHIFT;
        self
    }

    /// The fleet lease token this ticket carries, if any.
    #[inline]
    pub(super) fn fleet_token(&self) -> Option<u32> {
        match self.bits >> Ticket::TOKEN_SHIFT {
            0 => None,
            t => Some((t - 1) as u32),
        }
    }

    #[inline(always)]
    pub(super) fn start(&self) -> Option<u64> {
        (self.bits & Ticket::TIMED != 0).then_some(self.start)
    }
}

macro_rules! permit_methods {
    () => {
        /// Records a success.
        #[inline(always)]
        pub fn success(self) {
            self.record(Outcome::Success)
        }

        /// Records a failure.
        pub fn failure(self) {
            self.record(Outcome::Failure)
        }

        /// Records an ignored outcome: neither success nor failure (for example a 404 for a
        /// resource that does not exist). A half-open slot is released.
        pub fn ignored(self) {
            self.record(Outcome::Ignored)
        }

        /// Records `outcome`.
        #[inline(always)]
        pub fn record(mut self, outcome: Outcome) {
            self.ticket.set_done();
            self.inner.finish(self.ticket, Some(outcome));
        }

        /// Whether this call is a half-open probe.
        pub fn is_probe(&self) -> bool {
            self.ticket.kind() == Kind::Probe
        }
    };
}

impl Permit<'_> {
    permit_methods!();

    /// Records `outcome` without moving the permit, which is inert afterwards (dropping it
    /// records nothing). For the pipeline, whose permit lives in its call's future: moving it
    /// out to consume it would copy it.
    /// Returns whether it recorded (`false` if an outcome was recorded before).
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn record_in_place(&mut self, outcome: Outcome) -> bool {
        if self.ticket.done() {
            return false;
        }
        self.ticket.set_done();
        self.inner.finish(self.ticket, Some(outcome));
        true
    }

    /// Whether an outcome has been recorded.
    #[cfg(all(feature = "tokio", feature = "metrics"))]
    pub(crate) fn is_done(&self) -> bool {
        self.ticket.done()
    }
}

impl OwnedPermit {
    permit_methods!();
}

// The check is inlined and the unrecorded end is not: after `record`, which has just set the
// `done` bit, the compiler sees the bit and drops the permit with no call at all.
impl Drop for Permit<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.ticket.done() {
            unrecorded(self.inner, self.ticket);
        }
    }
}

impl Drop for OwnedPermit {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.ticket.done() {
            unrecorded(&self.inner, self.ticket);
        }
    }
}

/// The end of a permit dropped without an outcome.
#[cold]
#[inline(never)]
fn unrecorded(inner: &Inner, ticket: Ticket) {
    inner.finish(ticket, drop_outcome());
}

fn drop_outcome() -> Option<Outcome> {
    std::thread::panicking().then_some(Outcome::Failure)
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("generation", &self.ticket.generation())
            .field("probe", &self.is_probe())
            .finish()
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("generation", &self.ticket.generation())
            .field("probe", &self.is_probe())
            .finish()
    }
}

impl Permit<'_> {
    /// The token of the fleet lease this probe holds ([`FleetProbe::Leased`](super::FleetProbe::Leased)), if any.
    #[doc(hidden)]
    pub fn fleet_token(&self) -> Option<u32> {
        self.ticket.fleet_token()
    }
}

impl OwnedPermit {
    /// The token of the fleet lease this probe holds ([`FleetProbe::Leased`](super::FleetProbe::Leased)), if any.
    #[doc(hidden)]
    pub fn fleet_token(&self) -> Option<u32> {
        self.ticket.fleet_token()
    }
}
