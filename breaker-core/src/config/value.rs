//! Values written as DSL strings in config files, and the "string or table" sections.

use crate::adaptive::AdaptiveLimitPolicy;
use crate::breaker::{BreakerPolicy, NeutralProbe, SlidingWindow};
use crate::dsl::{self, DslError, Order};
use crate::hedge::HedgePolicy;
use crate::layer::Layer;
use crate::policy::{BulkheadPolicy, Field};
use crate::ratelimit::RateLimitPolicy;
use crate::retry::{Backoff, Jitter, RetryPolicy};
use crate::scope::{Scope, StoreErrorMode};
use crate::throttle::ThrottlePolicy;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

/// A type written as one DSL string in config files.
pub trait DslValue: Sized {
    /// The schema's name.
    const NAME: &'static str;
    /// What the string holds, with an example; shown by editors.
    const DESCRIPTION: &'static str;
    /// Parses (and validates) the string.
    ///
    /// # Errors
    /// The parser's [`DslError`].
    fn parse_dsl(s: &str) -> Result<Self, DslError>;
    /// The canonical DSL string.
    fn to_dsl(&self) -> String;
}

macro_rules! dsl_value {
    ($t:ty, $name:literal, $desc:literal, $parse:expr, $show:expr) => {
        impl DslValue for $t {
            const NAME: &'static str = $name;
            const DESCRIPTION: &'static str = $desc;
            fn parse_dsl(s: &str) -> Result<Self, DslError> {
                $parse(s)
            }
            fn to_dsl(&self) -> String {
                $show(self)
            }
        }
    };
}

dsl_value!(
    Duration,
    "Duration",
    "A duration such as \"250ms\", \"30s\" or \"1m 30s\".",
    dsl::parse_duration,
    |d: &Duration| dsl::format_duration(*d)
);
/// A layer (breaker, retry, bulkhead) written as one DSL string in a config file: what the
/// string reads as on its own, and which fields it writes. Over `default` the string sets those
/// fields only, as a table of the same keys would: `breaker = "5 consecutive"` replaces the
/// trip rules and inherits the cooldown and the probes; `retry = "5x"` inherits the backoff
/// and the jitter.
#[derive(Clone, Debug, PartialEq)]
pub struct Written<T> {
    /// The string as written.
    pub text: String,
    /// The layer of the string alone, with the defaults for the fields it does not write.
    pub value: T,
    /// The fields the string writes, in [`Field`]'s order.
    pub fields: Vec<Field>,
}

impl<T> Written<T> {
    fn parse<P>(text: &str, parse: P) -> Result<Self, DslError>
    where
        P: FnOnce(&str) -> Result<(T, Vec<Field>), DslError>,
    {
        parse(text).map(|(value, fields)| Written {
            text: text.to_owned(),
            value,
            fields,
        })
    }

    /// Whether the string writes `field`.
    pub fn writes(&self, field: Field) -> bool {
        self.fields.contains(&field)
    }
}

dsl_value!(Written<RetryPolicy>, "RetryDsl",
    "A retry policy such as \"none\", \"3x exp jitter\", \"5x exp(100ms, max 2s) full-jitter\" or \"4x fixed 200ms\".",
    |s: &str| Written::parse(s, dsl::parse_retry_written), |p: &Written<RetryPolicy>| p.text.clone());
dsl_value!(Written<BreakerPolicy>, "BreakerDsl",
    "A breaker such as \"5 consecutive, open 30s\" or \"50% of 100 calls min 20, slow 2s 80%, open 10s\".",
    |s: &str| Written::parse(s, dsl::parse_breaker_written), |p: &Written<BreakerPolicy>| p.text.clone());
dsl_value!(Backoff, "BackoffDsl",
    "A backoff such as \"fixed 200ms\", \"linear(100ms, step 50ms, max 2s)\" or \"exp(100ms, factor 2, max 10s)\".",
    dsl::parse_backoff, |p: &Backoff| p.to_string());
