//! Reading the [tree](super::tree) into a [`ConfigFile`], every table on its own, so that every
//! unknown key, value of the wrong type and invalid DSL string is reported, not the first.
//!
//! Each value is read with its type's own `Deserialize` (so a value is read the same way
//! everywhere, with serde's wording of type errors); what the reader adds is the walk over the
//! tables, the unknown-key checks with their suggestions, and the positions.

use super::error::ConfigError;
use super::file::{BreakerTable, BulkheadTable, ConfigFile, RetryTable, Section, StoreTable};
use super::load::Source;
use super::tree::{Entry, Kind, Node, Origin};
use super::value::{Dsl, DslValue, Spec};
use crate::__private::AttrOption;
use crate::layer::Layer;
use crate::policy::Field;
use serde::de::{self, Deserialize, Deserializer, IntoDeserializer, Visitor};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// The keys of the top of a file.
pub(super) const FILE_KEYS: &[&str] = &["$schema", "default", "policies", "store"];
/// The keys of the `[store]` table.
pub(super) const STORE_KEYS: &[&str] =
    &["url", "namespace", "replica", "flush_interval", "on_error"];
/// The keys of a policy section (and of `default`).
pub(super) const SECTION_KEYS: &[&str] = &[
    "breaker",
    "retry",
    "timeout",
    "deadline",
    "bulkhead",
    "order",
    "idempotent",
    "max_keys",
    "key_idle",
    "scope",
];
/// The keys of a breaker table.
pub(super) const BREAKER_KEYS: &[&str] = &[
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
/// The keys of a retry table.
pub(super) const RETRY_KEYS: &[&str] = &["max_attempts", "backoff", "jitter"];
/// The keys of a bulkhead table.
pub(super) const BULKHEAD_KEYS: &[&str] = &["max_concurrent", "max_wait"];

/// The longest policy name.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` may name a policy: 1 to [`MAX_NAME_LEN`] lowercase ASCII letters, digits,
/// `_` and `-`. Such a name is a bare TOML key, so `breaker check` prints it as written and
/// loading the printed file gives the same names; and an environment variable
/// (`BREAKER__POLICIES__<NAME>__...`, lowercased) can address it.
pub fn is_valid_policy_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Why `name` is not a valid policy name, for errors.
pub(crate) fn invalid_name_message(name: &str) -> String {
    format!(
        "invalid policy name {name:?}: a name is 1 to {MAX_NAME_LEN} lowercase ASCII letters, \
         digits, `_` and `-` (so that it is a bare TOML key and an environment variable can \
         address it)"
    )
}

/// The fields whose value could not be read, by section (`["default"]`,
/// `["policies", name]`): the validator's errors about them would only follow from the read
/// error, so they are not reported.
pub(super) type Poisoned = HashMap<Vec<String>, HashSet<Field>>;

/// Reads a tree, collecting every error.
pub(super) struct Reader<'s> {
    src: &'s Source,
    pub(super) errors: Vec<ConfigError>,
    pub(super) poisoned: Poisoned,
    path: Vec<String>,
    /// The section being read (`["default"]` or `["policies", name]`).
    section: Vec<String>,
}

