//! [`Snapshot`]: a point-in-time view of a breaker.

use super::machine::Inner;
use super::state::{micros, span, unpack_stamp, State, Word};
use super::totals::{Striped, Totals};
use super::window::WindowCounts;
use crate::sync::Ordering;
use std::time::Duration;

/// A point-in-time view of a breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The state (open is reported as open even if its cooldown has ended and no call has yet
    /// promoted it to half-open).
    pub state: State,
    /// The generation (transitions so far, wrapping at 2^24).
    pub generation: u32,
    /// How long the breaker has been in this state.
    pub time_in_state: Duration,
    /// When open: how long until a probe may be admitted.
    pub retry_after: Option<Duration>,
    /// Consecutive failures in the current closed period.
    pub consecutive_failures: u32,
    /// The window of the current closed period (zero if the policy has no rate rule).
    pub window: WindowCounts,
    /// Half-open: probes in flight.
    pub probes_in_flight: u32,
    /// Half-open: successful probes so far.
    pub probe_successes: u32,
    /// Lifetime totals, if kept: `None` unless the breaker was built with
    /// [`BreakerBuilder::totals(true)`](super::BreakerBuilder::totals) (they are off by
    /// default) or comes from a [`Registry`](crate::registry::Registry) with `.totals(true)`.
    pub totals: Option<Totals>,
}

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
            let window = match self.heavy.as_ref().and_then(|h| h.window.as_ref()) {
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
                .heavy
                .as_ref()
                .and_then(|h| h.totals.as_ref())
                .map(Striped::sum),
        }
    }
}
