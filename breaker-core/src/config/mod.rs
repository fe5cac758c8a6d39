//! Config files: named policies in TOML, YAML or JSON, environment overrides, a reloadable
//! registry and a JSON Schema. Needs the `config` feature (on by default).
//!
//! # Why
//! Thresholds belong in configuration, not in code: operators tune them per environment and
//! per dependency. A config mistake must never load silently (cases BR-38, BR-39): unknown keys
//! are errors, explicit invalid values are errors naming the field, and every DSL string goes
//! through the same parser and validator as the `#[circuit_breaker]` attribute.
//!
//! # The file
//! ```toml
//! [default]                        # every named policy inherits these
//! timeout = "2s"
//! retry = "3x exp(100ms, max 2s) full-jitter"
//! idempotent = true                # required by a retry: only idempotent calls are retried
//!
//! [default.breaker]                # a breaker as a table ...
//! failure_rate = "50%"
//! window = "100 calls"
//! min_calls = 20
//! cooldown = "30s"
//!
//! [policies.inventory]
//! retry = "5x exp"                 # ... or any section as one DSL string
//! deadline = "10s"
//! order = "timeout > retry > breaker"
//!
//! [policies.payments.breaker]
//! consecutive_failures = 3         # replaces the inherited trip rules (see below)
//! ```
//! YAML and JSON files have the same structure. See [`ConfigFile`], [`Section`],
//! [`BreakerTable`], [`RetryTable`] and [`BulkheadTable`] for every key, its range and its
//! default, and [`crate::dsl`] for the strings. `examples/breaker.{toml,yaml,json}` are complete
//! examples and `examples/breaker.schema.json` is the JSON Schema ([`json_schema`]).
//!
//! **Values.** `breaker`, `retry` and `bulkhead` are a DSL string or a table; durations are DSL
//! strings (`"30s"`, `"1m 30s"`); rates are numbers (`50`) or strings (`"50%"`); `window` is
//! `"100 calls"` or `"60s"`; `order` is `"timeout > retry > breaker"`. A key is either left
//! out (it takes the inherited or default value) or holds a value: an explicit `null` (YAML
//! `~`, JSON `null`) is an error at the key, not a way to unset an inherited value.
//!
//! **Defaults and inheritance.** A named policy is its `default` section overlaid with its own
//! keys, field by field. A layer written as one DSL string sets the fields the string writes,
//! as the same keys in a table would ([`Written`]): under a `default` with `breaker.cooldown =
//! "10s"`, `breaker = "5 consecutive"` trips on 5 consecutive failures and stays open 10 s;
//! `retry = "5x"` keeps the default's backoff and jitter; `retry = "none"` is the whole retry.
//! The breaker's trip rules (`consecutive_failures`, `failure_rate`, `slow_call_*`) are one
//! group: a section that sets any of them replaces all the trip rules it inherits. Keys set
//! nowhere take the documented defaults; a layer set nowhere is not in the pipeline. The
//! `default` section alone is not a policy, but it is checked on its own: a value in it that
//! is invalid by itself (`cooldown = "0s"`) is an error once, at its key
//! (`default.breaker.cooldown`), whether no policy, one or many inherit it. A rule between two
//! fields (`min_calls` and `window`, `timeout` and `deadline`, a retry and `idempotent`) is
//! judged in each policy, as a policy may set the other field; its error at a key of `default`
//! says in which policy it fails.
//!
//! **Environment overrides.** A variable `BREAKER__<PATH>` sets the value at `<PATH>`: the
//! path's keys are separated by `__` and lowercased, so
//! `BREAKER__POLICIES__INVENTORY__RETRY="5x exp"` sets `policies.inventory.retry` (a shell
//! cannot set a variable with `-` in its name, so `MY_SVC` addresses a policy `my-svc` when
//! no policy is named `my_svc` and no other reads the same) and
//! `BREAKER__DEFAULT__BREAKER__COOLDOWN=10s` sets `default.breaker.cooldown`. A value that
//! reads as a JSON number or boolean is one (`5`, `true`); anything else is a string. An
//! override may add keys to a policy of the file (or to `default`), not policies: an override
//! of a policy the file does not have is an error, as is one for a key that does not exist;
//! it cannot reach inside a value written as a DSL string (override the whole string). [`Loader::file`] reads the process environment; [`Loader::env_vars`] supplies
//! variables explicitly.
//!
//! **Errors** ([`ConfigError`]) name the file, the line and column, and the key path:
//! `breaker.toml:12:24: policies.inventory.breaker.consecutive_failures: must be at least 1,
//! got 0`. Every mistake is reported at once, in file order, as a compiler does: every unknown
//! key (with the key most likely meant: a misspelling such as `timout`, another form such as
//! `retries`, `policy`, `timeout_ms` or `maxAttempts`, or an attribute option such as
//! `threshold`), every value of the wrong type, every invalid DSL string and every invalid
//! value of every policy; the validator's errors that would only follow from a value that
//! could not be read are left out. Only a file that is not well-formed TOML, YAML or JSON
//! stops at its first syntax error. Positions are the same in the three formats: the 1-based
//! line and character column of the first character of the offending key or value. A value
//! from an environment variable is reported with the variable's name instead of a position.
//!
//! **Names and bounds.** A policy name is 1 to 64 lowercase ASCII letters, digits, `_` and `-`
//! ([`is_valid_policy_name`]), so it is a bare TOML key (what `breaker check` prints loads back
//! the same) and an environment variable can address it. A file is at most
//! [`MAX_INPUT_BYTES`] (1 MiB), nests at most [`MAX_DEPTH`] levels, and a YAML file's aliases
//! expand to at most [`MAX_NODES`] values, so a bad file is refused in milliseconds and never
//! stalls a start-up or a reload.
//!
//! # Reloading
//! A [`PolicyRegistry`] holds the policies of a source and reloads them atomically
//! ([`PolicyRegistry::reload`], or on every change of the file with [`PolicyRegistry::watch`]
//! and the `watch` feature). A reload reaches every layer: the pipelines it hands out
//! ([`PolicyRegistry::pipeline`], a [`LivePipeline`]) and those of
//! `#[circuit_breaker(policy = "..")]` functions run each new call under the policy's current
//! retry, timeout, deadline and bulkhead, calls in flight finish under the ones they started
//! with, and breakers keep their state. A failed reload keeps the previous policies and says
//! why; so does one that drops a policy still in use. Every reload is a `tracing` event and a
//! count of [`RELOADS_TOTAL`]. [`install`] makes a registry the process's, after checking it
//! against every annotated function of the program.
//!
//! # Examples
//! ```
//! # use breaker_core as breaker;
//! use breaker::config::{load_str, Format};
//! let policies = load_str(
//!     r#"
//!     [default]
//!     breaker = "5 consecutive, open 30s"
//!     [policies.inventory]
//!     retry = "3x exp jitter"
//!     idempotent = true
//!     "#,
//!     Format::Toml,
//! )?;
//! let inventory = policies.get("inventory").unwrap();
//! assert_eq!(inventory.breaker.as_ref().unwrap().consecutive_failures, Some(5));
//! assert_eq!(inventory.retry.unwrap().max_attempts, 3);
//!
//! let err = load_str("[policies.a.breaker]\nconsecutive_failures = 0\n", Format::Toml)
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "2:24: policies.a.breaker.consecutive_failures: must be at least 1, got 0"
//! );
//! # Ok::<(), breaker::config::ConfigErrors>(())
//! ```