impl<'s> Reader<'s> {
    pub(super) fn new(src: &'s Source) -> Reader<'s> {
        Reader {
            src,
            errors: Vec::new(),
            poisoned: Poisoned::new(),
            path: Vec::new(),
            section: Vec::new(),
        }
    }

    fn error(&mut self, origin: &Origin, message: String) {
        self.errors
            .push(self.src.error_at(origin, &self.path, message));
    }

    fn poison(&mut self, fields: impl IntoIterator<Item = Field>) {
        if self.section.is_empty() {
            return;
        }
        self.poisoned
            .entry(self.section.clone())
            .or_default()
            .extend(fields);
    }

    /// Poisons the field `key` names in the current table, or every field of the layer it
    /// names.
    fn poison_key(&mut self, key: &str) {
        if let Some(layer) = Layer::from_name(key) {
            self.poison(Field::ALL.into_iter().filter(|f| f.layer() == Some(layer)));
        } else if let Some(f) = Field::ALL.into_iter().find(|f| f.key() == key) {
            self.poison([f]);
        }
    }

    /// The entries of a table with the keys `keys`, each key once and holding a value; every
    /// other entry is reported. `None` (reported) when `node` is not a table.
    fn entries<'n>(
        &mut self,
        node: &'n Node,
        keys: &[&str],
        expected: &str,
        table: Option<Layer>,
    ) -> Option<Vec<&'n Entry>> {
        let Kind::Map(entries) = &node.kind else {
            self.error(
                &node.origin,
                format!("invalid type: {}, expected {expected}", node.unexpected()),
            );
            return None;
        };
        let mut seen: HashMap<&str, &Origin> = HashMap::new();
        let mut known = Vec::new();
        for e in entries {
            self.path.push(e.key.clone());
            if let Some(first) = seen.insert(&e.key, &e.key_origin) {
                let first = match first {
                    Origin::At(p) => format!(" (first at {p})"),
                    Origin::Env(_) => String::new(),
                };
                self.error(&e.key_origin, format!("duplicate key `{}`{first}", e.key));
            } else if !keys.contains(&e.key.as_str()) {
                let message = unknown_key(&e.key, keys, table);
                // What the key was likely meant to set is lost, unless the table sets it too.
                if let Some(f) = suggestion(&e.key, keys, table) {
                    if !entries.iter().any(|other| other.key == f) {
                        self.poison_key(f);
                    }
                }
                self.error(&e.key_origin, message);
            } else if e.value.kind == Kind::Null {
                self.poison_key(&e.key);
                self.error(
                    &e.key_origin,
                    "explicit `null`; remove the key to take the inherited or default value".into(),
                );
            } else {
                known.push(e);
            }
            self.path.pop();
        }
        Some(known)
    }

    /// One value, by its type's `Deserialize`; `None` (reported, and the field poisoned) when
    /// it does not read.
    fn leaf<T: for<'de> Deserialize<'de>>(&mut self, e: &Entry) -> Option<T> {
        self.path.push(e.key.clone());
        let value = match T::deserialize(NodeDe(&e.value)) {
            Ok(v) => Some(v),
            Err(err) => {
                self.poison_key(&e.key);
                self.error(&e.value.origin, err.0);
                None
            }
        };
        self.path.pop();
        value
    }

    /// A layer written as a DSL string or a table.
    fn spec<T: DslValue, Table>(
        &mut self,
        e: &Entry,
        table: impl FnOnce(&mut Self, &Node) -> Option<Table>,
    ) -> Option<Spec<T, Table>> {
        let spec = match &e.value.kind {
            Kind::Str(_) => self.leaf::<Dsl<T>>(e).map(|d| Spec::Dsl(d.0)),
            Kind::Map(_) => {
                self.path.push(e.key.clone());
                let t = table(self, &e.value).map(Spec::Table);
                self.path.pop();
                t
            }
            _ => {
                self.path.push(e.key.clone());
                self.poison_key(&e.key);
                self.error(
                    &e.value.origin,
                    format!(
                        "invalid type: {}, expected a table or a string: {}",
                        e.value.unexpected(),
                        T::DESCRIPTION
                    ),
                );
                self.path.pop();
                None
            }
        };
        spec
    }

    /// The whole file.
    pub(super) fn file(&mut self, root: &Node) -> ConfigFile {
        let mut file = ConfigFile::default();
        let Some(entries) =
            self.entries(root, FILE_KEYS, "a table of `default` and `policies`", None)
        else {
            return file;
        };
        for e in entries {
            match e.key.as_str() {
                "$schema" => file.schema = self.leaf(e),
                "default" => {
                    self.path.push(e.key.clone());
                    self.section = self.path.clone();
                    file.default = self.section_table(&e.value);
                    self.section.clear();
                    self.path.pop();
                }
                "store" => {
                    self.path.push(e.key.clone());
                    file.store = self.store_table(&e.value);
                    self.path.pop();
                }
                _ => {
                    self.path.push(e.key.clone());
                    file.policies = self.policies(&e.value);
                    self.path.pop();
                }
            }
        }
        file
    }

    fn policies(&mut self, node: &Node) -> BTreeMap<String, Section> {
        let mut policies = BTreeMap::new();
        let Kind::Map(entries) = &node.kind else {
            self.error(
                &node.origin,
                format!(
                    "invalid type: {}, expected a table of named policies",
                    node.unexpected()
                ),
            );
            return policies;
        };
        let mut seen = HashSet::new();
        for e in entries {
            self.path.push(e.key.clone());
            if !seen.insert(e.key.as_str()) {
                self.error(&e.key_origin, format!("duplicate policy `{}`", e.key));
            } else if !is_valid_policy_name(&e.key) {
                self.error(&e.key_origin, invalid_name_message(&e.key));
                // Its keys are still read, so that their mistakes are listed too.
                self.section = self.path.clone();
                let _ = self.section_table(&e.value);
                self.section.clear();
            } else {
                self.section = self.path.clone();
                if let Some(section) = self.section_table(&e.value) {
                    policies.insert(e.key.clone(), section);
                }
                self.section.clear();
            }
            self.path.pop();
        }
        policies
    }

    fn section_table(&mut self, node: &Node) -> Option<Section> {
        let entries = self.entries(node, SECTION_KEYS, "a table of policy settings", None)?;
        let mut s = Section::default();
        for e in entries {
            match e.key.as_str() {
                "breaker" => s.breaker = self.spec(e, Self::breaker_table),
                "retry" => s.retry = self.spec(e, Self::retry_table),
                "timeout" => s.timeout = self.leaf(e),
                "deadline" => s.deadline = self.leaf(e),
                "bulkhead" => s.bulkhead = self.spec(e, Self::bulkhead_table),
                "order" => s.order = self.leaf(e),
                "idempotent" => s.idempotent = self.leaf(e),
                "max_keys" => s.max_keys = self.leaf(e),
                "key_idle" => s.key_idle = self.leaf(e),
                "scope" => s.scope = self.leaf(e),
                other => unreachable!("`{other}` is in SECTION_KEYS"),
            }
        }
        Some(s)
    }

    fn breaker_table(&mut self, node: &Node) -> Option<BreakerTable> {
        let expected = "a table of breaker settings";
        let entries = self.entries(node, BREAKER_KEYS, expected, Some(Layer::Breaker))?;
        let mut t = BreakerTable::default();
        for e in entries {
            match e.key.as_str() {
                "consecutive_failures" => t.consecutive_failures = self.leaf(e),
                "failure_rate" => t.failure_rate = self.leaf(e),
                "slow_call_duration" => t.slow_call_duration = self.leaf(e),
                "slow_call_rate" => t.slow_call_rate = self.leaf(e),
                "window" => t.window = self.leaf(e),
                "min_calls" => t.min_calls = self.leaf(e),
                "cooldown" => t.cooldown = self.leaf(e),
                "cooldown_multiplier" => t.cooldown_multiplier = self.leaf(e),
                "cooldown_max" => t.cooldown_max = self.leaf(e),
                "cooldown_jitter" => t.cooldown_jitter = self.leaf(e),
                "half_open_probes" => t.half_open_probes = self.leaf(e),
                "successes_to_close" => t.successes_to_close = self.leaf(e),
                "max_probe_wait" => t.max_probe_wait = self.leaf(e),
                "neutral_probe" => t.neutral_probe = self.leaf(e),
                other => unreachable!("`{other}` is in BREAKER_KEYS"),
            }
        }
        Some(t)
    }

    fn retry_table(&mut self, node: &Node) -> Option<RetryTable> {
        let expected = "a table of retry settings";
        let entries = self.entries(node, RETRY_KEYS, expected, Some(Layer::Retry))?;
        let mut t = RetryTable::default();
        for e in entries {
            match e.key.as_str() {
                "max_attempts" => t.max_attempts = self.leaf(e),
                "backoff" => t.backoff = self.leaf(e),
                "jitter" => t.jitter = self.leaf(e),
                other => unreachable!("`{other}` is in RETRY_KEYS"),
            }
        }
        Some(t)
    }

    fn store_table(&mut self, node: &Node) -> Option<StoreTable> {
        let expected = "a table of store settings";
        let entries = self.entries(node, STORE_KEYS, expected, None)?;
        let mut t = StoreTable::default();
        for e in entries {
            match e.key.as_str() {
                "url" => t.url = self.leaf(e),
                "namespace" => t.namespace = self.leaf(e),
                "replica" => t.replica = self.leaf(e),
                "flush_interval" => t.flush_interval = self.leaf(e),
                "on_error" => t.on_error = self.leaf(e),
                other => unreachable!("`{other}` is in STORE_KEYS"),
            }
        }
        Some(t)
    }

    fn bulkhead_table(&mut self, node: &Node) -> Option<BulkheadTable> {
        let expected = "a table of bulkhead settings";
        let entries = self.entries(node, BULKHEAD_KEYS, expected, Some(Layer::Bulkhead))?;
        let mut t = BulkheadTable::default();
        for e in entries {
            match e.key.as_str() {
                "max_concurrent" => t.max_concurrent = self.leaf(e),
                "max_wait" => t.max_wait = self.leaf(e),
                other => unreachable!("`{other}` is in BULKHEAD_KEYS"),
            }
        }
        Some(t)
    }
}

