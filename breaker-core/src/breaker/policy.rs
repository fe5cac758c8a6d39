//! The breaker's policy: when it trips, how long it stays open, how it probes.
//!
//! A [`BreakerPolicy`] is plain data. The same type is built by hand, parsed from the policy DSL,
//! read from config files and checked by the `#[circuit_breaker]` attribute at compile time, and
//! [`BreakerPolicy::validate`] is the one validator all of those paths share.

use crate::field::Field;
use std::time::Duration;

/// Which calls make up the sliding window that failure-rate and slow-call rules look at.
///
/// The semantics follow Resilience4j's `slidingWindowType`:
/// - [`SlidingWindow::Count`]: the last `n` recorded calls (a ring buffer of `n` outcomes).
/// - [`SlidingWindow::Time`]: the calls recorded in the last `length`, kept in `buckets` equal
///   buckets; a whole bucket drops out at once when it ages past `length`, so the window slides
///   in steps of `length / buckets`.
///
/// Ignored outcomes and cancellations never enter a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlidingWindow {
    /// The last `n` calls. Valid range: `1..=1_000_000`.
    Count(u32),
    /// The calls of the last `length`, in `buckets` buckets.
    ///
    /// Buckets are picked with the breaker's coarse clock where it has one (the default
    /// system clock on Linux reads `CLOCK_MONOTONIC_COARSE`), so a bucket edge may fall up to
    /// one tick of that clock (a few milliseconds) late; with the tokio, manual and custom
    /// clocks the edges are exact. Slow calls are always timed with the precise clock.
    Time {
        /// Window length; valid range 1 ms ..= 1 day.
        length: Duration,
        /// Number of buckets; valid range `1..=600`, and `length / buckets` must be at least 1 ms.
        buckets: u32,
    },
}

impl SlidingWindow {
    /// The default bucket count of a time window.
    pub const DEFAULT_BUCKETS: u32 = 10;
}

/// The slow-call rule: a call that takes at least `duration` (from admission to its recorded
/// outcome) is *slow*, whether it succeeded or failed; the breaker trips when the share of slow
/// calls in the window reaches `rate_percent` (Resilience4j's `slowCallDurationThreshold` and
/// `slowCallRateThreshold`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowCall {
    /// Calls taking at least this long are slow. Must be non-zero.
    pub duration: Duration,
    /// Trip when slow calls are at least this percentage of the window; range `(0, 100]`.
    pub rate_percent: f64,
}

/// What a half-open probe that ends *ignored* (neither success nor failure, for example a 404
/// classified as ignored) means for the breaker (case BR-08).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NeutralProbe {
    /// The default, and the safe choice: the probe's slot is released, nothing is counted and no
    /// transition happens; the next call is admitted as a probe.
    #[default]
    Release,
    /// The dependency answered, so the probe counts as a success toward closing.
    CountAsSuccess,
}

/// The complete policy of one circuit breaker. See the [module docs](crate::breaker).
///
/// Every rule that is set can trip the breaker; at least one of `consecutive_failures`,
/// `failure_rate_percent` and `slow_call` must be set. Thresholds are compared with `>=` after
/// every recorded outcome; rate rules apply only once the window holds at least `min_calls`
/// calls.
///
/// The [`Default`] is: trip after 5 consecutive failures, stay open 30 s (no growth, no jitter),
/// admit 1 probe, close after 1 successful probe, a count window of 100 calls with a minimum of
/// 100 calls (used only if a rate rule is added).
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerPolicy {
    /// Trip after this many failures in a row while closed (a success resets the count).
    /// Range `1..=u32::MAX`.
    pub consecutive_failures: Option<u32>,
    /// Trip when failures are at least this percentage of the window. Range `(0, 100]`.
    pub failure_rate_percent: Option<f64>,
    /// Trip when slow calls reach a share of the window.
    pub slow_call: Option<SlowCall>,
    /// The window that rate rules look at.
    pub window: SlidingWindow,
    /// Rate rules are not evaluated before the window holds this many calls (case BR-17).
    /// Range `1..=n` for a count window of `n` calls (case BR-18), `1..=u32::MAX` for a time
    /// window.
    pub min_calls: u32,
    /// How long the breaker stays open before it admits a probe. Range: non-zero, at most
    /// [`MAX_COOLDOWN`] (365 days).
    pub cooldown: Duration,
    /// Each time a probe fails and the breaker re-opens, the cooldown is multiplied by this
    /// factor (1.0 = constant). Range `1.0..=1000.0`.
    pub cooldown_multiplier: f64,
    /// Upper bound of the grown cooldown, read only when `cooldown_multiplier` is above 1.0,
    /// and then in `cooldown..=`[`MAX_COOLDOWN`].
    ///
    /// With a constant cooldown (multiplier 1.0) it is ignored and not checked, even below
    /// `cooldown` or zero: the cooldown never grows, so there is nothing to cap, and the
    /// breaker stays open exactly `cooldown` every time. Checking it would make a policy
    /// written as `BreakerPolicy { cooldown, ..Default::default() }` (whose `cooldown_max` is
    /// the default 30 s) invalid for every cooldown above 30 s.
    pub cooldown_max: Duration,
    /// Jitter as a fraction of the cooldown: the actual cooldown is drawn uniformly from
    /// `[d * (1 - jitter), d]`, so it never exceeds `cooldown_max`. Range `0.0..=1.0`.
    pub cooldown_jitter: f64,
    /// At most this many probes in flight in half-open. Range `1..=65_535`.
    pub half_open_probes: u32,
    /// Close after this many successful probes. Range `1..=8_191`.
    pub successes_to_close: u32,
    /// A half-open breaker whose probe slots are all taken admits one more probe once the
    /// newest probe has been outstanding this long (a hung probe must not wedge the breaker;
    /// case BR-04), in the same half-open period: the held probes' late results still count (a
    /// late success towards closing, a late failure re-opens). So at most `half_open_probes`
    /// probes are admitted within any probe wait. `None` means "the current cooldown". Range:
    /// non-zero, at most [`MAX_COOLDOWN`] (365 days).
    pub max_probe_wait: Option<Duration>,
    /// What an ignored probe outcome means.
    pub neutral_probe: NeutralProbe,
}

