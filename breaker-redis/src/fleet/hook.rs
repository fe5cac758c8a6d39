//! The fleet hook a shared breaker holds ([`FleetHook`] for `Core`): what the breaker tells the
//! fleet (activity, local trips, probe ends) and asks of it (probe leases).

use super::*;

impl FleetHook for Core {
    fn activated(&self) {
        if let Some(link) = self.link.get() {
            link.touch();
        }
    }

    fn failures_reached(&self, _n: u64) {
        if let Some(link) = self.link.get() {
            link.flush_soon();
        }
    }

    fn admit_probe(&self, _generation: u32) -> FleetProbe {
        let Some(link) = self.link.get() else {
            return FleetProbe::Reject(RejectReason::HalfOpenFull);
        };
        match self.status.load(Ordering::Acquire) {
            HEALTHY => {}
            DEGRADED_REJECT => return FleetProbe::Reject(RejectReason::Open),
            // Degraded `local` or `open`: the local rules decide the probe.
            _ => return FleetProbe::Local,
        }
        let now = self.clock.now_nanos();
        let mut g = self.lock();
        let generation = g.view.generation;
        g.leases
            .retain(|(l, until)| l.generation == generation && now < *until);
        if let Some((lease, _)) = g.leases.pop() {
            let token = g.next_token;
            g.next_token = if token >= FleetProbe::MAX_TOKEN {
                0
            } else {
                token + 1
            };
            g.in_use.push((token, lease));
            return FleetProbe::Leased(token);
        }
        let waiting = g
            .retry_at
            .is_some_and(|(gen, at)| gen == generation && now < at);
        let ask = !g.requested && !waiting;
        if ask {
            g.requested = true;
            g.requested_at = now;
            g.requests += 1;
        }
        drop(g);
        if ask {
            link.request_probes(self.want);
        }
        // No lease: the breaker releases its local slot (neutral) and rejects the call.
        FleetProbe::Reject(RejectReason::HalfOpenFull)
    }

    fn end_probe(&self, token: u32, end: FleetProbeEnd) {
        let lease = {
            let mut g = self.lock();
            let at = g.in_use.iter().position(|(t, _)| *t == token);
            at.map(|i| g.in_use.swap_remove(i).1)
        };
        let (Some(lease), Some(link)) = (lease, self.link.get()) else {
            return;
        };
        let end = match end {
            FleetProbeEnd::Success => ProbeEnd::Success,
            FleetProbeEnd::Failure => ProbeEnd::Failure,
            FleetProbeEnd::Neutral => ProbeEnd::Neutral,
        };
        link.end_probe(lease, end);
    }

    fn local_trip(&self, _generation: u32, reason: TransitionReason) {
        self.lock().trip_reason = reason;
        if let Some(link) = self.link.get() {
            link.local_trip(reason);
        }
    }
}