/// The field of the attribute's option named `key`, where the option has another name than the
/// field's config key (`threshold` sets `consecutive_failures`).
/// A misspelled option name (`threshhold`) counts as the option.
fn attribute_field(key: &str) -> Option<(AttrOption, Field)> {
    let renamed = |o: &AttrOption| {
        Layer::from_name(o.name()).is_none()
            && Field::ALL
                .into_iter()
                .find(|f| AttrOption::of_field(*f) == Some(*o))
                .is_some_and(|f| f.key() != o.name())
    };
    let options: Vec<AttrOption> = AttrOption::ALL.into_iter().filter(renamed).collect();
    let names: Vec<&str> = options.iter().map(|o| o.name()).collect();
    let name = names
        .iter()
        .copied()
        .find(|n| *n == key)
        .or_else(|| crate::dsl::suggest(key, &names))?;
    let option = options.into_iter().find(|o| o.name() == name)?;
    let field = Field::ALL
        .into_iter()
        .find(|f| AttrOption::of_field(*f) == Some(option))?;
    Some((option, field))
}

/// The key of this table a misspelled key or an attribute's name most likely meant.
fn suggestion<'k>(key: &str, keys: &[&'k str], table: Option<Layer>) -> Option<&'k str> {
    if let Some(s) = crate::dsl::suggest_key(key, keys) {
        return Some(s);
    }
    let field = match attribute_field(key) {
        Some((_, field)) => field,
        // A policy's key misplaced at its level (`maxAttempts`) sets its table.
        None if table.is_none() => field_elsewhere(key, table)?,
        None => return None,
    };
    keys.iter().copied().find(|k| match table {
        Some(_) => *k == field.key(),
        None => field.layer().map_or(field.key(), Layer::name) == *k,
    })
}

