//! Inheritance (`[default]` under each `[policies.NAME]`) and validation, with every error
//! located at the key that set the bad value.

use super::error::ConfigError;
use super::file::{BreakerTable, BulkheadTable, ConfigFile, RetryTable, Section};
use super::load::{KeyBounds, Policies, Source, StoreSettings};
use super::read::Poisoned;
use super::tree::Node;
use super::value::{Dsl, Percent, Spec, Written};
use crate::breaker::{BreakerPolicy, SlowCall};
use crate::layer::Layer;
use crate::policy::defaults::{self, default_min_calls};
use crate::policy::{BulkheadPolicy, Field, FieldError, Policy, Rule};
use crate::retry::RetryPolicy;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Which key set each field of a merged policy: where its errors are shown.
#[derive(Default)]
struct Origins(HashMap<Field, Vec<String>>);

impl Origins {
    /// Records that `field` came from the section at `prefix`: from its key, or from the DSL
    /// string of the whole layer when `whole`.
    fn set(&mut self, field: Field, prefix: &[String], whole: bool) {
        let mut path = prefix.to_vec();
        match field.layer() {
            Some(layer) => {
                path.push(layer.name().into());
                if !whole {
                    path.push(field.key().into());
                }
            }
            None => path.push(field.key().into()),
        }
        self.0.insert(field, path);
    }

    /// The key path of `field` in policy `own` (`["policies", name]`): the key that set it,
    /// else where it would be written in the policy's own section.
    fn path(&self, field: Field, own: &[String]) -> Vec<String> {
        self.0.get(&field).cloned().unwrap_or_else(|| {
            let mut path = own.to_vec();
            if let Some(layer) = field.layer() {
                path.push(layer.name().into());
            }
            path
        })
    }
}

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

/// A layer's specs in the sections that set it, each with the section's key path, `default`
/// first.
type Specs<'a, T, Table> = [(Vec<String>, &'a Spec<Written<T>, Table>)];

/// A layer's spec as a table, and whether it was one DSL string (a whole value).
fn as_table<T, Table: Clone>(spec: &Spec<T, Table>, table: impl Fn(&T) -> Table) -> (Table, bool) {
    match spec {
        Spec::Dsl(p) => (table(p), true),
        Spec::Table(t) => (t.clone(), false),
    }
}

/// For each `key => Field`: a key set in `$table` overrides `$acc` and records where it came
/// from.
macro_rules! take {
    ($acc:ident, $table:ident, $origins:ident, $prefix:ident, $whole:ident;
     $($key:ident => $field:ident),* $(,)?) => {$(
        if $table.$key.is_some() {
            $acc.$key = $table.$key.clone();
            $origins.set(Field::$field, $prefix, $whole);
        }
    )*};
}

fn has_trip_rule(t: &BreakerTable) -> bool {
    t.consecutive_failures.is_some()
        || t.failure_rate.is_some()
        || t.slow_call_duration.is_some()
        || t.slow_call_rate.is_some()
}

/// The table of the fields a breaker's DSL string writes: merged as the same keys would be.
fn written_breaker(w: &Written<BreakerPolicy>) -> BreakerTable {
    let all = breaker_table(&w.value);
    macro_rules! only {
        ($($key:ident => $field:ident),* $(,)?) => {
            BreakerTable { $($key: all.$key.filter(|_| w.writes(Field::$field))),* }
        };
    }
    only!(
        consecutive_failures => ConsecutiveFailures,
        failure_rate => FailureRate,
        slow_call_duration => SlowCallDuration,
        slow_call_rate => SlowCallRate,
        window => Window,
        min_calls => MinCalls,
        cooldown => Cooldown,
        cooldown_multiplier => CooldownMultiplier,
        cooldown_max => CooldownMax,
        cooldown_jitter => CooldownJitter,
        half_open_probes => HalfOpenProbes,
        successes_to_close => SuccessesToClose,
        max_probe_wait => MaxProbeWait,
        neutral_probe => NeutralProbe,
    )
}

