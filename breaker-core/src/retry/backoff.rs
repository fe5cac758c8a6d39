//! Delay computation: the schedule of a [`Backoff`], then the [`Jitter`], then the cap.
//!
//! Why this is its own module: a backoff is the one piece of retry arithmetic that runs on
//! numbers users control (attempt counts, factors, caps), and every well-known retry library
//! has had a crash here: an unchecked multiplication overflowing after a few dozen attempts
//! (djc/tokio-retry#1, case BR-26), a float turned into a `Duration` after it had become
//! infinite (awslabs/aws-sdk-rust#1133, case BR-28), jitter applied after the cap so delays
//! exceeded it (cenkalti/backoff#117, case BR-30), a jitter wider than the delay giving a
//! negative wait (failsafe-lib/failsafe#115, case BR-31).
//!
//! How it avoids all of them: [`Backoff::delay`] is total. For every retry number up to
//! `u32::MAX` and every float input (NaN, infinities, negatives included) it returns a delay in
//! `[0, cap]`: integer arithmetic saturates, the exponential is computed in `f64` nanoseconds
//! and compared with the cap *before* any conversion (a NaN or an infinity fails the comparison
//! and becomes the cap), and the jitter draws inside `[0, cap]` with integer nanoseconds.
//!
//! The random source is a type parameter (`R: rand::Rng`), so tests use a seeded
//! [`SmallRng`](rand::rngs::SmallRng) and get the same delays on every run.

use super::policy::{Backoff, Jitter, RetryPolicy};
use rand::Rng;
use std::time::Duration;

/// The largest delay representable in `u64` nanoseconds (about 584 years); caps beyond it are
/// treated as this.
const MAX_NANOS: u64 = u64::MAX;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(MAX_NANOS)
}

impl Backoff {
    /// The hard ceiling of every delay of this schedule, jitter included: `max` for
    /// [`Linear`](Backoff::Linear) and [`Exponential`](Backoff::Exponential), the delay itself
    /// for [`Fixed`](Backoff::Fixed).
    pub fn cap(&self) -> Duration {
        match *self {
            Backoff::Fixed { delay } => delay,
            Backoff::Linear { max, .. } | Backoff::Exponential { max, .. } => max,
        }
    }

    /// The delay before the first retry, before jitter, capped: the lower bound that
    /// decorrelated jitter draws from.
    pub fn base(&self) -> Duration {
        match *self {
            Backoff::Fixed { delay } => delay,
            Backoff::Linear { base, max, .. } | Backoff::Exponential { base, max, .. } => {
                base.min(max)
            }
        }
    }

    /// The delay before retry number `retry` (1 = the first retry, i.e. before the second
    /// attempt), capped, before jitter. `retry = 0` is treated as 1.
    ///
    /// - `Fixed`: `delay`.
    /// - `Linear`: `min(max, base + step * (retry - 1))`, saturating.
    /// - `Exponential`: `min(max, base * factor^(retry - 1))`, computed in `f64` nanoseconds
    ///   and rounded to the nearest nanosecond. A factor that is NaN or below 1.0 is treated as
    ///   1.0 (constant delay); a result that is infinite or NaN is the cap.
    ///
    /// Never panics, for every input. The result is always in `[0, cap()]`.
    pub fn delay(&self, retry: u32) -> Duration {
        let n = retry.max(1) - 1;
        match *self {
            Backoff::Fixed { delay } => delay,
            Backoff::Linear { base, step, max } => {
                let d = base.saturating_add(step.saturating_mul(n));
                d.min(max)
            }
            Backoff::Exponential { base, factor, max } => {
                let cap = nanos(max);
                let base = nanos(base);
                if base >= cap {
                    return Duration::from_nanos(cap);
                }
                if base == 0 {
                    return Duration::ZERO;
                }
                // `!(x >= 1.0)` is also true for NaN.
                let factor = if factor >= 1.0 { factor } else { 1.0 };
                // powi takes an i32; beyond it the result is the cap anyway (factor > 1) or
                // the base (factor == 1).
                let exp = i32::try_from(n).unwrap_or(i32::MAX);
                let value = base as f64 * factor.powi(exp);
                // NaN and +inf fail `<`, so they become the cap.
                if value < cap as f64 {
                    // value is finite, in [base, cap), so the cast cannot saturate wrongly.
                    Duration::from_nanos((value.round() as u64).min(cap))
                } else {
                    Duration::from_nanos(cap)
                }
            }
        }
    }
}