/// The field of another table that an unknown `key` most likely meant, by the rule of
/// [`crate::dsl::suggest_key`] (`maxAttempts` at a policy's level: `retry.max_attempts`).
fn field_elsewhere(key: &str, table: Option<Layer>) -> Option<Field> {
    let fields: Vec<Field> = Field::ALL
        .into_iter()
        .filter(|f| f.layer().is_some() && f.layer() != table)
        .collect();
    let keys: Vec<&str> = fields.iter().map(|f| f.key()).collect();
    let meant = crate::dsl::suggest_key(key, &keys)?;
    fields.into_iter().find(|f| f.key() == meant)
}

/// The message of an unknown key: serde's wording, then what was most likely meant.
fn unknown_key(key: &str, keys: &[&str], table: Option<Layer>) -> String {
    let expected: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    let mut message = format!(
        "unknown field `{key}`, expected one of {}",
        expected.join(", ")
    );
    let option = AttrOption::ALL.into_iter().find(|o| o.name() == key);
    if let Some(s) = crate::dsl::suggest_key(key, keys) {
        message.push_str(&format!("; did you mean `{s}`?"));
    } else if let Some((option, f)) = attribute_field(key) {
        if table.is_none() || f.layer() == table {
            let at = if table.is_some() { f.key() } else { f.path() };
            message.push_str(&format!(
                "; did you mean `{at}`? (the attribute calls it `{option}`)"
            ));
        } else {
            message.push_str(&format!(
                "; the attribute's `{option}` is `{}` in a config file",
                f.path()
            ));
        }
    } else if let Some(f) = Field::ALL.into_iter().find(|f| f.key() == key) {
        if f.layer() != table {
            message.push_str(&format!("; `{key}` belongs at `{}`", f.path()));
        }
    } else if let Some(f) = field_elsewhere(key, table) {
        message.push_str(&format!("; did you mean `{}`?", f.path()));
    } else if option.is_some_and(|o| !o.sets_policy()) {
        message.push_str(&format!(
            "; `{key}` is an option of `#[circuit_breaker]` only, not a config key"
        ));
    } else if keys == FILE_KEYS {
        message.push_str(&format!(
            "; a named policy is a table under `policies` (`[policies.{key}]`)"
        ));
    }
    message
}

/// The error of reading one value: serde's message.
#[derive(Debug)]
struct LeafError(String);

impl fmt::Display for LeafError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LeafError {}

impl de::Error for LeafError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        LeafError(msg.to_string())
    }
}