/// Merges the breaker specs of `default` and the named section (in that order); the trip rules
/// as a group, every other field on its own, whether a section writes them as keys of a table
/// or in a DSL string.
fn merge_breaker(
    specs: &Specs<'_, BreakerPolicy, BreakerTable>,
    origins: &mut Origins,
    errors: &mut Vec<FieldError>,
) -> BreakerPolicy {
    let mut acc = BreakerTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = as_table(spec, written_breaker);
        if has_trip_rule(&table) {
            acc.consecutive_failures = table.consecutive_failures;
            acc.failure_rate = table.failure_rate;
            acc.slow_call_duration = table.slow_call_duration.clone();
            acc.slow_call_rate = table.slow_call_rate;
            for f in Field::ALL.into_iter().filter(|f| f.is_trip_rule()) {
                origins.set(f, prefix, whole);
            }
        }
        take!(acc, table, origins, prefix, whole;
            window => Window,
            min_calls => MinCalls,
            cooldown => Cooldown,
            cooldown_multiplier => CooldownMultiplier,
            cooldown_max => CooldownMax,
            cooldown_jitter => CooldownJitter,
            half_open_probes => HalfOpenProbes,
            successes_to_close => SuccessesToClose,
            max_probe_wait => MaxProbeWait,
            neutral_probe => NeutralProbe
        );
    }
    let d = BreakerPolicy::default();
    let slow_call = match (&acc.slow_call_duration, acc.slow_call_rate) {
        (Some(duration), Some(rate)) => Some(SlowCall {
            duration: duration.0,
            rate_percent: rate.0,
        }),
        (None, None) => None,
        (Some(_), None) => {
            errors.push(
                FieldError::new(
                    Field::SlowCallDuration,
                    "is set without `slow_call_rate`; set both or neither (a section that sets any \
                     trip rule replaces all the trip rules it inherits)",
                )
                .reading(&[Field::SlowCallRate]),
            );
            None
        }
        (None, Some(_)) => {
            errors.push(
                FieldError::new(
                    Field::SlowCallRate,
                    "is set without `slow_call_duration`; set both or neither (a section that sets \
                     any trip rule replaces all the trip rules it inherits)",
                )
                .reading(&[Field::SlowCallDuration]),
            );
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
        cooldown_max: acc.cooldown_max.map_or_else(
            || defaults::cooldown_max(cooldown, cooldown_multiplier),
            |m| m.0,
        ),
        cooldown_jitter: acc.cooldown_jitter.unwrap_or(d.cooldown_jitter),
        half_open_probes: acc.half_open_probes.unwrap_or(d.half_open_probes),
        successes_to_close: acc.successes_to_close.unwrap_or(d.successes_to_close),
        max_probe_wait: acc.max_probe_wait.map(|w| w.0),
        neutral_probe: acc.neutral_probe.map_or(d.neutral_probe, |n| n.0),
    }
}

fn merge_retry(specs: &Specs<'_, RetryPolicy, RetryTable>, origins: &mut Origins) -> RetryPolicy {
    let mut acc = RetryTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = as_table(spec, |w| RetryTable {
            max_attempts: w.writes(Field::MaxAttempts).then_some(w.value.max_attempts),
            backoff: w.writes(Field::Backoff).then_some(Dsl(w.value.backoff)),
            jitter: w.writes(Field::Jitter).then_some(Dsl(w.value.jitter)),
        });
        take!(acc, table, origins, prefix, whole;
            max_attempts => MaxAttempts,
            backoff => Backoff,
            jitter => Jitter,
        );
    }
    let d = defaults::RETRY;
    let max_attempts = acc.max_attempts.unwrap_or(d.max_attempts);
    if max_attempts == 1 {
        // One attempt is no retry, whatever backoff and jitter it inherits (`"none"` over an
        // exponential default, or `max_attempts = 1`): the policy reads as `none`.
        return RetryPolicy::NONE;
    }
    RetryPolicy {
        max_attempts,
        backoff: acc.backoff.map_or(d.backoff, |b| b.0),
        jitter: acc.jitter.map_or(d.jitter, |j| j.0),
    }
}

