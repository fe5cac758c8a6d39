//! The identities of a policy's settings and the errors that name them: [`Field`] (a setting,
//! by its config key), [`FieldError`] and [`ValidationError`] (what the one validator reports),
//! [`Rule`] (which rule an error breaks) and [`AttrOption`] (an option of
//! `#[circuit_breaker]`, and the field it sets).
//!
//! A leaf: it imports nothing but [`crate::layer`], so every layer's policy (`breaker`, `retry`,
//! `bulkhead`), the validator (`policy`), the DSL, config files and the attribute name fields
//! and report errors through it without importing each other. The public paths are
//! [`crate::policy`] (`policy::Field`, `policy::FieldError`, ...) and, for the breaker's own
//! errors, [`crate::breaker`].

mod error;
mod option;

pub use error::{FieldError, Rule, ValidationError};
pub use option::AttrOption;

use crate::layer::Layer;
use std::fmt;

/// One setting of a [`Policy`](crate::policy::Policy): what a [`FieldError`] is about.
///
/// Each field has one name, [`key`](Self::key), the key of a config file (unique across
/// layers), and lives in the table of [`layer`](Self::layer) (`breaker`, `retry`, `bulkhead`)
/// or at the top of a policy section. The DSL records which tokens set which field, the
/// config loader which key set it, and the attribute which option set it, so an error found by
/// the one validator is shown at the right place everywhere. Adding a field is one variant
/// here: every mapping from a field is an exhaustive `match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Field {
    /// `breaker.consecutive_failures`; also where "no trip rule" is reported.
    ConsecutiveFailures,
    /// `breaker.failure_rate` (`BreakerPolicy::failure_rate_percent`).
    FailureRate,
    /// `breaker.slow_call_duration`.
    SlowCallDuration,
    /// `breaker.slow_call_rate`.
    SlowCallRate,
    /// `breaker.window`.
    Window,
    /// `breaker.min_calls`.
    MinCalls,
    /// `breaker.cooldown`.
    Cooldown,
    /// `breaker.cooldown_multiplier`.
    CooldownMultiplier,
    /// `breaker.cooldown_max`.
    CooldownMax,
    /// `breaker.cooldown_jitter`.
    CooldownJitter,
    /// `breaker.half_open_probes`.
    HalfOpenProbes,
    /// `breaker.successes_to_close`.
    SuccessesToClose,
    /// `breaker.max_probe_wait`.
    MaxProbeWait,
    /// `breaker.neutral_probe`.
    NeutralProbe,
    /// `retry.max_attempts`; also where "a retry that may not retry" is reported.
    MaxAttempts,
    /// `retry.backoff`.
    Backoff,
    /// `retry.jitter`.
    Jitter,
    /// `timeout`, the per-attempt limit.
    Timeout,
    /// `deadline`, the total limit.
    Deadline,
    /// `order`, the nesting of the layers.
    Order,
    /// `idempotent`.
    Idempotent,
    /// `bulkhead.max_concurrent`.
    MaxConcurrent,
    /// `bulkhead.max_wait`.
    MaxWait,
    /// `rate`, the rate limit (a DSL string: `100/s burst 20`).
    RateLimit,
    /// `hedge`, hedging (a DSL string: `1x after 50ms`).
    Hedge,
    /// `adaptive`, the adaptive concurrency limit (a DSL string: `aimd 5..200`).
    Adaptive,
    /// `throttle`, client-side adaptive throttling (a DSL string: `k 2 over 2m`).
    Throttle,
    /// `scope`: where the breaker's state lives ([`Scope`](crate::scope::Scope)).
    Scope,
}

impl Field {
    /// Every field, in the order the validator checks them.
    pub const ALL: [Field; 28] = [
        Field::ConsecutiveFailures,
        Field::FailureRate,
        Field::SlowCallDuration,
        Field::SlowCallRate,
        Field::Window,
        Field::MinCalls,
        Field::Cooldown,
        Field::CooldownMultiplier,
        Field::CooldownMax,
        Field::CooldownJitter,
        Field::HalfOpenProbes,
        Field::SuccessesToClose,
        Field::MaxProbeWait,
        Field::NeutralProbe,
        Field::MaxAttempts,
        Field::Backoff,
        Field::Jitter,
        Field::Timeout,
        Field::Deadline,
        Field::Order,
        Field::Idempotent,
        Field::MaxConcurrent,
        Field::MaxWait,
        Field::RateLimit,
        Field::Hedge,
        Field::Adaptive,
        Field::Throttle,
        Field::Scope,
    ];

