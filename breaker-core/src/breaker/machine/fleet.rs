//! A fleet backend's hook on the call paths (the hook itself and its types are `remote.rs`):
//! a granted probe slot, a closed call's end and its counts.

use super::Inner;
use crate::breaker::permit::Ticket;
use crate::breaker::rejected::Rejected;
use crate::breaker::remote::{FleetProbe, FleetSlot};
use crate::classify::Outcome;
use crate::sync::Ordering;

impl Inner {
    /// A probe slot granted locally, of a hooked breaker: the hook decides whether it runs
    /// (with a fleet lease, or locally) or is rejected, its local slot released as a
    /// cancellation.
    #[cold]
    pub(super) fn fleet_probe(&self, slot: &FleetSlot, ticket: Ticket) -> Result<Ticket, Rejected> {
        match slot.hook.admit_probe(ticket.generation()) {
            FleetProbe::Leased(token) => {
                Ok(ticket.with_fleet_token(token.min(FleetProbe::MAX_TOKEN)))
            }
            FleetProbe::Local => Ok(ticket),
            FleetProbe::Reject(reason) => {
                self.finish(ticket, None);
                Err(self.reject(reason, None))
            }
        }
    }

    /// The fleet's counts of a closed call's end: successes and failures (slow ones also as
    /// slow); ignored and cancelled calls are not counted.
    #[inline(always)]
    pub(super) fn fleet_finish(&self, slot: &FleetSlot, t: Ticket, outcome: Option<Outcome>) {
        let failure = match outcome {
            Some(Outcome::Success) => false,
            Some(Outcome::Failure) => true,
            _ => return,
        };
        let slow = t.start().is_some() && self.is_slow(&t, self.shared.clock.now_nanos());
        self.fleet_closed(slot, failure, slow);
    }

    #[inline(always)]
    pub(crate) fn fleet(&self) -> Option<&FleetSlot> {
        self.heavy().and_then(|h| h.fleet.get()).map(|b| &**b)
    }

    /// A closed call of a hooked breaker ended with `outcome` (slow: whether it was slow).
    #[inline(always)]
    pub(crate) fn fleet_closed(&self, slot: &FleetSlot, failure: bool, slow: bool) {
        let c = &slot.counts;
        if failure {
            let n = c.failures.fetch_add(1, Ordering::Relaxed) + 1;
            if n == c.early {
                slot.hook.failures_reached(n);
            }
        } else {
            c.successes.fetch_add(1, Ordering::Relaxed);
        }
        if slow {
            c.slow.fetch_add(1, Ordering::Relaxed);
        }
        if !c.active.load(Ordering::Relaxed) {
            activate(slot);
        }
    }
}

#[cold]
#[inline(never)]
fn activate(slot: &FleetSlot) {
    if !slot.counts.active.swap(true, Ordering::AcqRel) {
        slot.hook.activated();
    }
}