dsl_value!(Jitter, "JitterDsl",
    "\"no-jitter\", \"jitter\" (= \"full-jitter\"), \"full-jitter\", \"equal-jitter\", \"decorrelated-jitter\" or \"additive-jitter 100ms\".",
    |s: &str| s.parse::<Jitter>(), |p: &Jitter| p.to_string());
dsl_value!(
    SlidingWindow,
    "WindowDsl",
    "A sliding window: \"100 calls\" (count) or \"60s\" / \"1m in 12 buckets\" (time).",
    dsl::parse_window,
    |p: &SlidingWindow| p.to_string()
);
dsl_value!(
    Written<BulkheadPolicy>,
    "BulkheadDsl",
    "A bulkhead such as \"10 concurrent\" or \"10 concurrent wait 100ms\".",
    |s: &str| Written::parse(s, dsl::parse_bulkhead_written),
    |p: &Written<BulkheadPolicy>| p.text.clone()
);
dsl_value!(
    Vec<Layer>,
    "OrderDsl",
    "Layer order, outermost first, such as \"timeout > retry > breaker\".",
    dsl::parse_order,
    |p: &Vec<Layer>| Order(p.clone()).to_string()
);
dsl_value!(
    RateLimitPolicy,
    "RateDsl",
    "A rate limit such as \"100/s\", \"5/100ms burst 1\", \"1000/1m burst 50 wait 200ms\" or \"10/s per key\" (one limit per key of a keyed function).",
    dsl::parse_rate,
    |p: &RateLimitPolicy| p.to_string()
);
dsl_value!(
    HedgePolicy,
    "HedgeDsl",
    "Hedging such as \"after 50ms\", \"2x after 50ms\" or \"1x after p95 in 10ms..200ms\".",
    dsl::parse_hedge,
    |p: &HedgePolicy| p.to_string()
);
dsl_value!(
    AdaptiveLimitPolicy,
    "AdaptiveDsl",
    "An adaptive concurrency limit such as \"aimd 5..200\" or \"gradient2 10..500 from 50\".",
    dsl::parse_adaptive,
    |p: &AdaptiveLimitPolicy| p.to_string()
);
dsl_value!(
    ThrottlePolicy,
    "ThrottleDsl",
    "Client-side adaptive throttling such as \"k 2\" or \"k 1.5 over 1m\".",
    dsl::parse_throttle,
    |p: &ThrottlePolicy| p.to_string()
);
dsl_value!(
    Scope,
    "ScopeDsl",
    "Where the breaker's state lives: \"local\" (default), \"shared\" or \"quorum(3)\".",
    |s: &str| s.parse::<Scope>(),
    |p: &Scope| p.to_string()
);
dsl_value!(
    StoreErrorMode,
    "StoreErrorDsl",
    "While the store is unreachable: \"local\" (default), \"open\" or \"closed(30s)\".",
    |s: &str| s.parse::<StoreErrorMode>(),
    |p: &StoreErrorMode| p.to_string()
);
dsl_value!(
    NeutralProbe,
    "NeutralProbeDsl",
    "What an ignored half-open probe means: \"release\" (default) or \"count-as-success\".",
    |s: &str| s.parse::<NeutralProbe>(),
    |p: &NeutralProbe| p.to_string()
);

/// The `deserialize_with` of every optional key: a key that is present must hold a value. An
/// explicit `null` (YAML `~` or `null`, JSON `null`; TOML has none) would otherwise load as
/// "not set", silently taking the default, or the inherited value a user may have meant to
/// clear (issue 11: no silent misconfiguration).
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    match Option::<T>::deserialize(d)? {
        Some(v) => Ok(Some(v)),
        None => Err(de::Error::custom(
            "explicit `null`; remove the key to take the inherited or default value",
        )),
    }
}

