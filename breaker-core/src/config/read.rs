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
use crate::field::{AttrOption, Field};
use crate::layer::Layer;
use serde::de::{self, Deserialize, Deserializer, IntoDeserializer, Visitor};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// Where the value of one key of a table goes: the reader reads it (with its type's
/// `Deserialize`, or as a nested table) into its place in the table `T`.
type Setter<T> = for<'r, 's, 'e, 't> fn(&'r mut Reader<'s>, &'e Entry, &'t mut T);

/// The key of a table: a policy [`Field`] (the tables of a layer and the fields at the top of a
/// section), or the name of a key that sets no policy field.
trait Key: Copy {
    /// The key as written in a file.
    fn name(self) -> &'static str;
}

impl Key for Field {
    fn name(self) -> &'static str {
        self.key()
    }
}

impl Key for &'static str {
    fn name(self) -> &'static str {
        self
    }
}

/// The keys of a table, in the order errors list them.
fn names<K: Key, T>(keys: &[(K, Setter<T>)]) -> Vec<&'static str> {
    keys.iter().map(|(k, _)| k.name()).collect()
}

/// The keys of the top of a file.
const FILE: &[(&str, Setter<ConfigFile>)] = &[
    ("$schema", |r, e, f| f.schema = r.leaf(e)),
    ("default", |r, e, f| {
        r.path.push(e.key.clone());
        r.section = r.path.clone();
        f.default = r.section_table(&e.value);
        r.section.clear();
        r.path.pop();
    }),
    ("policies", |r, e, f| {
        r.path.push(e.key.clone());
        f.policies = r.policies(&e.value);
        r.path.pop();
    }),
    ("store", |r, e, f| {
        r.path.push(e.key.clone());
        f.store = r.table(&e.value, STORE, "a table of store settings", None);
        r.path.pop();
    }),
];

/// The keys of the `[store]` table.
const STORE: &[(&str, Setter<StoreTable>)] = &[
    ("url", |r, e, t| t.url = r.leaf(e)),
    ("namespace", |r, e, t| t.namespace = r.leaf(e)),
    ("replica", |r, e, t| t.replica = r.leaf(e)),
    ("flush_interval", |r, e, t| t.flush_interval = r.leaf(e)),
    ("on_error", |r, e, t| t.on_error = r.leaf(e)),
];

/// The keys of a policy section (and of `default`): a table per layer, the fields at the top
/// of a section (their path is their key), and the settings of a keyed breaker and its scope.
const SECTION: &[(&str, Setter<Section>)] = &[
    (Layer::Breaker.name(), |r, e, s| {
        s.breaker = r.spec(e, |r, node| {
            let expected = "a table of breaker settings";
            r.table(node, BREAKER, expected, Some(Layer::Breaker))
        });
    }),
    (Layer::Retry.name(), |r, e, s| {
        s.retry = r.spec(e, |r, node| {
            let expected = "a table of retry settings";
            r.table(node, RETRY, expected, Some(Layer::Retry))
        });
    }),
    (Field::Timeout.path(), |r, e, s| s.timeout = r.leaf(e)),
    (Field::Deadline.path(), |r, e, s| s.deadline = r.leaf(e)),
    (Layer::Bulkhead.name(), |r, e, s| {
        s.bulkhead = r.spec(e, |r, node| {
            let expected = "a table of bulkhead settings";
            r.table(node, BULKHEAD, expected, Some(Layer::Bulkhead))
        });
    }),
    (Field::RateLimit.path(), |r, e, s| s.rate = r.leaf(e)),
    (Field::Hedge.path(), |r, e, s| s.hedge = r.leaf(e)),
    (Field::Adaptive.path(), |r, e, s| s.adaptive = r.leaf(e)),
    (Field::Throttle.path(), |r, e, s| s.throttle = r.leaf(e)),
    (Field::Order.path(), |r, e, s| s.order = r.leaf(e)),
    (Field::Idempotent.path(), |r, e, s| s.idempotent = r.leaf(e)),
    ("max_keys", |r, e, s| s.max_keys = r.leaf(e)),
    ("key_idle", |r, e, s| s.key_idle = r.leaf(e)),
    ("scope", |r, e, s| s.scope = r.leaf(e)),
];

