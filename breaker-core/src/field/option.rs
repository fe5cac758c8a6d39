//! The options of `#[circuit_breaker(..)]`: one list, shared by the macro's parser and by the
//! mapping of policy fields to options, so both are exhaustive `match`es over it.

use super::Field;
use crate::layer::Layer;

/// One option of the attribute. The macro's keyword list (`breaker-macros/src/args.rs`) names
/// each variant; its tests check that it covers [`AttrOption::ALL`].
///
/// The variant names are the macro's (`ByKey` is `key = ..`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum AttrOption {
    Threshold,
    FailureRate,
    Window,
    MinCalls,
    Cooldown,
    HalfOpenProbes,
    Retry,
    RetryIf,
    Idempotent,
    Timeout,
    Deadline,
    Concurrency,
    Rate,
    Hedge,
    Adaptive,
    Throttle,
    Order,
    Fallback,
    Classify,
    Record,
    Name,
    ByKey,
    MaxKeys,
    KeyIdle,
    Scope,
    Flatten,
    Policy,
    Config,
    Crate,
}

impl AttrOption {
    /// Every option, in the order the docs list them.
    pub const ALL: [AttrOption; 29] = [
        AttrOption::Threshold,
        AttrOption::FailureRate,
        AttrOption::Window,
        AttrOption::MinCalls,
        AttrOption::Cooldown,
        AttrOption::HalfOpenProbes,
        AttrOption::Retry,
        AttrOption::RetryIf,
        AttrOption::Idempotent,
        AttrOption::Timeout,
        AttrOption::Deadline,
        AttrOption::Concurrency,
        AttrOption::Rate,
        AttrOption::Hedge,
        AttrOption::Adaptive,
        AttrOption::Throttle,
        AttrOption::Order,
        AttrOption::Fallback,
        AttrOption::Classify,
        AttrOption::Record,
        AttrOption::Name,
        AttrOption::ByKey,
        AttrOption::MaxKeys,
        AttrOption::KeyIdle,
        AttrOption::Scope,
        AttrOption::Flatten,
        AttrOption::Policy,
        AttrOption::Config,
        AttrOption::Crate,
    ];

