//! Parsing each file format (TOML, YAML, JSON) into the [tree](super::tree) of values with
//! their positions. A file that is not well-formed stops at its first syntax error; so does one
//! over the size or nesting bounds ([`MAX_INPUT_BYTES`], [`MAX_DEPTH`], [`MAX_NODES`]).
//!
//! The parsers, each chosen because it keeps the location of every key and value:
//! - TOML: `toml`'s own document parser ([`toml::de::DeTable`], byte spans).
//! - YAML: `saphyr-parser`, the maintained pure-Rust YAML 1.2 event parser (the successor of
//!   `yaml-rust2`), whose events carry line and character column; its flow-collection parsing
//!   is linear, where `serde_yaml_ng`'s libyaml took minutes on deeply nested brackets.
//! - JSON: `jsonc-parser` (the parser of the dprint formatter) in strict JSON mode (no
//!   comments, trailing commas or other extensions), whose syntax tree has byte ranges.

use super::error::ConfigError;
use super::load::{Format, Source};
use super::tree::{Entry, Kind, Node, Origin, Pos, MAX_DEPTH, MAX_INPUT_BYTES, MAX_NODES};

/// A syntax or bound error: where and what.
struct Syntax {
    at: Pos,
    message: String,
}

fn too_deep() -> String {
    format!("tables and arrays are nested deeper than {MAX_DEPTH} levels")
}

/// Parses the source into a tree.
///
/// # Errors
/// The first syntax error, or a file over the size or nesting bounds.
#[allow(clippy::result_large_err)]
pub(super) fn parse(src: &Source) -> Result<Node, ConfigError> {
    let error = |at: Option<Pos>, message: String| ConfigError {
        file: src.file.clone(),
        env: None,
        line: at.map(|a| a.line),
        column: at.map(|a| a.column),
        key_path: ".".into(),
        message,
    };
    if src.text.len() > MAX_INPUT_BYTES {
        return Err(error(
            None,
            format!(
                "the file is {} bytes; a config file may be at most {MAX_INPUT_BYTES} bytes (1 MiB)",
                src.text.len()
            ),
        ));
    }
    let parsed = match src.format {
        Format::Toml => toml(src),
        Format::Yaml => yaml(src),
        Format::Json => json(src),
    };
    parsed.map_err(|s| error(Some(s.at), s.message))
}

// ---- TOML ----

fn toml(src: &Source) -> Result<Node, Syntax> {
    let text = src.text.as_str();
    let doc = toml::de::DeTable::parse(text).map_err(|e| {
        let mut message = e.message().trim_end().to_owned();
        // `toml` says `duplicate key` and points at the second one: name it, as the YAML and
        // JSON readers do.
        if message == "duplicate key" {
            if let Some(key) = e.span().and_then(|s| text.get(s)) {
                message = format!("duplicate key `{}`", key.trim());
            }
        }
        let mut at = e.span().map_or(0, |s| s.start);
        // A lone carriage return is an error in TOML, which `toml` places past it (where the
        // newline was expected): point at the carriage return, the character at fault.
        if message.starts_with("carriage return")
            && text.get(..at).is_some_and(|t| t.ends_with('\r'))
        {
            at -= 1;
        }
        Syntax {
            at: src.pos(at),
            message,
        }
    })?;
    let span = doc.span();
    toml_table(src, doc.into_inner(), span.start, 1)
}

fn toml_table(
    src: &Source,
    table: toml::de::DeTable<'_>,
    start: usize,
    depth: usize,
) -> Result<Node, Syntax> {
    if depth > MAX_DEPTH {
        return Err(Syntax {
            at: src.pos(start),
            message: too_deep(),
        });
    }
    let mut entries = Vec::with_capacity(table.len());
    for (key, value) in table {
        let key_span = key.span();
        let value_span = value.span();
        entries.push((
            key_span.start,
            Entry {
                key: key.into_inner().into_owned(),
                key_origin: Origin::At(src.pos(key_span.start)),
                value: toml_value(src, value.into_inner(), value_span.start, depth + 1)?,
            },
        ));
    }
    // `toml` keeps a table's keys sorted by name; the tree keeps them in file order.
    entries.sort_by_key(|(start, _)| *start);
    Ok(Node::new(
        Origin::At(src.pos(start)),
        Kind::Map(entries.into_iter().map(|(_, e)| e).collect()),
    ))
}

fn toml_value(
    src: &Source,
    value: toml::de::DeValue<'_>,
    start: usize,
    depth: usize,
) -> Result<Node, Syntax> {
    use toml::de::DeValue;
    let at = Origin::At(src.pos(start));
    let kind = match value {
        DeValue::String(s) => Kind::Str(s.into_owned()),
        DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(i) => Kind::Int(i),
            Err(_) => Kind::Str(i.to_string()),
        },
        DeValue::Float(f) => Kind::Float(f.as_str().replace('_', "").parse().unwrap_or(f64::NAN)),
        DeValue::Boolean(b) => Kind::Bool(b),
        DeValue::Datetime(d) => Kind::Datetime(d.to_string()),
        DeValue::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(Syntax {
                    at: src.pos(start),
                    message: too_deep(),
                });
            }
            let mut nodes = Vec::with_capacity(items.len());
            for item in items {
                let span = item.span();
                nodes.push(toml_value(src, item.into_inner(), span.start, depth + 1)?);
            }
            Kind::Seq(nodes)
        }
        DeValue::Table(t) => return toml_table(src, t, start, depth),
    };
    Ok(Node::new(at, kind))
}