fn merge_bulkhead(
    specs: &Specs<'_, BulkheadPolicy, BulkheadTable>,
    origins: &mut Origins,
    errors: &mut Vec<FieldError>,
) -> BulkheadPolicy {
    let mut acc = BulkheadTable::default();
    for (prefix, spec) in specs {
        let (table, whole) = as_table(spec, |w| BulkheadTable {
            max_concurrent: w
                .writes(Field::MaxConcurrent)
                .then_some(w.value.max_concurrent),
            max_wait: w.writes(Field::MaxWait).then_some(Dsl(w.value.max_wait)),
        });
        take!(acc, table, origins, prefix, whole;
            max_concurrent => MaxConcurrent,
            max_wait => MaxWait,
        );
    }
    if acc.max_concurrent.is_none() {
        errors.push(FieldError::new(
            Field::MaxConcurrent,
            "is required when a bulkhead is configured",
        ));
    }
    BulkheadPolicy {
        max_concurrent: acc.max_concurrent.unwrap_or(1),
        max_wait: acc.max_wait.map_or(defaults::BULKHEAD_MAX_WAIT, |w| w.0),
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
    merge_sections(&sections)
}

/// The policy of `sections` (each with its key path), the later over the earlier, where each
/// field came from, and its errors: those of the merge itself, then the validator's.
fn merge_sections(sections: &[(Vec<String>, &Section)]) -> (Policy, Origins, Vec<FieldError>) {
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
    for (prefix, s) in sections {
        if let Some(t) = &s.timeout {
            policy.timeout = Some(t.0);
            origins.set(Field::Timeout, prefix, false);
        }
        if let Some(t) = &s.deadline {
            policy.deadline = Some(t.0);
            origins.set(Field::Deadline, prefix, false);
        }
        if let Some(r) = &s.rate {
            policy.rate_limit = Some(r.0);
            origins.set(Field::RateLimit, prefix, false);
        }
        if let Some(h) = &s.hedge {
            policy.hedge = Some(h.0);
            origins.set(Field::Hedge, prefix, false);
        }
        if let Some(a) = &s.adaptive {
            policy.adaptive = Some(a.0);
            origins.set(Field::Adaptive, prefix, false);
        }
        if let Some(t) = &s.throttle {
            policy.throttle = Some(t.0);
            origins.set(Field::Throttle, prefix, false);
        }
        if let Some(o) = &s.order {
            policy.order = Some(o.0.clone());
            origins.set(Field::Order, prefix, false);
        }
        if let Some(i) = s.idempotent {
            policy.idempotent = i;
            origins.set(Field::Idempotent, prefix, false);
        }
    }
    // The validator on the merged policy, less what only restates an error of the merge
    // itself (half a slow-call pair is not also "no trip rule").
    let merged: HashSet<Field> = errors.iter().map(|e| e.field).collect();
    if let Err(e) = policy.validate() {
        errors.extend(e.errors.into_iter().filter(|e| !follows_from(e, &merged)));
    }
    (policy, origins, errors)
}

/// Whether the rule of `e` reads the value of `e.field` alone: then a value from `default`
/// breaks it the same way in every policy that inherits the value, so it is reported once, at
/// `default`. A rule that reads another field is judged per policy (a policy may set the
/// other field).
fn on_its_own(e: &FieldError) -> bool {
    !matches!(e.rule, Rule::Order(_)) && e.reads.is_empty()
}

/// The message of `fe` shown at `path`: the bare message at the field's own key, else with
/// the field named (a layer's DSL string, or the layer of a field that is not set).
fn message_at(fe: &FieldError, path: &[String]) -> String {
    if path.last().map(String::as_str) == Some(fe.field.key()) {
        fe.message.clone()
    } else {
        fe.to_string()
    }
}

/// The errors of the values of the `default` section that are invalid on their own
/// ([`on_its_own`]) and the bounds of its keyed breakers, each added to `errors` once, at its
/// key, whether no policy, one or many inherit it: the policies do not report them again.
/// The same merge and the same validator as a policy's, over `default` alone.
fn check_default(
    src: &Source,
    tree: &Node,
    default: &Section,
    poison: &HashSet<Field>,
    errors: &mut Vec<ConfigError>,
) {
    let sections = [(vec!["default".to_owned()], default)];
    key_bounds(src, tree, &sections, errors);
    let (_, origins, field_errors) = merge_sections(&sections);
    for fe in field_errors {
        if follows_from(&fe, poison) || !on_its_own(&fe) {
            continue;
        }
        // A field `default` does not set has its documented default, which is valid.
        if let Some(path) = origins.0.get(&fe.field) {
            errors.push(src.error_at(tree.origin_of(path), path, message_at(&fe, path)));
        }
    }
}

/// Whether the validator's error `e` may only follow from a value that could not be read (a
/// field of `poisoned`): then it is not reported, as a compiler reports no follow-on errors.
fn follows_from(e: &FieldError, poisoned: &HashSet<Field>) -> bool {
    if poisoned.is_empty() {
        return false;
    }
    // A layer none of whose fields could be read: written as a value that did not read.
    let layer_lost = |layer| {
        Field::ALL
            .into_iter()
            .filter(|f| f.layer() == Some(layer))
            .all(|f| poisoned.contains(&f))
    };
    poisoned.contains(&e.field)
        || e.reads.iter().any(|f| poisoned.contains(f))
        || (matches!(e.rule, Rule::Order(_)) && Layer::DEFAULT_ORDER.into_iter().any(layer_lost))
}

/// The bounds of the breakers of keys of a policy, `default` first, the named section over it;
/// an invalid value is added to `errors` at its key.
fn key_bounds(
    src: &Source,
    tree: &Node,
    sections: &[(Vec<String>, &Section)],
    errors: &mut Vec<ConfigError>,
) -> KeyBounds {
    let mut bounds = KeyBounds::default();
    for (prefix, s) in sections {
        let at = |key: &str| {
            let mut path = prefix.clone();
            path.push(key.to_owned());
            path
        };
        match s.max_keys {
            Some(0) => {
                let path = at("max_keys");
                errors.push(src.error_at(
                    tree.origin_of(&path),
                    &path,
                    "must be at least 1, got 0".into(),
                ));
            }
            Some(n) => bounds.max_keys = Some(n as usize),
            None => {}
        }
        match &s.key_idle {
            Some(d) if d.0.is_zero() => {
                let path = at("key_idle");
                errors.push(src.error_at(
                    tree.origin_of(&path),
                    &path,
                    "must be non-zero, got 0s".into(),
                ));
            }
            Some(d) => bounds.key_idle = Some(d.0),
            None => {}
        }
    }
    bounds
}

/// Merges and validates every policy of `file` (read from `tree`); the validator's errors are
/// added to `errors`, each at the key that set the bad value.
pub(super) fn resolve(
    src: &Source,
    tree: &Node,
    file: &ConfigFile,
    poisoned: &Poisoned,
    errors: &mut Vec<ConfigError>,
) -> Policies {
    let mut map = BTreeMap::new();
    let mut keys = BTreeMap::new();
    let at_default = ["default".to_owned()];
    let no_poison = HashSet::new();
    let default_poison = poisoned.get(&at_default[..]).unwrap_or(&no_poison);
    if let Some(d) = &file.default {
        // Reported once, at `default`, not again for every policy inheriting it.
        check_default(src, tree, d, default_poison, errors);
    }
    for (name, section) in &file.policies {
        let own = vec!["policies".to_owned(), name.clone()];
        let own_sections = [(own.clone(), section)];
        let mut bound_errors = Vec::new();
        let mut bounds = key_bounds(src, tree, &own_sections, &mut bound_errors);
        if let Some(d) = &file.default {
            let inherited = key_bounds(src, tree, &[(vec!["default".into()], d)], &mut Vec::new());
            bounds.max_keys = bounds.max_keys.or(inherited.max_keys);
            bounds.key_idle = bounds.key_idle.or(inherited.key_idle);
        }
        let bounds_ok = bound_errors.is_empty();
        errors.append(&mut bound_errors);
        let (policy, origins, mut field_errors) = merge(name, file.default.as_ref(), section);
        // What `default` could not give is lost unless the policy sets it itself.
        let mut poison = poisoned.get(&own).cloned().unwrap_or_default();
        poison.extend(
            default_poison
                .iter()
                .copied()
                .filter(|f| !origins.0.get(f).is_some_and(|path| path.starts_with(&own))),
        );
        field_errors.retain(|e| !follows_from(e, &poison));
        if field_errors.is_empty() && poison.is_empty() && bounds_ok {
            map.insert(name.clone(), Arc::new(policy));
            if bounds != KeyBounds::default() {
                keys.insert(name.clone(), bounds);
            }
            continue;
        }
        // A value from `default` invalid on its own is reported there, once (`check_default`).
        field_errors.retain(|e| {
            !(on_its_own(e)
                && origins
                    .0
                    .get(&e.field)
                    .is_some_and(|path| path.starts_with(&at_default)))
        });
        for fe in field_errors {
            let path = origins.path(fe.field, &own);
            let mut message = message_at(&fe, &path);
            if !path.starts_with(&own) {
                message = format!("in policy `{name}`: {message}");
            }
            errors.push(src.error_at(tree.origin_of(&path), &path, message));
        }
    }
    let store = store_settings(src, tree, file, errors);
    for (name, section) in &file.policies {
        let own = ["policies".to_owned(), name.clone(), "scope".to_owned()];
        let (scope, path) = match (
            &section.scope,
            file.default.as_ref().and_then(|d| d.scope.as_ref()),
        ) {
            (Some(s), _) => (s.0, own.to_vec()),
            (None, Some(s)) => (s.0, vec!["default".to_owned(), "scope".to_owned()]),
            (None, None) => continue,
        };
        if !scope.is_shared() {
            continue;
        }
        let Some(policy) = map.get_mut(name) else {
            continue;
        };
        // The fleet's own rules (the one validator's), and the file's: a store to share with.
        let mut problems: Vec<String> = match &policy.breaker {
            None => vec![format!(
                "scope `{scope}` of policy `{name}` shares its breaker, but the policy has no `breaker`"
            )],
            Some(breaker) => crate::policy::scope_errors(breaker, scope)
                .into_iter()
                .map(|e| format!("scope `{scope}` of policy `{name}`: `{}`: {}", e.field, e.message))
                .collect(),
        };
        // A policy with no breaker has nothing to share: that one problem is enough.
        if file.store.is_none() && policy.breaker.is_some() {
            problems.push(format!(
                "scope `{scope}` of policy `{name}` needs a `[store]` table (`url`, `namespace`); \
                 a shared breaker never falls back to local silently"
            ));
        }
        if problems.is_empty() {
            Arc::make_mut(policy).scope = scope;
        }
        for message in problems {
            errors.push(src.error_at(tree.origin_of(&path), &path, message));
        }
    }
    Policies { map, keys, store }
}

/// The `[store]` table, validated; every problem is added to `errors` at its key.
fn store_settings(
    src: &Source,
    tree: &Node,
    file: &ConfigFile,
    errors: &mut Vec<ConfigError>,
) -> Option<StoreSettings> {
    let t = file.store.as_ref()?;
    let at = |key: &str| vec!["store".to_owned(), key.to_owned()];
    let mut ok = true;
    let mut required = |v: &Option<String>, key: &str| -> String {
        match v {
            Some(s) if !s.trim().is_empty() => s.clone(),
            Some(_) => {
                let path = at(key);
                errors.push(src.error_at(tree.origin_of(&path), &path, "must not be empty".into()));
                ok = false;
                String::new()
            }
            None => {
                let path = vec!["store".to_owned()];
                errors.push(src.error_at(
                    tree.origin_of(&path),
                    &path,
                    format!("missing key `{key}` in the `[store]` table"),
                ));
                ok = false;
                String::new()
            }
        }
    };
    let url = required(&t.url, "url");
    let namespace = required(&t.namespace, "namespace");
    let redis = url.starts_with("redis://") || url.starts_with("rediss://");
    if !url.is_empty() && !redis {
        let path = at("url");
        // The URL may hold a password: only its scheme is quoted.
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        errors.push(src.error_at(
            tree.origin_of(&path),
            &path,
            format!("unsupported URL scheme `{scheme}`; expected `redis://` or `rediss://`"),
        ));
        ok = false;
    }
    if let Some(d) = &t.flush_interval {
        use crate::scope::{MAX_FLUSH_INTERVAL, MIN_FLUSH_INTERVAL};
        if !(MIN_FLUSH_INTERVAL..=MAX_FLUSH_INTERVAL).contains(&d.0) {
            let path = at("flush_interval");
            let f = crate::dsl::format_duration;
            errors.push(src.error_at(
                tree.origin_of(&path),
                &path,
                format!(
                    "must be in {}..={}, got {}",
                    f(MIN_FLUSH_INTERVAL),
                    f(MAX_FLUSH_INTERVAL),
                    f(d.0)
                ),
            ));
            ok = false;
        }
    }
    ok.then(|| StoreSettings {
        url,
        namespace,
        replica: t.replica.clone(),
        flush_interval: t.flush_interval.as_ref().map(|d| d.0),
        on_error: t.on_error.as_ref().map(|d| d.0).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The validator's errors of `section` alone (a TOML policy section), each with whether
    /// its rule reads its field alone.
    fn judged(section: &str) -> Vec<(Field, bool)> {
        let section: Section = toml::from_str(section).unwrap();
        let (_, _, errors) = merge_sections(&[(vec!["default".into()], &section)]);
        errors.iter().map(|e| (e.field, on_its_own(e))).collect()
    }

    /// Which rules `check_default` may judge on `default` alone, pinned against the
    /// validator's own errors (each says which other fields its rule reads: `FieldError::reads`).
    #[test]
    fn rules_of_one_field_and_rules_across_fields() {
        use Field::*;
        let cases: &[(&str, &[(Field, bool)])] = &[
            ("[breaker]\ncooldown = \"0s\"", &[(Cooldown, true)]),
            ("[breaker]\nmin_calls = 0", &[(MinCalls, true)]),
            (
                "[breaker]\nconsecutive_failures = 0",
                &[(ConsecutiveFailures, true)],
            ),
            (
                "[breaker]\ncooldown_multiplier = 0.5",
                &[(CooldownMultiplier, true)],
            ),
            (
                "[breaker]\ncooldown_jitter = 2.0",
                &[(CooldownJitter, true)],
            ),
            ("[breaker]\nfailure_rate = 0", &[(FailureRate, true)]),
            (
                "[breaker]\nfailure_rate = 50\nwindow = \"5 calls\"\nmin_calls = 10",
                &[(MinCalls, false)],
            ),
            (
                "[breaker]\ncooldown = \"1m\"\ncooldown_multiplier = 2.0\ncooldown_max = \"10s\"",
                &[(CooldownMax, false)],
            ),
            (
                "[breaker]\nslow_call_duration = \"1s\"",
                // Not also "no trip rule": the half pair is the one mistake.
                &[(SlowCallDuration, false)],
            ),
            (
                "[breaker]\nslow_call_duration = \"0s\"\nslow_call_rate = 50",
                &[(SlowCallDuration, true)],
            ),
            ("timeout = \"0s\"", &[(Timeout, true)]),
            ("timeout = \"5s\"\ndeadline = \"1s\"", &[(Timeout, false)]),
            ("[retry]\nmax_attempts = 0", &[(MaxAttempts, true)]),
            ("[retry]\nmax_attempts = 3", &[(MaxAttempts, false)]),
            ("[bulkhead]\nmax_concurrent = 0", &[(MaxConcurrent, true)]),
            ("order = \"retry\"", &[(Order, false)]),
        ];
        for (section, expected) in cases {
            assert_eq!(judged(section), *expected, "{section}");
        }
    }
}