mod env;
mod error;
mod file;
mod format;
mod global;
#[cfg(feature = "tokio")]
mod live;
mod load;
mod merge;
mod read;
mod registry;
mod tree;
mod value;
#[cfg(feature = "watch")]
mod watch;

pub use error::{ConfigError, ConfigErrors};
pub use file::{BreakerTable, BulkheadTable, ConfigFile, RetryTable, Section, StoreTable};
pub(crate) use global::key_mismatch;
pub use global::{install, installed, InstallError};
#[cfg(feature = "tokio")]
pub use live::LivePipeline;
pub use load::{
    load_file, load_str, Format, KeyBounds, Loader, Policies, StoreSettings, ENV_PREFIX,
};
pub use read::{is_valid_policy_name, MAX_NAME_LEN};
pub use registry::{PolicyRegistry, ReloadReport, RELOADS_TOTAL};
pub use tree::{MAX_DEPTH, MAX_INPUT_BYTES, MAX_NODES};
pub use value::{Dsl, DslValue, Percent, Spec, Written};
#[cfg(feature = "watch")]
pub use watch::ConfigWatch;

use crate::dsl::{format_duration, Order};
use crate::policy::Policy;
use std::fmt;

/// The JSON Schema of a config file, generated from [`ConfigFile`], pretty-printed with a
/// trailing newline (this is `examples/breaker.schema.json`, and what `breaker schema`
/// prints).
///
/// Optional keys may be left out but are never `null` (the loader refuses an explicit
/// `null`), so the schema does not allow `null` either.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(ConfigFile);
    if let Some(root) = schema.as_object_mut() {
        let mut value = serde_json::Value::Object(std::mem::take(root));
        no_null_properties(&mut value);
        if let serde_json::Value::Object(map) = value {
            *root = map;
        }
    }
    // The schema's own `Serialize` writes its keywords in their usual order.
    let mut out = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    out.push('\n');
    out
}