pub use crate::field::{FieldError, ValidationError};

/// Largest count window accepted.
pub const MAX_COUNT_WINDOW: u32 = 1_000_000;
/// Largest number of half-open probes accepted.
pub const MAX_HALF_OPEN_PROBES: u32 = 65_535;
/// Largest `successes_to_close` accepted.
pub const MAX_SUCCESSES_TO_CLOSE: u32 = 8_191;
/// Longest `cooldown` accepted, and longest `cooldown_max` (when the cooldown grows) and
/// `max_probe_wait`: 365 days. A breaker keeps its deadlines in microseconds on a 48-bit circle
/// (about 8.9 years around, spans told apart up to about 4.46 years); the bound keeps every
/// deadline well inside that, so a long cooldown can never wrap into an early admission.
pub const MAX_COOLDOWN: Duration = Duration::from_secs(365 * 86_400);

pub(crate) fn check_percent(errors: &mut Vec<FieldError>, field: Field, p: f64) {
    if !(p > 0.0 && p <= 100.0) {
        errors.push(FieldError::new(
            field,
            format!("must be a percentage in (0, 100], got {p}"),
        ));
    }
}

impl BreakerPolicy {
    /// Checks every field and every cross-field rule, and returns all violations at once.
    ///
    /// # Errors
    /// A [`ValidationError`] listing each invalid field, for example `consecutive_failures` of
    /// 0, a rate of 0% or above 100%, a zero cooldown or one above [`MAX_COOLDOWN`] (365 days),
    /// `min_calls` larger than a count window (BR-18), or no trip rule at all.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let mut errors = Vec::new();
        // A macro, not a closure: a closure would hold `errors` borrowed between its uses.
        macro_rules! push {
            ($field:expr, $message:expr $(,)?) => {{
                let message: String = $message;
                errors.push(FieldError::new($field, message))
            }};
        }
        if self.consecutive_failures.is_none()
            && self.failure_rate_percent.is_none()
            && self.slow_call.is_none()
        {
            errors.push(
                FieldError::new(
                    Field::ConsecutiveFailures,
                    "no trip rule: set `consecutive_failures`, `failure_rate` or `slow_call`",
                )
                .reading(&[
                    Field::FailureRate,
                    Field::SlowCallDuration,
                    Field::SlowCallRate,
                ]),
            );
        }
        if self.consecutive_failures == Some(0) {
            push!(
                Field::ConsecutiveFailures,
                "must be at least 1, got 0".into(),
            );
        }
        match self.window {
            SlidingWindow::Count(n) => {
                if n == 0 || n > MAX_COUNT_WINDOW {
                    push!(
                        Field::Window,
                        format!("count window must hold 1..={MAX_COUNT_WINDOW} calls, got {n}"),
                    );
                } else if self.min_calls > n {
                    errors.push(
                        FieldError::new(
                            Field::MinCalls,
                            format!(
                                "min_calls ({}) must be <= the count window size ({n}); \
                                 the window can never hold more than {n} calls",
                                self.min_calls
                            ),
                        )
                        .reading(&[Field::Window]),
                    );
                }
            }
            SlidingWindow::Time { length, buckets } => {
                if length < Duration::from_millis(1) || length > Duration::from_secs(86_400) {
                    push!(
                        Field::Window,
                        format!("time window length must be in 1ms..=1day, got {length:?}"),
                    );
                }
                if buckets == 0 || buckets > 600 {
                    push!(
                        Field::Window,
                        format!("time window needs 1..=600 buckets, got {buckets}"),
                    );
                } else if length / buckets < Duration::from_millis(1) {
                    push!(
                        Field::Window,
                        format!("time window buckets must be at least 1ms long ({length:?} / {buckets})"),
                    );
                }
            }
        }
        if self.min_calls == 0 {
            push!(Field::MinCalls, "must be at least 1, got 0".into());
        }
        let mut rate_errors = Vec::new();
        if let Some(p) = self.failure_rate_percent {
            check_percent(&mut rate_errors, Field::FailureRate, p);
        }
        if let Some(slow) = self.slow_call {
            check_percent(&mut rate_errors, Field::SlowCallRate, slow.rate_percent);
            if slow.duration.is_zero() {
                rate_errors.push(FieldError::new(Field::SlowCallDuration, "must be non-zero"));
            }
        }
        if self.cooldown.is_zero() {
            rate_errors.push(FieldError::new(
                Field::Cooldown,
                "must be non-zero, got 0s (a breaker that never stays open protects nothing)",
            ));
        }
        if self.cooldown > MAX_COOLDOWN {
            rate_errors.push(FieldError::new(
                Field::Cooldown,
                format!(
                    "must be at most 365 days ({MAX_COOLDOWN:?}), got {:?}",
                    self.cooldown
                ),
            ));
        }
        errors.append(&mut rate_errors);
        if !(self.cooldown_multiplier >= 1.0 && self.cooldown_multiplier <= 1000.0) {
            push!(
                Field::CooldownMultiplier,
                format!("must be in 1.0..=1000.0, got {}", self.cooldown_multiplier),
            );
        }
        // Both read `cooldown_multiplier` (only a growing cooldown has a maximum), and a
        // config file's default `cooldown_max` is computed from `cooldown` and it.
        const COOLDOWN_GROUP: &[Field] = &[Field::Cooldown, Field::CooldownMultiplier];
        if self.cooldown_multiplier != 1.0 && self.cooldown_max < self.cooldown {
            let message = format!(
                "must be >= cooldown ({:?}), got {:?}",
                self.cooldown, self.cooldown_max
            );
            errors.push(FieldError::new(Field::CooldownMax, message).reading(COOLDOWN_GROUP));
        } else if self.cooldown_multiplier != 1.0 && self.cooldown_max > MAX_COOLDOWN {
            let message = format!(
                "must be at most 365 days ({MAX_COOLDOWN:?}), got {:?}",
                self.cooldown_max
            );
            errors.push(FieldError::new(Field::CooldownMax, message).reading(COOLDOWN_GROUP));
        }
        if !(0.0..=1.0).contains(&self.cooldown_jitter) {
            push!(
                Field::CooldownJitter,
                format!(
                    "must be a fraction in 0.0..=1.0, got {}",
                    self.cooldown_jitter
                ),
            );
        }
        if self.half_open_probes == 0 || self.half_open_probes > MAX_HALF_OPEN_PROBES {
            push!(
                Field::HalfOpenProbes,
                format!(
                    "must be in 1..={MAX_HALF_OPEN_PROBES}, got {}",
                    self.half_open_probes
                ),
            );
        }
        if self.successes_to_close == 0 || self.successes_to_close > MAX_SUCCESSES_TO_CLOSE {
            push!(
                Field::SuccessesToClose,
                format!(
                    "must be in 1..={MAX_SUCCESSES_TO_CLOSE}, got {}",
                    self.successes_to_close
                ),
            );
        }
        if self.max_probe_wait == Some(Duration::ZERO) {
            push!(Field::MaxProbeWait, "must be non-zero".into());
        } else if let Some(wait) = self.max_probe_wait.filter(|w| *w > MAX_COOLDOWN) {
            push!(
                Field::MaxProbeWait,
                format!("must be at most 365 days ({MAX_COOLDOWN:?}), got {wait:?}"),
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { errors })
        }
    }

    /// Whether any rule needs the sliding window.
    pub(crate) fn uses_window(&self) -> bool {
        self.failure_rate_percent.is_some() || self.slow_call.is_some()
    }

    /// The cooldown after the `streak`-th consecutive opening (1 = the first trip), before
    /// jitter: `min(cooldown * multiplier^(streak-1), cooldown_max)`, computed in floating point
    /// and clamped, so it never overflows.
    pub fn cooldown_for(&self, streak: u32) -> Duration {
        let exp = streak.saturating_sub(1).min(1024) as i32;
        let base = self.cooldown.as_secs_f64();
        let grown = base * self.cooldown_multiplier.powi(exp);
        let max = self.cooldown_max.max(self.cooldown);
        if !grown.is_finite() || grown >= max.as_secs_f64() {
            max
        } else {
            Duration::try_from_secs_f64(grown).unwrap_or(max).min(max)
        }
    }
}

#[cfg(test)]
mod tests;
