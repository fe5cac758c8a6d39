//! Inheritance (`[default]` under each `[policies.NAME]`) and validation, with every error
//! located at the key that set the bad value.

use super::error::ConfigErrors;
use super::file::{BreakerTable, BulkheadTable, ConfigFile, RetryTable, Section};
use super::load::{Policies, Source};
use super::value::{Dsl, Percent, Spec};
use crate::breaker::{BreakerPolicy, FieldError, SlowCall};
use crate::dsl::{self, default_min_calls};
use crate::policy::{BulkheadPolicy, Policy};
use crate::retry::{Backoff, Jitter, RetryPolicy};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct Origins(HashMap<&'static str, Vec<String>>);

impl Origins {
    fn set(&mut self, field: &'static str, path: Vec<String>) {
        self.0.insert(field, path);
    }
}

const TRIP_FIELDS: [&str; 4] = [
    "consecutive_failures",
    "failure_rate",
    "slow_call_duration",
    "slow_call_rate",
];
const BREAKER_FIELDS: [&str; 14] = [
    "consecutive_failures",
    "failure_rate",
    "slow_call_duration",
    "slow_call_rate",
    "window",
    "min_calls",
    "cooldown",
    "cooldown_multiplier",
    "cooldown_max",
    "cooldown_jitter",
    "half_open_probes",
    "successes_to_close",
    "max_probe_wait",
    "neutral_probe",
];

fn breaker_table(p: &BreakerPolicy) -> BreakerTable {
    BreakerTable {
        consecutive_failures: p.consecutive_failures,
        failure_rate: p.failure_rate_percent.map(Percent),
        slow_call_duration: p.slow_call.map(|s| Dsl(s.duration)),
        slow_call_rate: p.slow_call.map(|s| Percent(s.rate_percent)),
        window: Some(Dsl(p.window)),
        min_calls: Some(p.min_calls),
        cooldown: Some(Dsl(p.cooldown)),
        cooldown_multiplier: Some(p.cooldown_multiplier),
        cooldown_max: Some(Dsl(p.cooldown_max)),
        cooldown_jitter: Some(p.cooldown_jitter),
        half_open_probes: Some(p.half_open_probes),
        successes_to_close: Some(p.successes_to_close),
        max_probe_wait: p.max_probe_wait.map(Dsl),
        neutral_probe: Some(Dsl(p.neutral_probe)),
    }
}

fn has_trip_rule(t: &BreakerTable) -> bool {
    t.consecutive_failures.is_some()
        || t.failure_rate.is_some()
        || t.slow_call_duration.is_some()
        || t.slow_call_rate.is_some()
}

/// Merges the breaker specs of `default` and the named section (in that order); the trip rules
/// as a group, every other field on its own.
fn merge_breaker(
    specs: &[(Vec<String>, &Spec<BreakerPolicy, BreakerTable>)],
    origins: &mut Origins,
    errors: &mut Vec<FieldError>,
) -> BreakerPolicy {
    let mut acc = BreakerTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = match spec {
            Spec::Dsl(p) => (breaker_table(p), true),
            Spec::Table(t) => (t.clone(), false),
        };
        let path = |field: &'static str| {
            let mut p = prefix.clone();
            p.push("breaker".into());
            if !whole {
                p.push(field.into());
            }
            p
        };
        if has_trip_rule(&table) {
            acc.consecutive_failures = table.consecutive_failures;
            acc.failure_rate = table.failure_rate;
            acc.slow_call_duration = table.slow_call_duration.clone();
            acc.slow_call_rate = table.slow_call_rate;
            for f in TRIP_FIELDS {
                origins.set(f, path(f));
            }
        }
        macro_rules! take {
            ($($field:ident),*) => {$(
                if table.$field.is_some() {
                    acc.$field = table.$field.clone();
                    origins.set(stringify!($field), path(stringify!($field)));
                }
            )*};
        }
        take!(
            window,
            min_calls,
            cooldown,
            cooldown_multiplier,
            cooldown_max,
            cooldown_jitter,
            half_open_probes,
            successes_to_close,
            max_probe_wait,
            neutral_probe
        );
        if whole {
            // A DSL string is a complete breaker: its unset optional fields are unset.
            acc.max_probe_wait = table.max_probe_wait.clone();
            origins.set("max_probe_wait", path("max_probe_wait"));
        }
    }
    let d = BreakerPolicy::default();
    let slow_call = match (&acc.slow_call_duration, acc.slow_call_rate) {
        (Some(duration), Some(rate)) => Some(SlowCall {
            duration: duration.0,
            rate_percent: rate.0,
        }),
        (None, None) => None,
        (Some(_), None) => {
            errors.push(FieldError {
                field: "slow_call_duration",
                message: "is set without `slow_call_rate`; set both or neither".into(),
            });
            None
        }
        (None, Some(_)) => {
            errors.push(FieldError {
                field: "slow_call_rate",
                message: "is set without `slow_call_duration`; set both or neither".into(),
            });
            None
        }
    };
    let any_trip = has_trip_rule(&acc);
    let window = acc.window.as_ref().map_or(d.window, |w| w.0);
    let cooldown = acc.cooldown.as_ref().map_or(d.cooldown, |c| c.0);
    let cooldown_multiplier = acc.cooldown_multiplier.unwrap_or(1.0);
    BreakerPolicy {
        consecutive_failures: if any_trip {
            acc.consecutive_failures
        } else {
            d.consecutive_failures
        },
        failure_rate_percent: acc.failure_rate.map(|p| p.0),
        slow_call,
        window,
        min_calls: acc.min_calls.unwrap_or_else(|| match &acc.window {
            None => d.min_calls,
            Some(_) => default_min_calls(window),
        }),
        cooldown,
        cooldown_multiplier,
        cooldown_max: acc.cooldown_max.map_or(
            if cooldown_multiplier == 1.0 {
                cooldown
            } else {
                cooldown.saturating_mul(10)
            },
            |m| m.0,
        ),
        cooldown_jitter: acc.cooldown_jitter.unwrap_or(d.cooldown_jitter),
        half_open_probes: acc.half_open_probes.unwrap_or(d.half_open_probes),
        successes_to_close: acc.successes_to_close.unwrap_or(d.successes_to_close),
        max_probe_wait: acc.max_probe_wait.map(|w| w.0),
        neutral_probe: acc.neutral_probe.map_or(d.neutral_probe, |n| n.0),
    }
}