/// Removes `null` from the schema of every property (schemars allows it for `Option` fields).
fn no_null_properties(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Value::Object(map) = schema else { return };
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            let Value::Object(p) = property else { continue };
            if let Some(Value::Array(types)) = p.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    p.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = p.get_mut("anyOf") {
                any.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
                if let [Value::Object(only)] = any.as_slice() {
                    let only = only.clone();
                    p.remove("anyOf");
                    p.extend(only);
                }
            }
        }
    }
    for child in map.values_mut() {
        no_null_properties(child);
    }
}

/// Writes one effective policy as a TOML section with every layer in the DSL, defaults filled
/// in: the output of `breaker check`, and itself a valid config that loads to the same policy
/// (the default order of the layers is shown as a comment).
pub fn write_policy(out: &mut impl fmt::Write, name: &str, policy: &Policy) -> fmt::Result {
    write_section(
        out,
        name,
        policy,
        KeyBounds::default(),
        crate::scope::Scope::Local,
    )
}

fn write_section(
    out: &mut impl fmt::Write,
    name: &str,
    policy: &Policy,
    keys: KeyBounds,
    scope: crate::scope::Scope,
) -> fmt::Result {
    writeln!(out, "[policies.{}]", toml_key(name))?;
    // A breaker whose DSL string leaves out what it does not use (the window of a breaker
    // without rate rules) is written as a table, with every field, to load back the same.
    let breaker_table = policy
        .breaker
        .as_ref()
        .filter(|b| crate::dsl::parse_breaker(&b.to_string()).ok().as_ref() != Some(*b));
    if let (Some(b), None) = (&policy.breaker, breaker_table) {
        writeln!(out, "breaker = \"{b}\"")?;
    }
    if let Some(r) = &policy.retry {
        writeln!(out, "retry = \"{r}\"")?;
    }
    if let Some(t) = policy.timeout {
        writeln!(out, "timeout = \"{}\"", format_duration(t))?;
    }
    if let Some(d) = policy.deadline {
        writeln!(out, "deadline = \"{}\"", format_duration(d))?;
    }
    if let Some(b) = &policy.bulkhead {
        writeln!(out, "bulkhead = \"{b}\"")?;
    }
    if let Some(r) = &policy.rate_limit {
        writeln!(out, "rate = \"{r}\"")?;
    }
    if let Some(h) = &policy.hedge {
        writeln!(out, "hedge = \"{h}\"")?;
    }
    if let Some(a) = &policy.adaptive {
        writeln!(out, "adaptive = \"{a}\"")?;
    }
    if let Some(t) = &policy.throttle {
        writeln!(out, "throttle = \"{t}\"")?;
    }
    match &policy.order {
        Some(order) => writeln!(out, "order = \"{}\"", Order(order.clone()))?,
        // The default order, as a comment: written as a key it would load as an explicit
        // order, which is not the same policy.
        None if policy.configured_layers().len() > 1 => writeln!(
            out,
            "# order = \"{}\" (the default)",
            Order(policy.effective_order())
        )?,
        None => {}
    }
    writeln!(out, "idempotent = {}", policy.idempotent)?;
    if let Some(n) = keys.max_keys {
        writeln!(out, "max_keys = {n}")?;
    }
    if let Some(d) = keys.key_idle {
        writeln!(out, "key_idle = \"{}\"", format_duration(d))?;
    }
    if scope.is_shared() {
        writeln!(out, "scope = \"{scope}\"")?;
    }
    if let Some(b) = breaker_table {
        write_breaker_table(out, name, b)?;
    }
    Ok(())
}

