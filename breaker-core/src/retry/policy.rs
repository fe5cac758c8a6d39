//! The retry policy as plain data: how many attempts, how long to wait between them.
//!
//! "3x" everywhere (DSL, config files, the attribute) means **3 attempts in total**: the first
//! call plus at most 2 retries. `1x` therefore means "no retry".

use std::time::Duration;

/// How the delay before retry `n` (n = 1 for the first retry) grows, before jitter and before
/// the cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backoff {
    /// The same delay before every retry.
    Fixed {
        /// The delay; may be zero (retry at once).
        delay: Duration,
    },
    /// `base + step * (n - 1)`, capped at `max`.
    Linear {
        /// Delay before the first retry.
        base: Duration,
        /// Added for each further retry.
        step: Duration,
        /// Cap on every delay, jitter included.
        max: Duration,
    },
    /// `base * factor^(n - 1)`, capped at `max` (computed in floating point and clamped, so no
    /// attempt number overflows; cases BR-26, BR-28).
    Exponential {
        /// Delay before the first retry.
        base: Duration,
        /// Growth factor per retry; range `1.0..=100.0`.
        factor: f64,
        /// Cap on every delay, jitter included.
        max: Duration,
    },
}

/// How randomness is applied to each delay, after the cap, following the AWS Architecture Blog
/// analysis "Exponential Backoff And Jitter" (Marc Brooker, 2015,
/// <https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/>). `d` is the
/// capped delay of the schedule, `cap` the schedule's cap ([`Backoff::cap`]), `base` its first
/// delay ([`Backoff::base`]); all bounds are inclusive:
///
/// - `None`: `d`.
/// - `Full`: `uniform(0, d)`.
/// - `Equal`: `d/2 + uniform(0, d/2)`.
/// - `Decorrelated`: `min(cap, uniform(base, previous * 3))`, where `previous` is the delay
///   drawn before the previous retry (`base` before the first); it ignores the growth of the
///   schedule and uses only `base` and `cap`, as in the AWS analysis.
/// - `Additive`: `clamp(uniform(d - spread, d + spread), 0, cap)` (a `±spread` jitter; the
///   lower end saturates at zero, so a spread larger than the delay never gives a negative
///   wait; case BR-31).
///
/// Every variant yields a delay in `[0, cap]` (case BR-30): the cap is a hard ceiling, applied
/// after the randomisation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// No randomness.
    #[default]
    None,
    /// Full jitter.
    Full,
    /// Equal jitter.
    Equal,
    /// Decorrelated jitter.
    Decorrelated,
    /// Additive `±spread` jitter, clamped to `[0, cap]`.
    Additive {
        /// Half-width of the uniform interval around the delay.
        spread: Duration,
    },
}

/// A complete retry policy. See the [module docs](crate::retry) for what the attempt count means.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts, the first included. Range `1..=100`; 1 disables retry.
    pub max_attempts: u32,
    /// The delay schedule.
    pub backoff: Backoff,
    /// The randomisation applied to each delay.
    pub jitter: Jitter,
}

impl RetryPolicy {
    /// A policy that makes exactly one attempt.
    pub const NONE: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        backoff: Backoff::Fixed {
            delay: Duration::ZERO,
        },
        jitter: Jitter::None,
    };
}

impl Default for RetryPolicy {
    /// 3 attempts, exponential backoff from 100 ms with factor 2 capped at 10 s, no jitter:
    /// what `"3x"` means in the DSL and an empty `retry` table in a config file (the one
    /// defaults table is [`crate::policy::defaults`]).
    fn default() -> Self {
        super::defaults::RETRY
    }
}
