//! Reading a config: the file formats, environment overrides, inheritance and validation.

use super::error::{ConfigError, ConfigErrors};
use super::file::{BreakerTable, BulkheadTable, ConfigFile, RetryTable, Section};
use super::value::{Dsl, Percent, Spec};
use crate::breaker::{BreakerPolicy, FieldError, SlowCall};
use crate::dsl::{self, default_min_calls};
use crate::policy::{BulkheadPolicy, Policy};
use crate::retry::{Backoff, Jitter, RetryPolicy};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The prefix of environment variables that override config values.
pub const ENV_PREFIX: &str = "BREAKER__";

/// A config file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// TOML (`.toml`).
    Toml,
    /// YAML (`.yaml`, `.yml`).
    Yaml,
    /// JSON (`.json`).
    Json,
}

impl Format {
    /// The format named by a file's extension, if it is one of `toml`, `yaml`, `yml`, `json`.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// The effective named policies of a config, with defaults filled in and validated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policies {
    map: BTreeMap<String, Arc<Policy>>,
}

impl Policies {
    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.map.get(name).cloned()
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Name and policy pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Policy>)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many named policies there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[derive(Clone, Debug)]
enum SourceKind {
    File(PathBuf),
    Text { text: String, format: Format },
}

#[derive(Clone, Debug)]
enum Env {
    None,
    Process,
    Vars(Vec<(String, String)>),
}

/// Reads a config from a file or a string, applies environment overrides, fills in the
/// defaults and validates every policy. See the [module docs](super) for the file layout.
///
/// ```
/// use breaker_core::config::{Format, Loader};
/// let text = "[policies.inventory]\nretry = \"3x exp jitter\"\nidempotent = true\n";
/// let policies = Loader::text(text, Format::Toml)
///     .env_vars([("BREAKER__POLICIES__INVENTORY__TIMEOUT", "2s")])
///     .load()?;
/// let inventory = policies.get("inventory").unwrap();
/// assert_eq!(inventory.retry.unwrap().max_attempts, 3);
/// assert_eq!(inventory.timeout, Some(std::time::Duration::from_secs(2)));
/// # Ok::<(), breaker_core::config::ConfigErrors>(())
/// ```
#[derive(Clone, Debug)]
pub struct Loader {
    source: SourceKind,
    env: Env,
}

impl Loader {
    /// Reads `path`, in the format its extension names, with overrides from the process
    /// environment (`BREAKER__...`; see [`Loader::env_vars`] and [`Loader::no_env`]).
    pub fn file(path: impl Into<PathBuf>) -> Loader {
        Loader {
            source: SourceKind::File(path.into()),
            env: Env::Process,
        }
    }

    /// Reads `text` in `format`, without environment overrides.
    pub fn text(text: impl Into<String>, format: Format) -> Loader {
        Loader {
            source: SourceKind::Text {
                text: text.into(),
                format,
            },
            env: Env::None,
        }
    }

