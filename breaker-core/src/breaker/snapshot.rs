//! [`Snapshot`]: a point-in-time view of a breaker.

use super::state::State;
use super::totals::Totals;
use super::window::WindowCounts;
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