/// A value written as a DSL string; see [`DslValue`].
#[derive(Clone, Debug, PartialEq)]
pub struct Dsl<T>(pub T);

impl<'de, T: DslValue> Deserialize<'de> for Dsl<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'v, T: DslValue> Visitor<'v> for V<T> {
            type Value = Dsl<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a string: {}", T::DESCRIPTION)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::parse_dsl(s)
                    .map(Dsl)
                    .map_err(|e| E::custom(dsl_message(s, &e)))
            }
            fn visit_map<A: MapAccess<'v>>(self, _: A) -> Result<Self::Value, A::Error> {
                Err(de::Error::custom(format_args!(
                    "a table, but this key is one string with no keys of its own (write the \
                     whole value, not a key inside it): {}",
                    T::DESCRIPTION
                )))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// The error text of a DSL string inside a file: the parser's text, quoting the string when
/// the fragment is not the whole of it.
pub(crate) fn dsl_message(s: &str, e: &DslError) -> String {
    if e.fragment == s {
        e.to_string()
    } else {
        format!("{e} (in \"{s}\")")
    }
}

impl<T: DslValue> Serialize for Dsl<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_dsl())
    }
}

impl<T: DslValue> JsonSchema for Dsl<T> {
    fn schema_name() -> Cow<'static, str> {
        T::NAME.into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "description": T::DESCRIPTION })
    }
}

/// A percentage: a number (`50`, `12.5`) or a string with `%` (`"50%"`, `"0.5%"`).
///
/// A bare number between 0 and 1 (`0.5`) is refused: it reads as a ratio (Polly's
/// `FailureRatio`), and taken as a percent it would trip the breaker at a hundredth of the rate
/// meant. Half a percent is written with its sign, `"0.5%"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percent(pub f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Percent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a percentage: a number such as 50 or a string such as \"50%\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Percent, E> {
                match crate::dsl::ratio_not_percent(v) {
                    Some(why) => Err(E::custom(why)),
                    None => Ok(Percent(v)),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Percent, E> {
                dsl::parse_percent(s)
                    .map(Percent)
                    .map_err(|e| E::custom(dsl_message(s, &e)))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl JsonSchema for Percent {
    fn schema_name() -> Cow<'static, str> {
        "Percent".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A percentage in (0, 100]: a number such as 50 (at least 1: a bare 0.5 reads as a ratio) or a string such as \"50%\" or \"0.5%\".",
            "anyOf": [
                { "type": "number", "minimum": 1, "maximum": 100 },
                { "type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?%$" }
            ]
        })
    }
}

/// A section written either as one DSL string or as a table of fields.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec<T, Table> {
    /// The whole value as a DSL string.
    Dsl(T),
    /// A table of optional fields.
    Table(Table),
}

impl<'de, T: DslValue, Table: Deserialize<'de>> Deserialize<'de> for Spec<T, Table> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, Table>(PhantomData<(T, Table)>);
        impl<'de, T: DslValue, Table: Deserialize<'de>> Visitor<'de> for V<T, Table> {
            type Value = Spec<T, Table>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a table or a string: {}", T::DESCRIPTION)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::parse_dsl(s)
                    .map(Spec::Dsl)
                    .map_err(|e| E::custom(dsl_message(s, &e)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Table::deserialize(de::value::MapAccessDeserializer::new(map)).map(Spec::Table)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<T: DslValue, Table: Serialize> Serialize for Spec<T, Table> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Spec::Dsl(v) => s.serialize_str(&v.to_dsl()),
            Spec::Table(t) => t.serialize(s),
        }
    }
}

impl<T: DslValue, Table: JsonSchema> JsonSchema for Spec<T, Table> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}Or{}", T::NAME, Table::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let table = generator.subschema_for::<Table>();
        json_schema!({
            "anyOf": [
                { "type": "string", "description": T::DESCRIPTION },
                table
            ]
        })
    }
}
