//! [`RateLimitPolicy`]: a rate, a burst and a wait, and their ranges.

use super::InvalidRateLimit;
use std::fmt;
use std::time::Duration;

/// Largest `burst` of a rate limit.
pub const MAX_BURST: u32 = 1_000_000;

/// A rate limit: `rate` permits per `per`, at most `burst` at once, and how long a call may
/// wait for a permit.
///
/// The limiter is GCRA (the generic cell rate algorithm): a permit is due every
/// `per / rate` (the *emission interval*), and a call may come up to `burst - 1` intervals
/// early. So `rate = 100, per = 1s, burst = 1` admits one call every 10 ms, perfectly smooth;
/// `burst = 20` lets 20 calls through at once after a quiet spell, then one every 10 ms. Over
/// any window of length `w`, at most `burst + w × rate / per` calls are admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimitPolicy {
    /// Permits per `per`. Range `1..`; `per / rate` must be at least one nanosecond.
    pub rate: u32,
    /// The period of `rate`, non-zero (`1s` for "per second").
    pub per: Duration,
    /// Permits that may be taken at once after a quiet spell. Range `1..=1_000_000`; 1 is
    /// perfectly smooth.
    pub burst: u32,
    /// How long a call may wait for a permit before it is rejected; zero (the default)
    /// rejects at once. A call whose permit would come later than this is rejected at once
    /// rather than after waiting in vain.
    pub max_wait: Duration,
    /// Whether each key has its own limit (`per key` in the DSL): a caller with keys
    /// (`#[circuit_breaker(key = ..)]`, a keyed config use, [`RateLimiters`](super::RateLimiters))
    /// gives every key a limiter of this policy, from a bounded registry. `false` (the
    /// default): one limit shared by every call, whatever its key. A single
    /// [`RateLimiter`](super::RateLimiter) is one limit whatever this says.
    pub per_key: bool,
}

impl RateLimitPolicy {
    /// `rate` permits per `per`, with a burst of `rate` (the convention of the `governor`
    /// crate's `Quota::per_second`: a second's worth of permits at once) and no wait.
    pub const fn new(rate: u32, per: Duration) -> Self {
        RateLimitPolicy {
            rate,
            per,
            burst: if rate == 0 { 1 } else { rate },
            max_wait: Duration::ZERO,
            per_key: false,
        }
    }

    /// `rate` permits per second ([`new`](Self::new) with `per = 1s`).
    pub const fn per_second(rate: u32) -> Self {
        RateLimitPolicy::new(rate, Duration::from_secs(1))
    }

    /// This policy with `burst` permits at once.
    pub const fn burst(self, burst: u32) -> Self {
        RateLimitPolicy { burst, ..self }
    }

    /// This policy with a wait of up to `max_wait` for a permit.
    pub const fn max_wait(self, max_wait: Duration) -> Self {
        RateLimitPolicy { max_wait, ..self }
    }

    /// This policy with one limit per key (see the `per_key` field).
    pub const fn per_key(self) -> Self {
        RateLimitPolicy {
            per_key: true,
            ..self
        }
    }

    /// The time after its last permit at which a limiter of this policy has its whole burst
    /// back, and so is the same as a new one: `(burst + 1) × interval` (one interval more
    /// than GCRA needs, for the rounding of the clock). `None` if the policy is invalid.
    pub fn refill(&self) -> Option<Duration> {
        self.interval()?.checked_mul(self.burst.checked_add(1)?)
    }

    /// The emission interval `per / rate`: one permit is due every interval. `None` when
    /// `rate` is zero or the interval rounds down to zero nanoseconds.
    pub fn interval(&self) -> Option<Duration> {
        let interval = self.per.checked_div(self.rate)?;
        (!interval.is_zero()).then_some(interval)
    }

    /// Every value out of range, each as a message that names it (empty when valid): `rate`
    /// at least 1, `per` non-zero, `per / rate` at least 1 ns, `burst` in `1..=1_000_000`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.rate == 0 {
            problems.push(
                "`rate` must be at least 1 permit per period, got 0 (to stop every call, open \
                 the breaker instead)"
                    .to_owned(),
            );
        }
        if self.per.is_zero() {
            problems.push("`per` must be a non-zero period, got 0s".to_owned());
        }
        if self.rate != 0 && !self.per.is_zero() && self.interval().is_none() {
            problems.push(format!(
                "{} per {:?} is more than one permit per nanosecond; lower the rate or lengthen \
                 the period",
                self.rate, self.per
            ));
        }
        if !(1..=MAX_BURST).contains(&self.burst) {
            problems.push(format!(
                "`burst` must be in 1..={MAX_BURST}, got {}",
                self.burst
            ));
        }
        problems
    }

    /// Checks the ranges of [`problems`](Self::problems).
    ///
    /// # Errors
    /// [`InvalidRateLimit`] listing every value out of range.
    pub fn validate(&self) -> Result<(), InvalidRateLimit> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidRateLimit { problems })
        }
    }
}

impl fmt::Display for RateLimitPolicy {
    /// The DSL's canonical form (see [`crate::dsl`]): `100/s burst 20 wait 50ms per key`,
    /// the wait only when non-zero, `per key` only when set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One of a unit is the bare unit: `100/s`, `5/100ms`.
        let per = crate::syntax::compact(self.per);
        let per = match per.strip_prefix('1') {
            Some(unit) if !unit.is_empty() && unit.bytes().all(|b| b.is_ascii_alphabetic()) => unit,
            _ => &per,
        };
        write!(f, "{}/{per} burst {}", self.rate, self.burst)?;
        if !self.max_wait.is_zero() {
            write!(f, " wait {}", crate::syntax::fmt_duration(self.max_wait))?;
        }
        if self.per_key {
            f.write_str(" per key")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_named_at_once() {
        let p = RateLimitPolicy {
            rate: 0,
            per: Duration::ZERO,
            burst: 0,
            max_wait: Duration::ZERO,
            per_key: false,
        };
        let problems = p.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("`rate` must be at least 1"));
        assert_eq!(problems[1], "`per` must be a non-zero period, got 0s");
        assert_eq!(problems[2], "`burst` must be in 1..=1000000, got 0");
        let too_fast = RateLimitPolicy::new(2_000_000_000, Duration::from_secs(1)).burst(1);
        assert_eq!(
            too_fast.problems(),
            [
                "2000000000 per 1s is more than one permit per nanosecond; lower the rate or \
              lengthen the period"
            ]
        );
        assert_eq!(
            RateLimitPolicy::per_second(100).problems(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn interval_and_display() {
        let p = RateLimitPolicy::per_second(100).burst(20);
        assert_eq!(p.interval(), Some(Duration::from_millis(10)));
        assert_eq!(p.to_string(), "100/s burst 20");
        assert_eq!(
            RateLimitPolicy::new(5, Duration::from_millis(100)).to_string(),
            "5/100ms burst 5"
        );
        assert_eq!(
            RateLimitPolicy::new(5, Duration::from_secs(10)).to_string(),
            "5/10s burst 5"
        );
        assert_eq!(
            RateLimitPolicy::new(5, Duration::from_secs(60)).to_string(),
            "5/m burst 5"
        );
        assert_eq!(
            p.max_wait(Duration::from_millis(50)).to_string(),
            "100/s burst 20 wait 50ms"
        );
        assert_eq!(p.per_key().to_string(), "100/s burst 20 per key");
        assert_eq!(p.refill(), Some(Duration::from_millis(210)));
    }
}