fn merge_retry(
    specs: &[(Vec<String>, &Spec<RetryPolicy, RetryTable>)],
    origins: &mut Origins,
) -> RetryPolicy {
    let mut acc = RetryTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = match spec {
            Spec::Dsl(p) => (
                RetryTable {
                    max_attempts: Some(p.max_attempts),
                    backoff: Some(Dsl(p.backoff)),
                    jitter: Some(Dsl(p.jitter)),
                },
                true,
            ),
            Spec::Table(t) => (t.clone(), false),
        };
        let path = |field: &'static str| {
            let mut p = prefix.clone();
            p.push("retry".into());
            if !whole {
                p.push(field.into());
            }
            p
        };
        if let Some(n) = table.max_attempts {
            acc.max_attempts = Some(n);
            origins.set("max_attempts", path("max_attempts"));
        }
        if let Some(b) = table.backoff {
            acc.backoff = Some(b);
            origins.set("backoff", path("backoff"));
        }
        if let Some(j) = table.jitter {
            acc.jitter = Some(j);
            origins.set("jitter", path("jitter"));
        }
    }
    RetryPolicy {
        max_attempts: acc.max_attempts.unwrap_or(3),
        backoff: acc.backoff.map_or(
            Backoff::Exponential {
                base: dsl::DEFAULT_BASE,
                factor: dsl::DEFAULT_FACTOR,
                max: dsl::DEFAULT_MAX,
            },
            |b| b.0,
        ),
        jitter: acc.jitter.map_or(Jitter::None, |j| j.0),
    }
}

