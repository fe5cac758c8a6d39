//! The serde types of a config file.

use super::value::{present, Dsl, Percent, Spec, Written};
use crate::adaptive::AdaptiveLimitPolicy;
use crate::breaker::{BreakerPolicy, NeutralProbe, SlidingWindow};
use crate::hedge::HedgePolicy;
use crate::layer::Layer;
use crate::policy::BulkheadPolicy;
use crate::ratelimit::RateLimitPolicy;
use crate::retry::{Backoff, Jitter, RetryPolicy};
use crate::scope::{Scope, StoreErrorMode};
use crate::throttle::ThrottlePolicy;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A whole config file: a `default` section and named policies that inherit from it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Where the JSON Schema of this file is, for editors (`"./breaker.schema.json"`);
    /// ignored by the loader.
    #[serde(
        rename = "$schema",
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub schema: Option<String>,
    /// Settings every named policy inherits; a named policy's own settings win.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Section>,
    /// The named policies, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policies: BTreeMap<String, Section>,
    /// The shared store of the policies whose `scope` is `shared` or `quorum(k)` (used by
    /// the `breaker-redis` crate). Required when a policy has such a scope.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub store: Option<StoreTable>,
}

/// The `[store]` table: where the shared store is and how shared breakers behave when it is
/// unreachable. `url` and `namespace` are required.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreTable {
    /// `redis://[user:password@]host:port[/db]` or `rediss://` (TLS). Prefer an environment
    /// override (`BREAKER__STORE__URL`) to a password in a file.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<String>,
    /// The namespace of this fleet's breakers: `[A-Za-z0-9_.:-]{1,128}`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub namespace: Option<String>,
    /// This replica's id. Default: the host name and the process id.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub replica: Option<String>,
    /// How often active breakers' counts are flushed, from 1 ms to 1 h (`"1s"`, the default).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub flush_interval: Option<Dsl<Duration>>,
    /// While the store is unreachable: `"local"` (default), `"open"` or `"closed(30s)"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub on_error: Option<Dsl<StoreErrorMode>>,
}

/// One policy (or the `default` section). Every key is optional; a layer that is set neither
/// here nor in `default` is not part of the pipeline.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// The circuit breaker: a DSL string (`"5 consecutive, open 30s"`) or a table.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub breaker: Option<Spec<Written<BreakerPolicy>, BreakerTable>>,
    /// Retry: a DSL string (`"3x exp jitter"`) or a table. `"3x"` is 3 attempts in total.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry: Option<Spec<Written<RetryPolicy>, RetryTable>>,
    /// Per-attempt timeout, non-zero (`"2s"`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Dsl<Duration>>,
    /// Total deadline over all attempts, non-zero and at least `timeout` (`"10s"`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub deadline: Option<Dsl<Duration>>,
    /// The bulkhead: a DSL string (`"10 concurrent wait 100ms"`) or a table.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub bulkhead: Option<Spec<Written<BulkheadPolicy>, BulkheadTable>>,
    /// The rate limit (`"100/s burst 20"`; see `breaker::ratelimit`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate: Option<Dsl<RateLimitPolicy>>,
    /// Hedging (`"1x after 50ms"`, `"2x after p95 in 10ms..200ms"`); needs `idempotent`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub hedge: Option<Dsl<HedgePolicy>>,
    /// The adaptive concurrency limit (`"aimd 5..200"`, `"gradient2 10..500 from 50"`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub adaptive: Option<Dsl<AdaptiveLimitPolicy>>,
    /// Client-side adaptive throttling (`"k 2"`, `"k 1.5 over 1m"`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub throttle: Option<Dsl<ThrottlePolicy>>,
    /// Layer order, outermost first (`"timeout > retry > breaker"`); it must name exactly the
    /// configured layers, and `hedge` inside `retry`. Default:
    /// `bulkhead > retry > breaker > hedge > throttle > rate > adaptive > timeout` restricted
    /// to the configured layers.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub order: Option<Dsl<Vec<Layer>>>,
    /// Whether the operation may be retried. Default `false`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotent: Option<bool>,
    /// For a `#[circuit_breaker(policy = "..", key = ..)]` function: the most breakers of keys
    /// it keeps, and the most rate limiters for a rate limit `per key`, at least 1 (the
    /// attribute's `max_keys`). Read when the function makes its first key's registry.
    /// Default: the attribute's, else its default.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1))]
    pub max_keys: Option<u32>,
    /// For a `key = ..` function: how long a closed breaker of a key (or a key's refilled rate
    /// limiter) may go unused before it may be evicted, non-zero (`"10m"`; the attribute's
    /// `key_idle`). Read when the function makes its first key's registry. Default: the
    /// attribute's, else its default.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub key_idle: Option<Dsl<Duration>>,
    /// Where the breaker's state lives: `"local"` (default), `"shared"` (one state for the
    /// fleet, through the `[store]`) or `"quorum(k)"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub scope: Option<Dsl<Scope>>,
}

