//! [`ThrottlePolicy`]: the rule's `K` and its window.

use super::InvalidThrottle;
use std::fmt;
use std::time::Duration;

/// The shortest window of a throttling policy.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window of a throttling policy.
pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// Client-side adaptive throttling (Google SRE book, chapter 21, "Handling Overload"): over
/// the last `window`, with `requests` the calls attempted (locally rejected ones included) and
/// `accepts` those the dependency accepted, a call is rejected locally with probability
/// `max(0, (requests - K × accepts) / (requests + 1))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThrottlePolicy {
    /// The multiplier: the client sends up to `K` requests per accepted one before it starts
    /// rejecting. Range `1.0..=10.0`; the book's 2.0 by default (1.1 is aggressive, rejecting
    /// almost as soon as the dependency does).
    pub k: f64,
    /// The window the counts span, `1s..=1h`; the book's 2 minutes by default. Kept in 16
    /// buckets, so it slides by a sixteenth of itself.
    pub window: Duration,
}

impl Default for ThrottlePolicy {
    /// `K = 2` over 2 minutes, the book's values.
    fn default() -> Self {
        ThrottlePolicy {
            k: 2.0,
            window: Duration::from_secs(120),
        }
    }
}

impl ThrottlePolicy {
    /// Every value out of range, each as a message naming it (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(1.0..=10.0).contains(&self.k) {
            problems.push(format!(
                "`k` must be in 1.0..=10.0 (below 1 the client would reject calls a healthy \
                 dependency accepts), got {}",
                self.k
            ));
        }
        if !(MIN_WINDOW..=MAX_WINDOW).contains(&self.window) {
            problems.push(format!(
                "`window` must be in 1s..=1h, got {}",
                humantime::format_duration(self.window)
            ));
        }
        problems
    }

    /// Checks the ranges of [`problems`](Self::problems).
    ///
    /// # Errors
    /// [`InvalidThrottle`] listing every value out of range.
    pub fn validate(&self) -> Result<(), InvalidThrottle> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidThrottle { problems })
        }
    }
}

impl fmt::Display for ThrottlePolicy {
    /// The DSL's canonical form (see [`crate::dsl`]): `k 2 over 2m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "k {} over {}",
            self.k,
            crate::syntax::fmt_duration(self.window)
        )
    }
}