fn merge_bulkhead(
    specs: &[(Vec<String>, &Spec<BulkheadPolicy, BulkheadTable>)],
    origins: &mut Origins,
    errors: &mut Vec<FieldError>,
) -> BulkheadPolicy {
    let mut acc = BulkheadTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = match spec {
            Spec::Dsl(p) => (
                BulkheadTable {
                    max_concurrent: Some(p.max_concurrent),
                    max_wait: Some(Dsl(p.max_wait)),
                },
                true,
            ),
            Spec::Table(t) => (t.clone(), false),
        };
        let path = |field: &'static str| {
            let mut p = prefix.clone();
            p.push("bulkhead".into());
            if !whole {
                p.push(field.into());
            }
            p
        };
        if let Some(n) = table.max_concurrent {
            acc.max_concurrent = Some(n);
            origins.set("max_concurrent", path("max_concurrent"));
        }
        if let Some(w) = table.max_wait {
            acc.max_wait = Some(w);
            origins.set("max_wait", path("max_wait"));
        }
    }
    if acc.max_concurrent.is_none() {
        errors.push(FieldError {
            field: "max_concurrent",
            message: "is required when a bulkhead is configured".into(),
        });
    }
    BulkheadPolicy {
        max_concurrent: acc.max_concurrent.unwrap_or(1),
        max_wait: acc.max_wait.map_or(Duration::ZERO, |w| w.0),
    }
}

/// The effective policy of one named section: `default` first, the named section over it.
fn merge(
    name: &str,
    default: Option<&Section>,
    named: &Section,
) -> (Policy, Origins, Vec<FieldError>) {
    let mut sections: Vec<(Vec<String>, &Section)> = Vec::new();
    if let Some(d) = default {
        sections.push((vec!["default".into()], d));
    }
    sections.push((vec!["policies".into(), name.into()], named));
    let mut origins = Origins::default();
    let mut errors = Vec::new();

    macro_rules! specs {
        ($field:ident) => {
            sections
                .iter()
                .filter_map(|(p, s)| s.$field.as_ref().map(|v| (p.clone(), v)))
                .collect::<Vec<_>>()
        };
    }
    let breakers = specs!(breaker);
    let retries = specs!(retry);
    let bulkheads = specs!(bulkhead);
    let mut policy = Policy {
        breaker: (!breakers.is_empty())
            .then(|| merge_breaker(&breakers, &mut origins, &mut errors)),
        retry: (!retries.is_empty()).then(|| merge_retry(&retries, &mut origins)),
        bulkhead: (!bulkheads.is_empty())
            .then(|| merge_bulkhead(&bulkheads, &mut origins, &mut errors)),
        ..Policy::default()
    };
    for (prefix, s) in &sections {
        let path = |field: &str| {
            let mut p = prefix.clone();
            p.push(field.into());
            p
        };
        if let Some(t) = &s.timeout {
            policy.timeout = Some(t.0);
            origins.set("timeout", path("timeout"));
        }
        if let Some(t) = &s.deadline {
            policy.deadline = Some(t.0);
            origins.set("deadline", path("deadline"));
        }
        if let Some(o) = &s.order {
            policy.order = Some(o.0.clone());
            origins.set("order", path("order"));
        }
        if let Some(i) = s.idempotent {
            policy.idempotent = i;
        }
    }
    (policy, origins, errors)
}

pub(super) fn resolve(
    src: &Source,
    file: &ConfigFile,
    overridden: &[(Vec<String>, String)],
) -> Result<Policies, ConfigErrors> {
    let mut map = BTreeMap::new();
    let mut errors = Vec::new();
    for (name, section) in &file.policies {
        let (policy, origins, mut field_errors) = merge(name, file.default.as_ref(), section);
        if let Err(e) = policy.validate() {
            field_errors.extend(e.errors);
        }
        if field_errors.is_empty() {
            map.insert(name.clone(), Arc::new(policy));
            continue;
        }
        let own = vec!["policies".to_owned(), name.clone()];
        for fe in field_errors {
            let path = origins.0.get(fe.field).cloned().unwrap_or_else(|| {
                let mut p = own.clone();
                if BREAKER_FIELDS.contains(&fe.field) {
                    p.push("breaker".into());
                }
                p
            });
            let mut message = if path.last().map(String::as_str) == Some(fe.field) {
                fe.message.clone()
            } else {
                fe.to_string()
            };
            if !path.starts_with(&own) {
                message = format!("in policy `{name}`: {message}");
            }
            let mut error = src.error(&path, message);
            if let Some((_, var)) = overridden.iter().find(|(p, _)| path.starts_with(p)) {
                error.env = Some(var.clone());
                error.line = None;
                error.column = None;
            }
            errors.push(error);
        }
    }
    if errors.is_empty() {
        Ok(Policies { map })
    } else {
        Err(ConfigErrors(errors))
    }
}
