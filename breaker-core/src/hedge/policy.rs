//! [`HedgePolicy`]: when to start another attempt, and how many.

use super::InvalidHedge;
use std::fmt;
use std::time::Duration;

/// Most hedges a policy may start beyond the first attempt.
pub const MAX_HEDGES: u32 = 10;

/// How long to wait for an attempt before starting the next one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeDelay {
    /// Always this long. Non-zero.
    Fixed(Duration),
    /// A percentile of the latency of recent attempts (the last 256 that completed), clamped
    /// to `min..=max`: "start a hedge when this attempt is slower than 95% of recent ones".
    /// Until 64 attempts have completed the delay is `max`.
    Percentile {
        /// The percentile, in `50.0..=99.9`.
        percentile: f64,
        /// The shortest delay. Non-zero.
        min: Duration,
        /// The longest delay, at least `min`.
        max: Duration,
    },
}

/// Hedging: after [`delay`](Self::delay) without a result, start another attempt, up to
/// `max_hedges` more; the first acceptable result wins and the other attempts are cancelled.
/// See the [module docs](super).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgePolicy {
    /// When to start each further attempt.
    pub delay: HedgeDelay,
    /// Attempts beyond the first, in `1..=10`: at most `1 + max_hedges` attempts in flight.
    pub max_hedges: u32,
}

impl HedgePolicy {
    /// One hedge after a fixed `delay`.
    pub const fn after(delay: Duration) -> Self {
        HedgePolicy {
            delay: HedgeDelay::Fixed(delay),
            max_hedges: 1,
        }
    }

    /// One hedge after the `percentile` of recent latencies, clamped to `min..=max`.
    pub const fn percentile(percentile: f64, min: Duration, max: Duration) -> Self {
        HedgePolicy {
            delay: HedgeDelay::Percentile {
                percentile,
                min,
                max,
            },
            max_hedges: 1,
        }
    }

    /// This policy with up to `max_hedges` attempts beyond the first.
    pub const fn max_hedges(self, max_hedges: u32) -> Self {
        HedgePolicy { max_hedges, ..self }
    }

    /// Every value out of range, each as a message naming it (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        match self.delay {
            HedgeDelay::Fixed(d) if d.is_zero() => problems.push(
                "the hedge `delay` must be non-zero, got 0s (a zero delay sends every call \
                 twice at once)"
                    .to_owned(),
            ),
            HedgeDelay::Fixed(_) => {}
            HedgeDelay::Percentile {
                percentile,
                min,
                max,
            } => {
                if !(50.0..=99.9).contains(&percentile) {
                    problems.push(format!(
                        "the hedge percentile must be in 50.0..=99.9, got {percentile}"
                    ));
                }
                if min.is_zero() {
                    problems.push("the hedge delay's `min` must be non-zero, got 0s".to_owned());
                }
                if max < min {
                    problems.push(format!(
                        "the hedge delay's `max` ({}) must be >= its `min` ({})",
                        humantime::format_duration(max),
                        humantime::format_duration(min)
                    ));
                }
            }
        }
        if !(1..=MAX_HEDGES).contains(&self.max_hedges) {
            problems.push(format!(
                "`max_hedges` must be in 1..={MAX_HEDGES} (attempts beyond the first), got {}",
                self.max_hedges
            ));
        }
        problems
    }

    /// Checks the ranges of [`problems`](Self::problems).
    ///
    /// # Errors
    /// [`InvalidHedge`] listing every value out of range.
    pub fn validate(&self) -> Result<(), InvalidHedge> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidHedge { problems })
        }
    }
}

impl fmt::Display for HedgePolicy {
    /// The DSL's canonical form (see [`crate::dsl`]): `1x after 50ms`,
    /// `2x after p95 in 10ms..200ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x after ", self.max_hedges)?;
        match self.delay {
            HedgeDelay::Fixed(d) => write!(f, "{}", crate::syntax::fmt_duration(d)),
            HedgeDelay::Percentile {
                percentile,
                min,
                max,
            } => write!(
                f,
                "p{percentile} in {}..{}",
                crate::syntax::compact(min),
                crate::syntax::compact(max)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_at_once() {
        let p = HedgePolicy {
            delay: HedgeDelay::Percentile {
                percentile: 20.0,
                min: Duration::from_millis(50),
                max: Duration::from_millis(10),
            },
            max_hedges: 0,
        };
        assert_eq!(
            p.problems(),
            [
                "the hedge percentile must be in 50.0..=99.9, got 20",
                "the hedge delay's `max` (10ms) must be >= its `min` (50ms)",
                "`max_hedges` must be in 1..=10 (attempts beyond the first), got 0",
            ]
        );
        assert!(HedgePolicy::after(Duration::ZERO).validate().is_err());
        assert_eq!(
            HedgePolicy::percentile(95.0, Duration::from_millis(10), Duration::from_millis(200))
                .max_hedges(2)
                .to_string(),
            "2x after p95 in 10ms..200ms"
        );
    }
}
