//! What a breaker policy that leaves something out means. The one table of every layer's
//! defaults is [`crate::policy::defaults`], which lists these.

use super::policy::{BreakerPolicy, NeutralProbe, SlidingWindow};
use std::time::Duration;

impl Default for BreakerPolicy {
    /// Trip after 5 consecutive failures, stay open 30 s (no growth, no jitter), then let one
    /// probe through and close on its success; the window (unused by this rule) is a count
    /// window of 100 calls.
    fn default() -> Self {
        BreakerPolicy {
            consecutive_failures: Some(5),
            failure_rate_percent: None,
            slow_call: None,
            window: SlidingWindow::Count(100),
            min_calls: 100,
            cooldown: Duration::from_secs(30),
            cooldown_multiplier: 1.0,
            cooldown_max: Duration::from_secs(30),
            cooldown_jitter: 0.0,
            half_open_probes: 1,
            successes_to_close: 1,
            max_probe_wait: None,
            neutral_probe: NeutralProbe::Release,
        }
    }
}

/// The cap of a breaker's cooldown written without one: the cooldown itself when it does not
/// grow (`multiplier` 1), else 10 × the cooldown.
pub fn cooldown_max(cooldown: Duration, multiplier: f64) -> Duration {
    if multiplier == 1.0 {
        cooldown
    } else {
        cooldown.saturating_mul(10)
    }
}

/// `min_calls` of a time window when none is given. (A count window's default is its size: the
/// rate is judged once the window is full.)
pub const TIME_WINDOW_MIN_CALLS: u32 = 10;

/// The `min_calls` a window gets when none is given: the size of a count window,
/// [`TIME_WINDOW_MIN_CALLS`] for a time window.
pub fn default_min_calls(window: SlidingWindow) -> u32 {
    match window {
        SlidingWindow::Count(n) => n,
        SlidingWindow::Time { .. } => TIME_WINDOW_MIN_CALLS,
    }
}