/// A deserializer of one value of the tree (a scalar: tables are read by the [`Reader`]).
struct NodeDe<'n>(&'n Node);

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = LeafError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, LeafError> {
        match &self.0.kind {
            Kind::Null => v.visit_unit(),
            Kind::Bool(b) => v.visit_bool(*b),
            Kind::Int(i) => match (u64::try_from(*i), i64::try_from(*i)) {
                (Ok(u), _) => v.visit_u64(u),
                (_, Ok(i)) => v.visit_i64(i),
                _ => v.visit_i128(*i),
            },
            Kind::Float(f) => v.visit_f64(*f),
            Kind::Str(s) => s.as_str().into_deserializer().deserialize_any(v),
            _ => Err(de::Error::invalid_type(self.0.unexpected(), &v)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, LeafError> {
        match self.0.kind {
            Kind::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_names_point_at_the_config_key() {
        assert_eq!(
            unknown_key("threshold", BREAKER_KEYS, Some(Layer::Breaker)),
            format!(
                "unknown field `threshold`, expected one of {}; did you mean \
                 `consecutive_failures`? (the attribute calls it `threshold`)",
                BREAKER_KEYS
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
        assert!(unknown_key("concurrency", SECTION_KEYS, None).ends_with(
            "; did you mean `bulkhead.max_concurrent`? (the attribute calls it `concurrency`)"
        ));
        assert!(
            unknown_key("threshhold", BREAKER_KEYS, Some(Layer::Breaker)).ends_with(
                "; did you mean `consecutive_failures`? (the attribute calls it `threshold`)"
            )
        );
        assert!(unknown_key("classify", SECTION_KEYS, None)
            .ends_with("; `classify` is an option of `#[circuit_breaker]` only, not a config key"));
        assert!(unknown_key("cooldown", SECTION_KEYS, None)
            .ends_with("; `cooldown` belongs at `breaker.cooldown`"));
        assert_eq!(suggestion("threshold", SECTION_KEYS, None), Some("breaker"));
        // Another form of a key of another table, at a policy's level.
        assert!(unknown_key("maxAttempts", SECTION_KEYS, None)
            .ends_with("; did you mean `retry.max_attempts`?"));
        assert!(unknown_key("cooldwn", SECTION_KEYS, None)
            .ends_with("; did you mean `breaker.cooldown`?"));
        assert_eq!(suggestion("maxAttempts", SECTION_KEYS, None), Some("retry"));
        assert!(
            unknown_key("maxAttempts", BREAKER_KEYS, Some(Layer::Breaker))
                .ends_with("; did you mean `retry.max_attempts`?")
        );
        assert!(unknown_key("foo", SECTION_KEYS, None).ends_with(&format!(
            "expected one of {}",
            SECTION_KEYS
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
        assert_eq!(
            suggestion("threshold", BREAKER_KEYS, Some(Layer::Breaker)),
            Some("consecutive_failures")
        );
    }

    /// Plural, singular, snake-case and suffixed forms of a key, beside the edit-distance
    /// cases; nothing for a word like no key.
    #[test]
    fn similar_keys() {
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("retries", SECTION_KEYS, Some("retry")),
            ("timeouts", SECTION_KEYS, Some("timeout")),
            ("bulkheads", SECTION_KEYS, Some("bulkhead")),
            ("deadlines", SECTION_KEYS, Some("deadline")),
            ("policy", FILE_KEYS, Some("policies")),
            ("defaults", FILE_KEYS, Some("default")),
            ("cooldowns", BREAKER_KEYS, Some("cooldown")),
            ("half_open_probe", BREAKER_KEYS, Some("half_open_probes")),
            ("max_key", SECTION_KEYS, Some("max_keys")),
            ("timeout_ms", SECTION_KEYS, Some("timeout")),
            ("cooldown_secs", BREAKER_KEYS, Some("cooldown")),
            ("window_size", BREAKER_KEYS, Some("window")),
            ("retry_policy", SECTION_KEYS, Some("retry")),
            ("maxAttempts", RETRY_KEYS, Some("max_attempts")),
            ("half-open-probes", BREAKER_KEYS, Some("half_open_probes")),
            ("failureRate", BREAKER_KEYS, Some("failure_rate")),
            ("timout", SECTION_KEYS, Some("timeout")),
            ("max_concurent", BULKHEAD_KEYS, Some("max_concurrent")),
            ("foo", SECTION_KEYS, None),
            ("foo", FILE_KEYS, None),
            ("s", SECTION_KEYS, None),
            ("enabled", BREAKER_KEYS, None),
            ("name", SECTION_KEYS, None),
            ("foo_ms", SECTION_KEYS, None),
            ("threshold", BREAKER_KEYS, None),
        ];
        for (key, keys, expected) in cases {
            assert_eq!(crate::dsl::suggest_key(key, keys), *expected, "{key}");
        }
    }

    #[test]
    fn policy_names() {
        for ok in [
            "inventory",
            "payments-api",
            "v2_search",
            "a",
            &"x".repeat(64),
        ] {
            assert!(is_valid_policy_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Inventory",
            "pay ments",
            "a.b",
            "é",
            "a\u{0}",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_policy_name(bad), "{bad:?}");
        }
    }
}