    /// The dotted path of the field inside a policy section of a config file:
    /// `breaker.consecutive_failures`, `retry.max_attempts`, `timeout`.
    pub const fn path(self) -> &'static str {
        match self {
            Field::ConsecutiveFailures => "breaker.consecutive_failures",
            Field::FailureRate => "breaker.failure_rate",
            Field::SlowCallDuration => "breaker.slow_call_duration",
            Field::SlowCallRate => "breaker.slow_call_rate",
            Field::Window => "breaker.window",
            Field::MinCalls => "breaker.min_calls",
            Field::Cooldown => "breaker.cooldown",
            Field::CooldownMultiplier => "breaker.cooldown_multiplier",
            Field::CooldownMax => "breaker.cooldown_max",
            Field::CooldownJitter => "breaker.cooldown_jitter",
            Field::HalfOpenProbes => "breaker.half_open_probes",
            Field::SuccessesToClose => "breaker.successes_to_close",
            Field::MaxProbeWait => "breaker.max_probe_wait",
            Field::NeutralProbe => "breaker.neutral_probe",
            Field::MaxAttempts => "retry.max_attempts",
            Field::Backoff => "retry.backoff",
            Field::Jitter => "retry.jitter",
            Field::Timeout => "timeout",
            Field::Deadline => "deadline",
            Field::Order => "order",
            Field::Idempotent => "idempotent",
            Field::MaxConcurrent => "bulkhead.max_concurrent",
            Field::MaxWait => "bulkhead.max_wait",
            Field::RateLimit => "rate",
            Field::Hedge => "hedge",
            Field::Adaptive => "adaptive",
            Field::Throttle => "throttle",
            Field::Scope => "scope",
        }
    }

    /// The config key: the last part of [`path`](Self::path) (`consecutive_failures`).
    pub fn key(self) -> &'static str {
        let path = self.path();
        path.rsplit_once('.').map_or(path, |(_, key)| key)
    }

    /// The layer whose table holds the field (`Breaker`, `Retry` or `Bulkhead`), or `None` for
    /// a key at the top of a section (`timeout`, `deadline`, `order`, `idempotent`).
    pub fn layer(self) -> Option<Layer> {
        let (table, _) = self.path().split_once('.')?;
        Layer::from_name(table)
    }

    /// Whether the field is one of the breaker's trip rules, which a config section inherits
    /// as a group (`consecutive_failures`, `failure_rate`, `slow_call_duration`,
    /// `slow_call_rate`).
    pub const fn is_trip_rule(self) -> bool {
        matches!(
            self,
            Field::ConsecutiveFailures
                | Field::FailureRate
                | Field::SlowCallDuration
                | Field::SlowCallRate
        )
    }
}

impl fmt::Display for Field {
    /// The config key (`consecutive_failures`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl PartialEq<str> for Field {
    /// Compares the config key.
    fn eq(&self, other: &str) -> bool {
        self.key() == other
    }
}

impl PartialEq<&str> for Field {
    /// Compares the config key.
    fn eq(&self, other: &&str) -> bool {
        self.key() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_tables_are_layers() {
        let mut keys: Vec<_> = Field::ALL.iter().map(|f| f.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Field::ALL.len());
        assert_eq!(Field::MaxAttempts.key(), "max_attempts");
        assert_eq!(Field::MaxAttempts.layer(), Some(Layer::Retry));
        assert_eq!(Field::Timeout.layer(), None);
        for f in Field::ALL {
            // Every table is a layer's: `breaker.`, `retry.`, `bulkhead.` or none.
            assert_eq!(f.path().contains('.'), f.layer().is_some(), "{f:?}");
        }
    }
}