fn write_breaker_table(
    out: &mut impl fmt::Write,
    name: &str,
    b: &crate::breaker::BreakerPolicy,
) -> fmt::Result {
    let d = |d: std::time::Duration| format!("\"{}\"", format_duration(d));
    writeln!(out, "[policies.{}.breaker]", toml_key(name))?;
    if let Some(n) = b.consecutive_failures {
        writeln!(out, "consecutive_failures = {n}")?;
    }
    if let Some(p) = b.failure_rate_percent {
        writeln!(out, "failure_rate = {p:?}")?;
    }
    if let Some(s) = b.slow_call {
        writeln!(out, "slow_call_duration = {}", d(s.duration))?;
        writeln!(out, "slow_call_rate = {:?}", s.rate_percent)?;
    }
    writeln!(out, "window = \"{}\"", b.window)?;
    writeln!(out, "min_calls = {}", b.min_calls)?;
    writeln!(out, "cooldown = {}", d(b.cooldown))?;
    writeln!(out, "cooldown_multiplier = {:?}", b.cooldown_multiplier)?;
    writeln!(out, "cooldown_max = {}", d(b.cooldown_max))?;
    writeln!(out, "cooldown_jitter = {:?}", b.cooldown_jitter)?;
    writeln!(out, "half_open_probes = {}", b.half_open_probes)?;
    writeln!(out, "successes_to_close = {}", b.successes_to_close)?;
    if let Some(w) = b.max_probe_wait {
        writeln!(out, "max_probe_wait = {}", d(w))?;
    }
    writeln!(out, "neutral_probe = \"{}\"", b.neutral_probe)
}

/// A policy name as a TOML key: every name the loader accepts is a bare key
/// ([`is_valid_policy_name`]); any other is quoted with TOML's own escaping.
fn toml_key(name: &str) -> String {
    if is_valid_policy_name(name) {
        name.to_owned()
    } else {
        toml::Value::String(name.to_owned()).to_string()
    }
}

impl fmt::Display for Policies {
    /// Every policy as by [`write_policy`], with its bounds on keyed breakers, separated by
    /// blank lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, policy)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write_section(f, name, policy, self.key_bounds(name), self.scope(name))?;
        }
        if let Some(st) = self.store() {
            f.write_str("\n[store]\n")?;
            writeln!(f, "url = {}", toml::Value::String(redacted_url(&st.url)))?;
            writeln!(
                f,
                "namespace = {}",
                toml::Value::String(st.namespace.clone())
            )?;
            if let Some(r) = &st.replica {
                writeln!(f, "replica = {}", toml::Value::String(r.clone()))?;
            }
            if let Some(d) = st.flush_interval {
                writeln!(f, "flush_interval = \"{}\"", format_duration(d))?;
            }
            writeln!(f, "on_error = \"{}\"", st.on_error)?;
        }
        Ok(())
    }
}

/// `url` with the password of its user info replaced by `***`.
pub(crate) fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let shown = match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None => userinfo.to_owned(),
            };
            format!("{scheme}://{shown}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}
