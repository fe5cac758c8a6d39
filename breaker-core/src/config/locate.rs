//! Locating a key path in the source: walk to it with serde and fail there, so the format's
//! own error carries the position.

use super::load::{Format, Source};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

const MARK: &str = "\u{0}breaker-locate\u{0}";

/// Finds where `path` is in the source by walking to it with serde and failing there: the
/// format's own error then carries the position.
pub(super) fn locate(src: &Source, path: &[String]) -> Option<(usize, usize)> {
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
