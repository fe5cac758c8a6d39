//! The read-only view of a breaker ([`Snapshot`]).

use super::Inner;
use crate::breaker::snapshot::Snapshot;
use crate::breaker::state::{micros, span, unpack_stamp, State, Word};
use crate::breaker::totals::Striped;
use crate::breaker::window::WindowCounts;
use crate::sync::Ordering;
use std::time::Duration;

/// A span in microseconds as a duration, negative spans (a reading that went backwards) as zero.
fn non_negative(micros: i64) -> Duration {
    Duration::from_micros(micros.max(0) as u64)
}

impl Inner {
    /// A read-only view: it writes nothing (a missing stamp reads as "just entered").
    pub(crate) fn snapshot(&self) -> Snapshot {
        let w = Word::decode(self.state.load(Ordering::Acquire));
        let now = self.shared.clock.now_nanos();
        let now_us = micros(now);
        let time_in_state = unpack_stamp(self.since.load(Ordering::Acquire), w.generation)
            .map(|t| non_negative(span(t, now_us)))
            .unwrap_or_default();
        let retry_after = (w.state == State::Open).then(|| {
            unpack_stamp(self.at.load(Ordering::Acquire), w.generation)
                .map(|until| non_negative(span(now_us, until)))
                .unwrap_or_else(|| self.shared.policy.load().cooldown_for(w.streak))
        });
        let (consecutive_failures, window) = if w.state == State::Closed {
            let window = match self.heavy().and_then(|h| h.window.as_ref()) {
                Some(slot) => slot.counts(&self.shared, w.generation),
                None => WindowCounts::default(),
            };
            (self.consecutive_failures(w.generation), window)
        } else {
            (0, WindowCounts::default())
        };
        let half_open = w.state == State::HalfOpen;
        Snapshot {
            state: w.state,
            generation: w.generation,
            time_in_state,
            retry_after,
            consecutive_failures,
            window,
            probes_in_flight: if half_open { w.in_flight } else { 0 },
            probe_successes: if half_open { w.successes } else { 0 },
            totals: self
                .heavy()
                .and_then(|h| h.totals.as_ref())
                .map(Striped::sum),
        }
    }
}