/// The breaker as a table. Every key is optional; the defaults are those of
/// [`BreakerPolicy::default`].
///
/// The trip rules (`consecutive_failures`, `failure_rate`, `slow_call_duration` +
/// `slow_call_rate`) are inherited as a group: a section that sets any of them replaces all the
/// trip rules it inherits. With none set anywhere, the breaker trips after 5 consecutive
/// failures.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerTable {
    /// Trip after this many failures in a row; at least 1.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1))]
    pub consecutive_failures: Option<u32>,
    /// Trip when failures reach this share of the window; in (0, 100].
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub failure_rate: Option<Percent>,
    /// A call taking at least this long is slow; non-zero. Needs `slow_call_rate`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub slow_call_duration: Option<Dsl<Duration>>,
    /// Trip when slow calls reach this share of the window; in (0, 100]. Needs
    /// `slow_call_duration`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub slow_call_rate: Option<Percent>,
    /// The window of the rate rules: `"100 calls"` or `"60s"` (`"1m in 12 buckets"`).
    /// Default `"100 calls"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<Dsl<SlidingWindow>>,
    /// Rate rules wait for this many calls in the window; at most the size of a count window.
    /// Default: the size of a count window, 10 for a time window.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1))]
    pub min_calls: Option<u32>,
    /// How long the breaker stays open before a probe; non-zero. Default `"30s"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cooldown: Option<Dsl<Duration>>,
    /// Growth of the cooldown per failed probe, in 1.0..=1000.0. Default 1.0.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1.0, max = 1000.0))]
    pub cooldown_multiplier: Option<f64>,
    /// Cap of the grown cooldown, at least `cooldown`. Default: `cooldown`, or 10 x `cooldown`
    /// when `cooldown_multiplier` is above 1.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cooldown_max: Option<Dsl<Duration>>,
    /// Random shortening of the cooldown, as a fraction in 0.0..=1.0. Default 0.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub cooldown_jitter: Option<f64>,
    /// Probes in flight while half-open, in 1..=65535. Default 1.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = crate::breaker::MAX_HALF_OPEN_PROBES))]
    pub half_open_probes: Option<u32>,
    /// Successful probes that close the breaker, in 1..=8191. Default 1.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = crate::breaker::MAX_SUCCESSES_TO_CLOSE))]
    pub successes_to_close: Option<u32>,
    /// A probe outstanding this long stops blocking new probes; non-zero. Default: the
    /// current cooldown.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_probe_wait: Option<Dsl<Duration>>,
    /// What an ignored probe means: `"release"` (default) or `"count-as-success"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub neutral_probe: Option<Dsl<NeutralProbe>>,
}

/// Retry as a table. Every key is optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryTable {
    /// Attempts in total, the first included, in 1..=100. Default 3.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = crate::policy::MAX_ATTEMPTS))]
    pub max_attempts: Option<u32>,
    /// The delay schedule (`"fixed 200ms"`, `"exp(100ms, max 2s)"`). Default
    /// `"exp(100ms, factor 2, max 10s)"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub backoff: Option<Dsl<Backoff>>,
    /// The randomisation of each delay (`"full-jitter"`). Default `"no-jitter"`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Dsl<Jitter>>,
}

/// The bulkhead as a table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkheadTable {
    /// Calls running at once, in 1..=1000000. Required unless inherited.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = crate::policy::MAX_CONCURRENT))]
    pub max_concurrent: Option<u32>,
    /// How long a call may wait for a slot. Default `"0s"` (reject at once).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_wait: Option<Dsl<Duration>>,
}
