//! What every transition does, in one place: [`Inner::entered`] (the entry stamp, the
//! deadline or first probe stamp, the open hint, the totals, the `tracing` event, the
//! listeners and the process's watchers), and the cooldown an opening lasts.

use super::{duration_micros, Inner, Write};
use crate::breaker::event::Cause;
use crate::breaker::event::{Transition, TransitionReason};
use crate::breaker::policy::MAX_COOLDOWN;
use crate::breaker::rules;
use crate::breaker::state::{later, micros, State, Word};
use crate::breaker::totals::Counter;
use std::sync::Arc;
use std::time::Duration;

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
    /// The cooldown of open word `w` entered at `since` (µs): [`rules::cooldown`], with a
    /// jitter draw from the entry time and the generation.
    pub(super) fn cooldown(&self, w: Word, since: u64) -> Duration {
        let policy = self.shared.policy.load();
        let draw = if policy.cooldown_jitter > 0.0 {
            unit_draw(since ^ (u64::from(w.generation) << 40))
        } else {
            0.0
        };
        rules::cooldown(&policy, w.streak, draw)
    }

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
        let watched = crate::breaker::watch::active();
        if self.shared.listeners.is_empty() && !watched {
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
        if watched {
            crate::breaker::watch::notify(self.id(), self.key(), &event);
        }
    }
}