    /// The option's name as written in the attribute.
    pub const fn name(self) -> &'static str {
        match self {
            AttrOption::Threshold => "threshold",
            AttrOption::FailureRate => "failure_rate",
            AttrOption::Window => "window",
            AttrOption::MinCalls => "min_calls",
            AttrOption::Cooldown => "cooldown",
            AttrOption::HalfOpenProbes => "half_open_probes",
            AttrOption::Retry => "retry",
            AttrOption::RetryIf => "retry_if",
            AttrOption::Idempotent => "idempotent",
            AttrOption::Timeout => "timeout",
            AttrOption::Deadline => "deadline",
            AttrOption::Concurrency => "concurrency",
            AttrOption::Rate => "rate",
            AttrOption::Hedge => "hedge",
            AttrOption::Adaptive => "adaptive",
            AttrOption::Throttle => "throttle",
            AttrOption::Order => "order",
            AttrOption::Fallback => "fallback",
            AttrOption::Classify => "classify",
            AttrOption::Record => "record",
            AttrOption::Name => "name",
            AttrOption::ByKey => "key",
            AttrOption::MaxKeys => "max_keys",
            AttrOption::KeyIdle => "key_idle",
            AttrOption::Scope => "scope",
            AttrOption::Flatten => "flatten",
            AttrOption::Policy => "policy",
            AttrOption::Config => "config",
            AttrOption::Crate => "crate",
        }
    }

    /// A short example value, for "expected .." and "add .." messages.
    pub const fn example(self) -> &'static str {
        match self {
            AttrOption::Threshold => "5",
            AttrOption::FailureRate => "50",
            AttrOption::Window => "100",
            AttrOption::MinCalls => "20",
            AttrOption::Cooldown => "\"30s\"",
            AttrOption::HalfOpenProbes => "1",
            AttrOption::Retry => "\"3x exp jitter\"",
            AttrOption::RetryIf => "path::to::is_transient",
            AttrOption::Idempotent => "true",
            AttrOption::Timeout => "\"2s\"",
            AttrOption::Deadline => "\"10s\"",
            AttrOption::Concurrency => "10",
            AttrOption::Rate => "\"100/s burst 20\"",
            AttrOption::Hedge => "\"1x after 50ms\"",
            AttrOption::Adaptive => "\"aimd 5..200\"",
            AttrOption::Throttle => "\"k 2 over 2m\"",
            AttrOption::Order => "[retry, breaker, timeout]",
            AttrOption::Fallback => "path::to::fallback",
            AttrOption::Classify => "http",
            AttrOption::Record => "path::to::recorder",
            AttrOption::Name => "\"inventory\"",
            AttrOption::ByKey => "host",
            AttrOption::MaxKeys => "10_000",
            AttrOption::KeyIdle => "\"10m\"",
            AttrOption::Scope => "\"local\"",
            AttrOption::Flatten => "true",
            AttrOption::Policy => "\"inventory\"",
            AttrOption::Config => "\"breaker.toml\"",
            AttrOption::Crate => "::breaker",
        }
    }

    /// Whether the option is part of the policy written in the attribute (so it cannot be
    /// combined with `policy = ".."`, whose config file defines the policy).
    pub const fn sets_policy(self) -> bool {
        match self {
            AttrOption::Threshold
            | AttrOption::FailureRate
            | AttrOption::Window
            | AttrOption::MinCalls
            | AttrOption::Cooldown
            | AttrOption::HalfOpenProbes
            | AttrOption::Retry
            | AttrOption::Idempotent
            | AttrOption::Timeout
            | AttrOption::Deadline
            | AttrOption::Concurrency
            | AttrOption::Rate
            | AttrOption::Hedge
            | AttrOption::Adaptive
            | AttrOption::Throttle
            | AttrOption::Order => true,
            AttrOption::RetryIf
            | AttrOption::Fallback
            | AttrOption::Classify
            | AttrOption::Record
            | AttrOption::Name
            | AttrOption::ByKey
            | AttrOption::MaxKeys
            | AttrOption::KeyIdle
            | AttrOption::Scope
            | AttrOption::Flatten
            | AttrOption::Policy
            | AttrOption::Config
            | AttrOption::Crate => false,
        }
    }

    /// The option that sets a policy field, to show the validator's errors at it; `None` for
    /// the fields the attribute cannot set (they keep their valid defaults).
    pub const fn of_field(field: Field) -> Option<AttrOption> {
        Some(match field {
            Field::ConsecutiveFailures => AttrOption::Threshold,
            Field::FailureRate => AttrOption::FailureRate,
            Field::Window => AttrOption::Window,
            Field::MinCalls => AttrOption::MinCalls,
            Field::Cooldown | Field::CooldownMax => AttrOption::Cooldown,
            Field::HalfOpenProbes => AttrOption::HalfOpenProbes,
            Field::MaxAttempts | Field::Backoff | Field::Jitter => AttrOption::Retry,
            Field::Timeout => AttrOption::Timeout,
            Field::Deadline => AttrOption::Deadline,
            Field::Order => AttrOption::Order,
            Field::Idempotent => AttrOption::Idempotent,
            Field::MaxConcurrent => AttrOption::Concurrency,
            Field::RateLimit => AttrOption::Rate,
            Field::Hedge => AttrOption::Hedge,
            Field::Adaptive => AttrOption::Adaptive,
            Field::Throttle => AttrOption::Throttle,
            Field::Scope => AttrOption::Scope,
            Field::SlowCallDuration
            | Field::SlowCallRate
            | Field::CooldownMultiplier
            | Field::CooldownJitter
            | Field::SuccessesToClose
            | Field::MaxProbeWait
            | Field::NeutralProbe
            | Field::MaxWait => return None,
        })
    }

    /// The option that configures `layer`.
    pub const fn of_layer(layer: Layer) -> AttrOption {
        match layer {
            Layer::Retry => AttrOption::Retry,
            Layer::Timeout => AttrOption::Timeout,
            Layer::Bulkhead => AttrOption::Concurrency,
            Layer::Breaker => AttrOption::Threshold,
            Layer::RateLimit => AttrOption::Rate,
            Layer::Hedge => AttrOption::Hedge,
            Layer::Adaptive => AttrOption::Adaptive,
            Layer::Throttle => AttrOption::Throttle,
        }
    }
}

impl std::fmt::Display for AttrOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