/// The keys of a breaker table: every [`Field`] of [`Layer::Breaker`] (a test checks that
/// this table has each once).
const BREAKER: &[(Field, Setter<BreakerTable>)] = &[
    (Field::ConsecutiveFailures, |r, e, t| {
        t.consecutive_failures = r.leaf(e)
    }),
    (Field::FailureRate, |r, e, t| t.failure_rate = r.leaf(e)),
    (Field::SlowCallDuration, |r, e, t| {
        t.slow_call_duration = r.leaf(e)
    }),
    (Field::SlowCallRate, |r, e, t| t.slow_call_rate = r.leaf(e)),
    (Field::Window, |r, e, t| t.window = r.leaf(e)),
    (Field::MinCalls, |r, e, t| t.min_calls = r.leaf(e)),
    (Field::Cooldown, |r, e, t| t.cooldown = r.leaf(e)),
    (Field::CooldownMultiplier, |r, e, t| {
        t.cooldown_multiplier = r.leaf(e)
    }),
    (Field::CooldownMax, |r, e, t| t.cooldown_max = r.leaf(e)),
    (Field::CooldownJitter, |r, e, t| {
        t.cooldown_jitter = r.leaf(e)
    }),
    (Field::HalfOpenProbes, |r, e, t| {
        t.half_open_probes = r.leaf(e)
    }),
    (Field::SuccessesToClose, |r, e, t| {
        t.successes_to_close = r.leaf(e)
    }),
    (Field::MaxProbeWait, |r, e, t| t.max_probe_wait = r.leaf(e)),
    (Field::NeutralProbe, |r, e, t| t.neutral_probe = r.leaf(e)),
];

/// The keys of a retry table: every [`Field`] of [`Layer::Retry`].
const RETRY: &[(Field, Setter<RetryTable>)] = &[
    (Field::MaxAttempts, |r, e, t| t.max_attempts = r.leaf(e)),
    (Field::Backoff, |r, e, t| t.backoff = r.leaf(e)),
    (Field::Jitter, |r, e, t| t.jitter = r.leaf(e)),
];

/// The keys of a bulkhead table: every [`Field`] of [`Layer::Bulkhead`].
const BULKHEAD: &[(Field, Setter<BulkheadTable>)] = &[
    (Field::MaxConcurrent, |r, e, t| t.max_concurrent = r.leaf(e)),
    (Field::MaxWait, |r, e, t| t.max_wait = r.leaf(e)),
];

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

    /// The entries of a table with the keys `keys`, each key once and holding a value, with
    /// the index of its key; every other entry is reported. `None` (reported) when `node` is
    /// not a table.
    fn entries<'n>(
        &mut self,
        node: &'n Node,
        keys: &[&str],
        expected: &str,
        table: Option<Layer>,
    ) -> Option<Vec<(usize, &'n Entry)>> {
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
            } else if let Some(i) = keys.iter().position(|k| *k == e.key) {
                if e.value.kind == Kind::Null {
                    self.poison_key(&e.key);
                    self.error(
                        &e.key_origin,
                        "explicit `null`; remove the key to take the inherited or default value"
                            .into(),
                    );
                } else {
                    known.push((i, e));
                }
            } else {
                let message = unknown_key(&e.key, keys, table);
                // What the key was likely meant to set is lost, unless the table sets it too.
                if let Some(f) = suggestion(&e.key, keys, table) {
                    if !entries.iter().any(|other| other.key == f) {
                        self.poison_key(f);
                    }
                }
                self.error(&e.key_origin, message);
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
        let expected = "a table of `default` and `policies`";
        self.table(root, FILE, expected, None).unwrap_or_default()
    }

    /// A table whose keys are `keys`: each entry read into its place by its key's setter.
    /// `None` (reported) when `node` is not a table.
    fn table<K: Key, T: Default>(
        &mut self,
        node: &Node,
        keys: &[(K, Setter<T>)],
        expected: &str,
        layer: Option<Layer>,
    ) -> Option<T> {
        let entries = self.entries(node, &names(keys), expected, layer)?;
        let mut t = T::default();
        for (i, e) in entries {
            (keys[i].1)(self, e, &mut t);
        }
        Some(t)
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
        self.table(node, SECTION, "a table of policy settings", None)
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
        .or_else(|| crate::syntax::suggest(key, &names))?;
    let option = options.into_iter().find(|o| o.name() == name)?;
    let field = Field::ALL
        .into_iter()
        .find(|f| AttrOption::of_field(*f) == Some(option))?;
    Some((option, field))
}