impl Jitter {
    /// Applies this jitter to the capped delay `delay`, drawing from `rng`.
    ///
    /// `base` and `cap` are the schedule's [`Backoff::base`] and [`Backoff::cap`]; `previous`
    /// is the delay returned for the previous retry (`base` before the first one), used only by
    /// [`Jitter::Decorrelated`]. See [`Jitter`] for every formula.
    ///
    /// Never panics; the result is always in `[0, cap]`, even when `delay`, `base` or
    /// `previous` exceed `cap`.
    pub fn apply<R: Rng + ?Sized>(
        &self,
        delay: Duration,
        base: Duration,
        cap: Duration,
        previous: Duration,
        rng: &mut R,
    ) -> Duration {
        let cap = nanos(cap);
        let d = nanos(delay).min(cap);
        let out = match *self {
            Jitter::None => d,
            Jitter::Full => rng.gen_range(0..=d),
            Jitter::Equal => {
                let half = d / 2;
                half + rng.gen_range(0..=d - half)
            }
            Jitter::Decorrelated => {
                let lo = nanos(base).min(cap);
                let hi = nanos(previous).saturating_mul(3).max(lo);
                rng.gen_range(lo..=hi).min(cap)
            }
            Jitter::Additive { spread } => {
                // d - spread + uniform(0, 2 * spread), in u128 so nothing wraps, then
                // clamped to [0, cap]: draws below zero become zero.
                let spread = u128::from(nanos(spread));
                let offset = rng.gen_range(0..=2 * spread);
                let value = (u128::from(d) + offset).saturating_sub(spread);
                u64::try_from(value.min(u128::from(cap))).unwrap_or(cap)
            }
        };
        Duration::from_nanos(out)
    }
}

/// The delays of a [`RetryPolicy`], one per retry, jitter included: an endless iterator (the
/// attempt limit is the retry loop's business). Create it with [`RetryPolicy::delays`].
///
/// Every item is in `[0, policy.backoff.cap()]`. Past retry number `u32::MAX` the schedule
/// stays at its last value.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::retry::{Backoff, Jitter, RetryPolicy};
/// use rand::{rngs::SmallRng, SeedableRng};
/// use std::time::Duration;
///
/// let policy = RetryPolicy {
///     max_attempts: 5,
///     backoff: Backoff::Exponential {
///         base: Duration::from_secs(1),
///         factor: 2.0,
///         max: Duration::from_secs(5),
///     },
///     jitter: Jitter::None,
/// };
/// let delays: Vec<_> = policy.delays(SmallRng::seed_from_u64(7)).take(5).collect();
/// assert_eq!(delays, [1, 2, 4, 5, 5].map(Duration::from_secs));
/// ```
#[derive(Clone, Debug)]
pub struct Delays<R> {
    backoff: Backoff,
    jitter: Jitter,
    rng: R,
    retry: u32,
    previous: Duration,
}

impl<R: Rng> Delays<R> {
    /// The delays of `backoff` with `jitter`, drawing from `rng`.
    pub fn new(backoff: Backoff, jitter: Jitter, rng: R) -> Self {
        Delays {
            backoff,
            jitter,
            rng,
            retry: 0,
            previous: backoff.base(),
        }
    }

    /// How many delays have been produced so far.
    pub fn retries(&self) -> u32 {
        self.retry
    }
}

impl<R: Rng> Iterator for Delays<R> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.retry = self.retry.saturating_add(1);
        let b = &self.backoff;
        let d = self.jitter.apply(
            b.delay(self.retry),
            b.base(),
            b.cap(),
            self.previous,
            &mut self.rng,
        );
        self.previous = d;
        Some(d)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl RetryPolicy {
    /// The delays between this policy's attempts, drawing jitter from `rng`. See [`Delays`].
    pub fn delays<R: Rng>(&self, rng: R) -> Delays<R> {
        Delays::new(self.backoff, self.jitter, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn exponential_exact_values() {
        let b = Backoff::Exponential {
            base: Duration::from_millis(10),
            factor: 10.0,
            max: Duration::from_secs(60),
        };
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(2), Duration::from_millis(100));
        assert_eq!(b.delay(4), Duration::from_secs(10));
        assert_eq!(b.delay(5), Duration::from_secs(60));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn nan_and_negative_factors_are_constant() {
        for factor in [f64::NAN, -3.0, 0.5, f64::NEG_INFINITY] {
            let b = Backoff::Exponential {
                base: Duration::from_millis(10),
                factor,
                max: Duration::from_secs(1),
            };
            assert_eq!(b.delay(50), Duration::from_millis(10), "factor {factor}");
        }
        let b = Backoff::Exponential {
            base: Duration::from_millis(10),
            factor: f64::INFINITY,
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(2), Duration::from_secs(1));
    }

    #[test]
    fn linear_saturates() {
        let b = Backoff::Linear {
            base: Duration::MAX,
            step: Duration::MAX,
            max: Duration::from_secs(3),
        };
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(3));
    }

    #[test]
    fn decorrelated_stays_in_bounds() {
        let mut d = RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Exponential {
                base: Duration::from_millis(100),
                factor: 2.0,
                max: Duration::from_secs(2),
            },
            jitter: Jitter::Decorrelated,
        }
        .delays(SmallRng::seed_from_u64(1));
        for _ in 0..10_000 {
            let x = d.next().unwrap();
            assert!(
                x >= Duration::from_millis(100) && x <= Duration::from_secs(2),
                "{x:?}"
            );
        }
    }
}
