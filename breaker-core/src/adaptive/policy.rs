//! [`AdaptiveLimitPolicy`] and its algorithms, with their ranges.

use super::InvalidAdaptiveLimit;
use crate::bulkhead::MAX_CONCURRENT;
use std::fmt;
use std::time::Duration;

/// How the limit moves. Both follow Netflix's `concurrency-limits` library (whose names and
/// defaults they keep); see the [module docs](super).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum LimitAlgorithm {
    /// Additive increase, multiplicative decrease (TCP's congestion control; Netflix
    /// `AIMDLimit`). A call that failed, timed out or took longer than `slow_call` is a
    /// *drop*: the limit becomes `limit × backoff_ratio` (rounded down, not below the floor).
    /// Any other call raises the limit by one, if at least half of it was in use (a limit
    /// that was not needed is not raised).
    Aimd {
        /// The factor applied at a drop. Range `0.5..1.0`; Netflix's default 0.9.
        backoff_ratio: f64,
        /// A call slower than this is a drop, as a failure is. Non-zero; Netflix's default 5s.
        slow_call: Duration,
    },
    /// The gradient of latency (Netflix `Gradient2Limit`): the limit follows the ratio of the
    /// long-term average latency to the latest one. When calls slow down (the latest latency
    /// rises above `tolerance` × the long-term average), the limit shrinks by that ratio (at
    /// most by half per sample); when they stay fast it grows by `queue_size` per sample. The
    /// change is smoothed, and the long-term average forgets fast when latency falls. A
    /// lasting new latency becomes the long-term average within about `long_window` samples,
    /// and the limit then grows again. A sample is judged only while at least half the limit
    /// is in use (as Netflix's: a limit the calls do not reach is not theirs to judge), so a
    /// limit above twice the calls in flight holds still whatever their latency.
    Gradient2 {
        /// How far above the long-term average the latency may rise before the limit
        /// shrinks. Range `1.0..=10.0`; Netflix's default 1.5.
        tolerance: f64,
        /// The weight of a new estimate against the current limit. Range `0.0 < s <= 1.0`;
        /// Netflix's default 0.2.
        smoothing: f64,
        /// The number of samples the long-term average spans (its exponential window).
        /// Range `1..=100_000`; Netflix's default 600.
        long_window: u32,
        /// How much the limit may grow per sample while latency holds. Range `0..=1000`;
        /// Netflix's default 4.
        queue_size: u32,
    },
}

impl LimitAlgorithm {
    /// AIMD with Netflix's defaults: backoff ratio 0.9, slow call 5s.
    pub const AIMD: LimitAlgorithm = LimitAlgorithm::Aimd {
        backoff_ratio: 0.9,
        slow_call: Duration::from_secs(5),
    };

    /// Gradient2 with Netflix's defaults: tolerance 1.5, smoothing 0.2, a long window of 600
    /// samples, queue size 4.
    pub const GRADIENT2: LimitAlgorithm = LimitAlgorithm::Gradient2 {
        tolerance: 1.5,
        smoothing: 0.2,
        long_window: 600,
        queue_size: 4,
    };

    /// `aimd` or `gradient2`.
    pub const fn name(&self) -> &'static str {
        match self {
            LimitAlgorithm::Aimd { .. } => "aimd",
            LimitAlgorithm::Gradient2 { .. } => "gradient2",
        }
    }
}

/// An adaptive concurrency limit: a bulkhead whose limit moves between a floor and a ceiling
/// with the latency and failures it observes. See the [module docs](super).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveLimitPolicy {
    /// How the limit moves.
    pub algorithm: LimitAlgorithm,
    /// The limit to start at. Range `min_limit..=max_limit`.
    pub initial_limit: u32,
    /// The floor: the limit never goes below it. Range `1..=max_limit`.
    pub min_limit: u32,
    /// The ceiling: the limit never goes above it. Range `min_limit..=1_000_000`.
    pub max_limit: u32,
}

impl AdaptiveLimitPolicy {
    /// `algorithm` between `min_limit` and `max_limit`, starting at Netflix's initial limit
    /// of 20, raised to the floor or lowered to the ceiling.
    pub const fn new(algorithm: LimitAlgorithm, min_limit: u32, max_limit: u32) -> Self {
        let initial = if min_limit > 20 { min_limit } else { 20 };
        AdaptiveLimitPolicy {
            algorithm,
            initial_limit: if initial > max_limit {
                max_limit
            } else {
                initial
            },
            min_limit,
            max_limit,
        }
    }

    /// This policy starting at `initial_limit`.
    pub const fn initial(self, initial_limit: u32) -> Self {
        AdaptiveLimitPolicy {
            initial_limit,
            ..self
        }
    }