// ---- JSON ----

fn json(src: &Source) -> Result<Node, Syntax> {
    // A leading byte-order mark (editors on Windows write one) is not JSON's, but the TOML and
    // YAML readers skip it: read it as whitespace of its length, so every offset stays the
    // file's own.
    let spaced;
    let text = match src.text.strip_prefix('\u{feff}') {
        Some(rest) => {
            spaced = format!("   {rest}");
            spaced.as_str()
        }
        None => src.text.as_str(),
    };
    // The parser recurses per level: refuse deep nesting before it runs.
    json_depth(text).map_err(|offset| Syntax {
        at: src.pos(offset),
        message: too_deep(),
    })?;
    let strict = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &strict).map_err(|e| {
        let mut message = e.kind().to_string();
        if let Some(first) = message.get(..1) {
            message = first.to_lowercase() + &message[1..];
        }
        Syntax {
            at: src.pos(e.range().start),
            message,
        }
    })?;
    match parsed.value {
        Some(value) => Ok(json_value(src, value)),
        None => Err(Syntax {
            at: src.pos(text.len()),
            message: "expected a JSON object, got the end of the input".into(),
        }),
    }
}

/// The byte offset of the first bracket nested deeper than [`MAX_DEPTH`], if any.
fn json_depth(text: &str) -> Result<(), usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, b) in text.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn json_value(src: &Source, value: jsonc_parser::ast::Value<'_>) -> Node {
    use jsonc_parser::ast::{ObjectPropName, Value};
    let (start, kind) = match value {
        Value::StringLit(s) => (s.range.start, Kind::Str(s.value.into_owned())),
        Value::NumberLit(n) => {
            let kind = match n.value.parse::<i128>() {
                Ok(i) => Kind::Int(i),
                Err(_) => Kind::Float(n.value.parse().unwrap_or(f64::NAN)),
            };
            (n.range.start, kind)
        }
        Value::BooleanLit(b) => (b.range.start, Kind::Bool(b.value)),
        Value::NullKeyword(n) => (n.range.start, Kind::Null),
        Value::Array(a) => (
            a.range.start,
            Kind::Seq(a.elements.into_iter().map(|v| json_value(src, v)).collect()),
        ),
        Value::Object(o) => (
            o.range.start,
            Kind::Map(
                o.properties
                    .into_iter()
                    .map(|p| {
                        let (key, key_start) = match p.name {
                            ObjectPropName::String(s) => (s.value.into_owned(), s.range.start),
                            ObjectPropName::Word(w) => (w.value.to_owned(), w.range.start),
                        };
                        Entry {
                            key,
                            key_origin: Origin::At(src.pos(key_start)),
                            value: json_value(src, p.value),
                        }
                    })
                    .collect(),
            ),
        ),
    };
    Node::new(Origin::At(src.pos(start)), kind)
}

// ---- YAML ----

/// A collection being read.
enum Frame {
    Seq {
        origin: Origin,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        origin: Origin,
        anchor: usize,
        entries: Vec<Entry>,
        /// The key read, waiting for its value.
        key: Option<(String, Origin)>,
    },
}