    /// Takes overrides from these variables instead of the process environment; those not
    /// starting with `BREAKER__` are ignored.
    pub fn env_vars<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Loader {
        self.env = Env::Vars(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// Applies no environment overrides.
    pub fn no_env(mut self) -> Loader {
        self.env = Env::None;
        self
    }

    /// Loads, overrides, merges and validates.
    ///
    /// # Errors
    /// [`ConfigErrors`]: a file that cannot be read, a syntax or type error, an unknown key, an
    /// invalid DSL string (the first such error), then every validation error of every policy.
    pub fn load(&self) -> Result<Policies, ConfigErrors> {
        let src = self.read()?;
        let file = parse(&src)?;
        let vars = self.vars();
        let (file, overridden) = apply_env(&src, file, &vars)?;
        resolve(&src, &file, &overridden)
    }

    /// Loads and applies the overrides, without merging or validating.
    ///
    /// # Errors
    /// As [`Loader::load`], without the validation errors.
    pub fn load_file(&self) -> Result<ConfigFile, ConfigErrors> {
        let src = self.read()?;
        let file = parse(&src)?;
        Ok(apply_env(&src, file, &self.vars())?.0)
    }

    fn vars(&self) -> Vec<(String, String)> {
        let mut vars: Vec<_> = match &self.env {
            Env::None => Vec::new(),
            Env::Process => std::env::vars().collect(),
            Env::Vars(v) => v.clone(),
        };
        vars.retain(|(k, _)| k.starts_with(ENV_PREFIX));
        vars.sort();
        vars
    }

    // The error path is cold and the public API returns `ConfigErrors` (a `Vec`).
    #[allow(clippy::result_large_err)]
    fn read(&self) -> Result<Source, ConfigError> {
        match &self.source {
            SourceKind::Text { text, format } => Ok(Source {
                file: None,
                format: *format,
                text: text.clone(),
            }),
            SourceKind::File(path) => {
                let error = |message: String| ConfigError {
                    file: Some(path.clone()),
                    env: None,
                    line: None,
                    column: None,
                    key_path: ".".into(),
                    message,
                };
                let format = Format::from_path(path).ok_or_else(|| {
                    error(
                        "unknown file format; expected a `.toml`, `.yaml`, `.yml` or `.json` file"
                            .into(),
                    )
                })?;
                let text = std::fs::read_to_string(path)
                    .map_err(|e| error(format!("cannot read the file: {e}")))?;
                Ok(Source {
                    file: Some(path.clone()),
                    format,
                    text,
                })
            }
        }
    }
}

/// Loads `path` with overrides from the process environment; see [`Loader::file`].
///
/// # Errors
/// See [`Loader::load`].
pub fn load_file(path: impl AsRef<Path>) -> Result<Policies, ConfigErrors> {
    Loader::file(path.as_ref()).load()
}

/// Loads `text` in `format`, without environment overrides; see [`Loader::text`].
///
/// # Errors
/// See [`Loader::load`].
pub fn load_str(text: &str, format: Format) -> Result<Policies, ConfigErrors> {
    Loader::text(text, format).load()
}

pub(crate) struct Source {
    file: Option<PathBuf>,
    format: Format,
    text: String,
}

impl Source {
    fn error(&self, key_path: &[String], message: String) -> ConfigError {
        let (line, column) = locate(self, key_path).unzip();
        ConfigError {
            file: self.file.clone(),
            env: None,
            line,
            column,
            key_path: join(key_path),
            message,
        }
    }

    fn at_offset(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        (line, column)
    }
}

fn join(path: &[String]) -> String {
    if path.is_empty() {
        ".".to_owned()
    } else {
        path.join(".")
    }
}

/// Strips serde_json's and serde_yaml_ng's own " at line L column C" suffix.
/// Also strips serde_yaml_ng's leading "{key path}: ", since the error has its own key path.
fn strip_position(message: String) -> String {
    let message = match message.rfind(" at line ") {
        Some(i) if message[i..].contains(" column ") => message[..i].to_owned(),
        _ => message,
    };
    match message.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains(' ') && path.contains('.') => {
            rest.to_owned()
        }
        _ => message,
    }
}

#[allow(clippy::result_large_err)]
fn parse(src: &Source) -> Result<ConfigFile, ConfigError> {
    let error = |path: String, message: String, at: Option<(usize, usize)>| ConfigError {
        file: src.file.clone(),
        env: None,
        line: at.map(|a| a.0),
        column: at.map(|a| a.1),
        key_path: path,
        message,
    };
    match src.format {
        Format::Toml => {
            let toml_error = |path: String, e: &toml::de::Error| {
                error(
                    path,
                    e.message().trim_end().to_owned(),
                    e.span().map(|s| src.at_offset(s.start)),
                )
            };
            let d = toml::Deserializer::parse(&src.text).map_err(|e| toml_error(".".into(), &e))?;
            serde_path_to_error::deserialize(d)
                .map_err(|e| toml_error(e.path().to_string(), e.inner()))
        }
        Format::Json => {
            let mut d = serde_json::Deserializer::from_str(&src.text);
            let file: ConfigFile = serde_path_to_error::deserialize(&mut d).map_err(|e| {
                let inner = e.inner();
                let at = (inner.line() > 0).then(|| (inner.line(), inner.column()));
                error(e.path().to_string(), strip_position(inner.to_string()), at)
            })?;
            d.end().map_err(|e| {
                error(
                    ".".into(),
                    strip_position(e.to_string()),
                    Some((e.line(), e.column())),
                )
            })?;
            Ok(file)
        }
        Format::Yaml => {
            let d = serde_yaml_ng::Deserializer::from_str(&src.text);
            serde_path_to_error::deserialize(d).map_err(|e| {
                let inner = e.inner();
                let at = inner.location().map(|l| (l.line(), l.column()));
                error(e.path().to_string(), strip_position(inner.to_string()), at)
            })
        }
    }
}

// ---- locating a key path in the source ----

const MARK: &str = "\u{0}breaker-locate\u{0}";

/// Finds where `path` is in the source by walking to it with serde and failing there: the
/// format's own error then carries the position.
fn locate(src: &Source, path: &[String]) -> Option<(usize, usize)> {
    let seed = Locate(path);
    match src.format {
        Format::Toml => {
            let d = toml::Deserializer::parse(&src.text).ok()?;
            let e = seed.deserialize(d).err()?;
            (e.message() == MARK).then_some(())?;
            e.span().map(|s| src.at_offset(s.start))
        }
        Format::Json => {
            let mut d = serde_json::Deserializer::from_str(&src.text);
            let e = seed.deserialize(&mut d).err()?;
            e.to_string()
                .starts_with(MARK)
                .then(|| (e.line(), e.column()))
        }
        Format::Yaml => {
            let d = serde_yaml_ng::Deserializer::from_str(&src.text);
            let e = seed.deserialize(d).err()?;
            let l = e.location()?;
            e.to_string().contains(MARK).then(|| (l.line(), l.column()))
        }
    }
}

struct Locate<'p>(&'p [String]);

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("anything")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match self.0.split_first() {
                Some((first, rest)) if *first == key => {
                    return map.next_value_seed(Located(rest));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The value at the end of the path: fails from inside the format's deserializer, so the
/// error carries the value's position.
struct Located<'p>(&'p [String]);

impl<'de> DeserializeSeed<'de> for Located<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.0.is_empty() {
            d.deserialize_any(Fail)
        } else {
            d.deserialize_any(Locate(self.0))
        }
    }
}