/// The key of this table a misspelled key or an attribute's name most likely meant.
fn suggestion<'k>(key: &str, keys: &[&'k str], table: Option<Layer>) -> Option<&'k str> {
    if let Some(s) = crate::syntax::suggest_key(key, keys) {
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
/// `suggest_key` (`maxAttempts` at a policy's level: `retry.max_attempts`).
fn field_elsewhere(key: &str, table: Option<Layer>) -> Option<Field> {
    let fields: Vec<Field> = Field::ALL
        .into_iter()
        .filter(|f| f.layer().is_some() && f.layer() != table)
        .collect();
    let keys: Vec<&str> = fields.iter().map(|f| f.key()).collect();
    let meant = crate::syntax::suggest_key(key, &keys)?;
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
    if let Some(s) = crate::syntax::suggest_key(key, keys) {
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
    } else if keys.contains(&"policies") {
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
            // A table where a scalar was expected: its visitor says what (by default serde's
            // "invalid type"; a DSL string says it has no keys of its own). Its entries are
            // not read.
            Kind::Map(_) => v.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(
                &str,
                &str,
            )>())),
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

    /// Every field is read from one place: a field of a layer from that layer's table, a field
    /// at the top of a section from the section; each once, and nothing else.
    #[test]
    fn every_field_has_one_key() {
        let section = names(SECTION);
        for f in Field::ALL {
            let (keys, count) = match f.layer() {
                Some(Layer::Breaker) => {
                    (names(BREAKER), BREAKER.iter().filter(|k| k.0 == f).count())
                }
                Some(Layer::Retry) => (names(RETRY), RETRY.iter().filter(|k| k.0 == f).count()),
                Some(Layer::Bulkhead) => (
                    names(BULKHEAD),
                    BULKHEAD.iter().filter(|k| k.0 == f).count(),
                ),
                // Layers whose one field is at the top of a section (`timeout`, and the DSL
                // strings `rate`, `hedge`, `adaptive`, `throttle`): no field is in their table.
                Some(
                    Layer::Timeout
                    | Layer::RateLimit
                    | Layer::Hedge
                    | Layer::Adaptive
                    | Layer::Throttle,
                ) => (Vec::new(), 0),
                None => (
                    section.clone(),
                    section.iter().filter(|k| **k == f.key()).count(),
                ),
            };
            assert_eq!(count, 1, "{f:?} in {keys:?}");
        }
        for (layer, len) in [
            (Layer::Breaker, BREAKER.len()),
            (Layer::Retry, RETRY.len()),
            (Layer::Bulkhead, BULKHEAD.len()),
        ] {
            let fields = Field::ALL
                .iter()
                .filter(|f| f.layer() == Some(layer))
                .count();
            assert_eq!(len, fields, "{layer:?}");
            assert!(section.contains(&layer.name()), "{layer:?}");
        }
    }

    #[test]
    fn attribute_names_point_at_the_config_key() {
        let (breaker_keys, section_keys) = (&names(BREAKER)[..], &names(SECTION)[..]);
        assert_eq!(
            unknown_key("threshold", breaker_keys, Some(Layer::Breaker)),
            format!(
                "unknown field `threshold`, expected one of {}; did you mean \
                 `consecutive_failures`? (the attribute calls it `threshold`)",
                breaker_keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
        assert!(unknown_key("concurrency", section_keys, None).ends_with(
            "; did you mean `bulkhead.max_concurrent`? (the attribute calls it `concurrency`)"
        ));
        assert!(
            unknown_key("threshhold", breaker_keys, Some(Layer::Breaker)).ends_with(
                "; did you mean `consecutive_failures`? (the attribute calls it `threshold`)"
            )
        );
        assert!(unknown_key("classify", section_keys, None)
            .ends_with("; `classify` is an option of `#[circuit_breaker]` only, not a config key"));
        assert!(unknown_key("cooldown", section_keys, None)
            .ends_with("; `cooldown` belongs at `breaker.cooldown`"));
        assert_eq!(suggestion("threshold", section_keys, None), Some("breaker"));
        // Another form of a key of another table, at a policy's level.
        assert!(unknown_key("maxAttempts", section_keys, None)
            .ends_with("; did you mean `retry.max_attempts`?"));
        assert!(unknown_key("cooldwn", section_keys, None)
            .ends_with("; did you mean `breaker.cooldown`?"));
        assert_eq!(suggestion("maxAttempts", section_keys, None), Some("retry"));
        assert!(
            unknown_key("maxAttempts", breaker_keys, Some(Layer::Breaker))
                .ends_with("; did you mean `retry.max_attempts`?")
        );
        assert!(unknown_key("foo", section_keys, None).ends_with(&format!(
            "expected one of {}",
            section_keys
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
        assert_eq!(
            suggestion("threshold", breaker_keys, Some(Layer::Breaker)),
            Some("consecutive_failures")
        );
    }

    /// Plural, singular, snake-case and suffixed forms of a key, beside the edit-distance
    /// cases; nothing for a word like no key.
    #[test]
    fn similar_keys() {
        let (file, section) = (&names(FILE)[..], &names(SECTION)[..]);
        let (breaker, retry, bulkhead) =
            (&names(BREAKER)[..], &names(RETRY)[..], &names(BULKHEAD)[..]);
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("retries", section, Some("retry")),
            ("rate_limit", section, Some("rate")),
            ("rateLimiter", section, Some("rate")),
            ("adaptive_limit", section, Some("adaptive")),
            ("hedging", section, Some("hedge")),
            ("retrying", section, Some("retry")),
            ("timeouts", section, Some("timeout")),
            ("bulkheads", section, Some("bulkhead")),
            ("deadlines", section, Some("deadline")),
            ("policy", file, Some("policies")),
            ("defaults", file, Some("default")),
            ("cooldowns", breaker, Some("cooldown")),
            ("half_open_probe", breaker, Some("half_open_probes")),
            ("max_key", section, Some("max_keys")),
            ("timeout_ms", section, Some("timeout")),
            ("cooldown_secs", breaker, Some("cooldown")),
            ("window_size", breaker, Some("window")),
            ("retry_policy", section, Some("retry")),
            ("maxAttempts", retry, Some("max_attempts")),
            ("half-open-probes", breaker, Some("half_open_probes")),
            ("failureRate", breaker, Some("failure_rate")),
            ("timout", section, Some("timeout")),
            ("max_concurent", bulkhead, Some("max_concurrent")),
            ("foo", section, None),
            ("foo", file, None),
            ("s", section, None),
            ("enabled", breaker, None),
            ("name", section, None),
            ("foo_ms", section, None),
            ("threshold", breaker, None),
        ];
        for (key, keys, expected) in cases {
            assert_eq!(crate::syntax::suggest_key(key, keys), *expected, "{key}");
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