fn yaml(src: &Source) -> Result<Node, Syntax> {
    use saphyr_parser::{Event, Parser, ScalarStyle};
    let at = |m: &saphyr_parser::Marker| {
        src.clamp(Pos {
            line: m.line(),
            column: m.col() + 1,
        })
    };
    let mut parser = Parser::new_from_str(&src.text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: std::collections::HashMap<usize, Node> = Default::default();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    let mut nodes = 0usize;
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| Syntax {
            at: at(e.marker()),
            message: e.info().to_owned(),
        })?;
        let origin = Origin::At(at(&span.start));
        let syntax = |message: String| Syntax {
            at: at(&span.start),
            message,
        };
        let is_seq = matches!(event, Event::SequenceStart(..));
        let node = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(syntax(
                        "a second YAML document; a config file holds one document".into(),
                    ));
                }
                continue;
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                if let Some(tag) = tag {
                    return Err(syntax(format!("unsupported tag `{tag}`")));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(syntax(too_deep()));
                }
                let frame = if is_seq {
                    Frame::Seq {
                        origin,
                        anchor,
                        items: Vec::new(),
                    }
                } else {
                    Frame::Map {
                        origin,
                        anchor,
                        entries: Vec::new(),
                        key: None,
                    }
                };
                if let Some(Frame::Map { key: None, .. }) = stack.last() {
                    return Err(syntax(
                        "a key must be a string, not a table or a list".into(),
                    ));
                }
                stack.push(frame);
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match stack.pop() {
                    Some(Frame::Seq {
                        origin,
                        anchor,
                        items,
                    }) => (Node::new(origin, Kind::Seq(items)), anchor),
                    Some(Frame::Map {
                        origin,
                        anchor,
                        entries,
                        ..
                    }) => (Node::new(origin, Kind::Map(entries)), anchor),
                    None => return Err(syntax("unbalanced end of a collection".into())),
                };
                if anchor > 0 {
                    anchors.insert(anchor, node.clone());
                }
                node
            }
            Event::Scalar(value, style, anchor, tag) => {
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = stack.last_mut()
                {
                    // A key: taken as written (`1:` is the key "1").
                    *key = Some((value.into_owned(), origin));
                    continue;
                }
                let kind = match (&tag, style) {
                    (Some(t), _) if t.is_yaml_core_schema() && t.suffix == "str" => {
                        Kind::Str(value.into_owned())
                    }
                    (Some(t), _) if !t.is_yaml_core_schema() || t.suffix == "binary" => {
                        return Err(syntax(format!("unsupported tag `{t}`")));
                    }
                    (Some(_), _) | (None, ScalarStyle::Plain) => plain_scalar(&value),
                    (None, _) => Kind::Str(value.into_owned()),
                };
                let node = Node::new(origin, kind);
                if anchor > 0 {
                    anchors.insert(anchor, node.clone());
                }
                node
            }
            Event::Alias(id) => {
                if let Some(Frame::Map { key: None, .. }) = stack.last() {
                    return Err(syntax("an alias cannot be a key".into()));
                }
                let Some(node) = anchors.get(&id) else {
                    return Err(syntax("an alias of an unknown anchor".into()));
                };
                nodes += count(node);
                if nodes > MAX_NODES {
                    return Err(syntax(format!(
                        "the aliases expand to more than {MAX_NODES} values"
                    )));
                }
                node.clone()
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
        };
        nodes += 1;
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => {
                let (key, key_origin) = key.take().expect("a value follows its key");
                entries.push(Entry {
                    key,
                    key_origin,
                    value: node,
                });
            }
        }
    }
    Ok(match root {
        // An empty document (or only comments) is an empty config, as in TOML.
        None
        | Some(Node {
            kind: Kind::Null, ..
        }) => Node::table(Origin::At(Pos { line: 1, column: 1 })),
        Some(node) => node,
    })
}

/// How many values `node` holds, itself included.
fn count(node: &Node) -> usize {
    1 + match &node.kind {
        Kind::Seq(items) => items.iter().map(count).sum(),
        Kind::Map(entries) => entries.iter().map(|e| count(&e.value)).sum(),
        _ => 0,
    }
}

/// A plain YAML scalar under the YAML 1.2 core schema: null, boolean, integer, float or string.
fn plain_scalar(s: &str) -> Kind {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Kind::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Kind::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Kind::Float(f64::NAN),
        _ => {}
    }
    let (radix, digits) = if let Some(d) = s.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = s.strip_prefix("0o") {
        (8, d)
    } else {
        (10, s)
    };
    let plain_digits = |d: &str| {
        let d = d.strip_prefix(['-', '+']).unwrap_or(d);
        !d.is_empty() && d.bytes().all(|b| (b as char).is_digit(radix))
    };
    if plain_digits(digits) && (radix == 10 || !digits.starts_with(['-', '+'])) {
        if let Ok(i) = i128::from_str_radix(digits, radix) {
            return Kind::Int(i);
        }
    }
    let float_chars = s
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
    if float_chars && s.bytes().any(|b| b.is_ascii_digit()) {
        if let Ok(f) = s.parse::<f64>() {
            return Kind::Float(f);
        }
    }
    Kind::Str(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_core_schema() {
        assert_eq!(plain_scalar("~"), Kind::Null);
        assert_eq!(plain_scalar("True"), Kind::Bool(true));
        assert_eq!(plain_scalar("-12"), Kind::Int(-12));
        assert_eq!(plain_scalar("0x1F"), Kind::Int(31));
        assert_eq!(plain_scalar("1.5e3"), Kind::Float(1500.0));
        assert_eq!(plain_scalar("2s"), Kind::Str("2s".into()));
        assert_eq!(plain_scalar("yes"), Kind::Str("yes".into()));
        assert_eq!(plain_scalar("inf"), Kind::Str("inf".into()));
        assert_eq!(plain_scalar("1e"), Kind::Str("1e".into()));
    }

    #[test]
    fn json_depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth(&"[".repeat(MAX_DEPTH)), Ok(()));
        assert_eq!(json_depth(&"[".repeat(MAX_DEPTH + 1)), Err(MAX_DEPTH));
        let quoted = format!("\"{}\\\"{}\"", "[".repeat(99), "{".repeat(99));
        assert_eq!(json_depth(&quoted), Ok(()));
    }
}