struct Fail;

impl<'de> Visitor<'de> for Fail {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("anything")
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(MARK))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(MARK))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(MARK))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(MARK))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(MARK))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(MARK))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(MARK))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(MARK))
    }
}

// ---- environment overrides ----

/// The key paths set by environment variables, with the variables' names.
type Overrides = Vec<(Vec<String>, String)>;

/// Applies `BREAKER__A__B__C=value` overrides: the path is the variable name after the prefix,
/// split at `__` and lowercased. A value that reads as a JSON number or boolean is one;
/// anything else is a string.
#[allow(clippy::result_large_err)]
fn apply_env(
    src: &Source,
    file: ConfigFile,
    vars: &[(String, String)],
) -> Result<(ConfigFile, Overrides), ConfigError> {
    if vars.is_empty() {
        return Ok((file, Vec::new()));
    }
    let env_error = |name: &str, path: &[String], message: String| ConfigError {
        file: src.file.clone(),
        env: Some(name.to_owned()),
        line: None,
        column: None,
        key_path: join(path),
        message,
    };
    let mut tree = serde_json::to_value(&file).expect("a config file serializes to JSON");
    let mut overridden = Vec::new();
    for (name, value) in vars {
        let path: Vec<String> = name[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(env_error(
                name,
                &path,
                "empty key in the variable name".into(),
            ));
        }
        let value = match serde_json::from_str::<serde_json::Value>(value) {
            Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v,
            _ => serde_json::Value::String(value.clone()),
        };
        let mut node = &mut tree;
        for (i, key) in path.iter().enumerate() {
            if node.is_null() {
                *node = serde_json::Value::Object(Default::default());
            }
            let Some(obj) = node.as_object_mut() else {
                return Err(env_error(
                    name,
                    &path,
                    format!(
                        "cannot override inside `{}`: it is not a table (a DSL string is \
                         overridden whole, as `{ENV_PREFIX}{}`)",
                        join(&path[..i]),
                        path[..i].join("__").to_ascii_uppercase()
                    ),
                ));
            };
            node = obj.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
        *node = value;
        overridden.push((path, name.clone()));
    }
    let file: ConfigFile = serde_path_to_error::deserialize(tree).map_err(|e| {
        let path: Vec<String> = e.path().to_string().split('.').map(str::to_owned).collect();
        let name = overridden
            .iter()
            .find(|(p, _)| path.starts_with(p) || p.starts_with(&path))
            .or(overridden.first())
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        env_error(&name, &path, e.inner().to_string())
    })?;
    Ok((file, overridden))
}

// ---- inheritance and validation ----

/// Where each field of a merged policy was set: the key path in the file.
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

fn resolve(
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