    /// Every value out of range, each as a message naming it (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let (min, max) = (self.min_limit, self.max_limit);
        if min == 0 {
            problems.push("`min_limit` must be at least 1, got 0".to_owned());
        }
        if max == 0 || max > MAX_CONCURRENT {
            problems.push(format!(
                "`max_limit` must be in 1..={MAX_CONCURRENT}, got {max}"
            ));
        }
        if min > max {
            problems.push(format!(
                "the floor is above the ceiling: `min_limit` ({min}) must be <= `max_limit` \
                 ({max})"
            ));
        } else if !(min..=max).contains(&self.initial_limit) {
            problems.push(format!(
                "`initial_limit` must be between the floor and the ceiling ({min}..={max}), got \
                 {}",
                self.initial_limit
            ));
        }
        match self.algorithm {
            LimitAlgorithm::Aimd {
                backoff_ratio,
                slow_call,
            } => {
                if !(0.5..1.0).contains(&backoff_ratio) {
                    problems.push(format!(
                        "aimd `backoff_ratio` must be in 0.5..1.0 (the limit is multiplied by it \
                         at a drop), got {backoff_ratio}"
                    ));
                }
                if slow_call.is_zero() {
                    problems.push("aimd `slow_call` must be non-zero, got 0s".to_owned());
                }
            }
            LimitAlgorithm::Gradient2 {
                tolerance,
                smoothing,
                long_window,
                queue_size,
            } => {
                if !(1.0..=10.0).contains(&tolerance) {
                    problems.push(format!(
                        "gradient2 `tolerance` must be in 1.0..=10.0, got {tolerance}"
                    ));
                }
                if !(smoothing > 0.0 && smoothing <= 1.0) {
                    problems.push(format!(
                        "gradient2 `smoothing` must be in 0.0 < s <= 1.0, got {smoothing}"
                    ));
                }
                if !(1..=100_000).contains(&long_window) {
                    problems.push(format!(
                        "gradient2 `long_window` must be in 1..=100000 samples, got {long_window}"
                    ));
                }
                if queue_size > 1000 {
                    problems.push(format!(
                        "gradient2 `queue_size` must be in 0..=1000, got {queue_size}"
                    ));
                }
            }
        }
        problems
    }

    /// Checks the ranges of [`problems`](Self::problems).
    ///
    /// # Errors
    /// [`InvalidAdaptiveLimit`] listing every value out of range.
    pub fn validate(&self) -> Result<(), InvalidAdaptiveLimit> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidAdaptiveLimit { problems })
        }
    }
}

impl fmt::Display for AdaptiveLimitPolicy {
    /// The DSL's canonical form (see [`crate::dsl`]): `aimd 5..200 from 20`, followed by the
    /// algorithm's parameters that differ from their defaults (`backoff 0.8 slow 2s`,
    /// `tolerance 2 smoothing 0.1 window 300 queue 2`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}..{} from {}",
            self.algorithm.name(),
            self.min_limit,
            self.max_limit,
            self.initial_limit
        )?;
        match (
            self.algorithm,
            LimitAlgorithm::AIMD,
            LimitAlgorithm::GRADIENT2,
        ) {
            (
                LimitAlgorithm::Aimd {
                    backoff_ratio,
                    slow_call,
                },
                LimitAlgorithm::Aimd {
                    backoff_ratio: b0,
                    slow_call: s0,
                },
                _,
            ) => {
                if backoff_ratio != b0 {
                    write!(f, " backoff {backoff_ratio}")?;
                }
                if slow_call != s0 {
                    write!(f, " slow {}", crate::syntax::fmt_duration(slow_call))?;
                }
            }
            (
                LimitAlgorithm::Gradient2 {
                    tolerance,
                    smoothing,
                    long_window,
                    queue_size,
                },
                _,
                LimitAlgorithm::Gradient2 {
                    tolerance: t0,
                    smoothing: s0,
                    long_window: w0,
                    queue_size: q0,
                },
            ) => {
                if tolerance != t0 {
                    write!(f, " tolerance {tolerance}")?;
                }
                if smoothing != s0 {
                    write!(f, " smoothing {smoothing}")?;
                }
                if long_window != w0 {
                    write!(f, " window {long_window}")?;
                }
                if queue_size != q0 {
                    write!(f, " queue {queue_size}")?;
                }
            }
            _ => unreachable!("the defaults are of their algorithms"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_above_the_ceiling_is_named() {
        let p = AdaptiveLimitPolicy {
            algorithm: LimitAlgorithm::AIMD,
            initial_limit: 10,
            min_limit: 50,
            max_limit: 10,
        };
        assert_eq!(
            p.problems(),
            ["the floor is above the ceiling: `min_limit` (50) must be <= `max_limit` (10)"]
        );
    }

    #[test]
    fn every_problem_at_once() {
        let p = AdaptiveLimitPolicy {
            algorithm: LimitAlgorithm::Gradient2 {
                tolerance: 0.5,
                smoothing: 0.0,
                long_window: 0,
                queue_size: 5000,
            },
            initial_limit: 0,
            min_limit: 0,
            max_limit: 2_000_000,
        };
        let problems = p.problems();
        assert_eq!(problems.len(), 6, "{problems:?}");
        assert_eq!(problems[0], "`min_limit` must be at least 1, got 0");
        assert_eq!(
            problems[1],
            "`max_limit` must be in 1..=1000000, got 2000000"
        );
        assert!(problems[2].starts_with("gradient2 `tolerance`"));
    }

    #[test]
    fn new_starts_at_twenty_within_the_range() {
        assert_eq!(
            AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 200).initial_limit,
            20
        );
        assert_eq!(
            AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 1, 8).initial_limit,
            8
        );
        assert_eq!(
            AdaptiveLimitPolicy::new(LimitAlgorithm::AIMD, 30, 80).initial_limit,
            30
        );
        assert!(AdaptiveLimitPolicy::new(LimitAlgorithm::GRADIENT2, 1, 200)
            .validate()
            .is_ok());
    }
}
