//! A config file as a tree of values that remembers where each key and value came from: a
//! position in the file, or an environment variable.
//!
//! # Why
//! serde stops at the first error, and its format crates do not agree on positions (one
//! counts bytes and points at a value's last byte, another characters and its first). The
//! loader parses each format into this one tree first (only a file that is not well-formed
//! stops there), then reads every table of it on its own, so that every unknown key, value of
//! the wrong type and invalid value is reported, each at the same kind of position in every
//! format: the 1-based line and character column of the first character of the key or value.

use std::fmt;

/// The largest config file read, in bytes (1 MiB): a config file is a few kilobytes; the bound
/// keeps a wrong or hostile file from stalling a start-up or a reload.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// The deepest nesting of tables and arrays read; a config file needs 4 (`policies`, a name, a
/// layer, its keys).
pub const MAX_DEPTH: usize = 32;
/// The most values a YAML file may expand to through its aliases (`*name`).
pub const MAX_NODES: usize = 100_000;

/// A 1-based line and character column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Pos {
    pub(super) line: usize,
    pub(super) column: usize,
}

/// Where a key or a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// A position in the file.
    At(Pos),
    /// An environment variable, by name.
    Env(String),
}

/// One value of the tree.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Node {
    pub(super) origin: Origin,
    pub(super) kind: Kind,
}

/// What a value is.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// A TOML date or time, as written.
    Datetime(String),
    Seq(Vec<Node>),
    /// A table, its entries in file order.
    Map(Vec<Entry>),
}

/// One entry of a table.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) key_origin: Origin,
    pub(super) value: Node,
}

impl Node {
    pub(super) fn new(origin: Origin, kind: Kind) -> Node {
        Node { origin, kind }
    }

    /// An empty table at `origin`.
    pub(super) fn table(origin: Origin) -> Node {
        Node::new(origin, Kind::Map(Vec::new()))
    }

    /// The entry `key` of a table.
    pub(super) fn entry(&self, key: &str) -> Option<&Entry> {
        match &self.kind {
            Kind::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    /// Where the value at `path` came from; for a path that is not in the tree, where its
    /// deepest part that is came from.
    pub(super) fn origin_of(&self, path: &[String]) -> &Origin {
        let mut node = self;
        for key in path {
            match node.entry(key) {
                Some(e) => node = &e.value,
                None => break,
            }
        }
        &node.origin
    }

    /// serde's description of the value, for "invalid type: {unexpected}, expected ..".
    pub(super) fn unexpected(&self) -> serde::de::Unexpected<'_> {
        use serde::de::Unexpected;
        match &self.kind {
            Kind::Null => Unexpected::Unit,
            Kind::Bool(b) => Unexpected::Bool(*b),
            Kind::Int(i) => match i64::try_from(*i) {
                Ok(i) if i < 0 => Unexpected::Signed(i),
                _ => Unexpected::Unsigned(u64::try_from(*i).unwrap_or(u64::MAX)),
            },
            Kind::Float(f) => Unexpected::Float(*f),
            Kind::Str(s) => Unexpected::Str(s),
            Kind::Datetime(_) => Unexpected::Other("date-time"),
            Kind::Seq(_) => Unexpected::Seq,
            Kind::Map(_) => Unexpected::Map,
        }
    }
}

/// The start of every line of a text, to turn byte offsets into positions.
/// Which characters end a line, as the parser of a format counts them (so a position this
/// file gives and one the parser gives agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Breaks {
    /// `\n` only (a `\r` is a character of its line): TOML, whose parser counts lines this way
    /// (a lone `\r` is not allowed in a TOML document).
    Lf,
    /// `\n`, `\r\n` and a lone `\r`, each one break: YAML 1.2 (§5.4, as `saphyr-parser`
    /// scans it) and JSON (as `jsonc-parser` counts lines in its errors).
    Any,
}

/// Where the lines of a text start and end.
#[derive(Clone, Debug, Default)]
pub(super) struct Lines {
    /// The byte offset each line starts at; a last entry equal to the text's length is the
    /// empty "line" after a final break, which [`Lines::count`] leaves out.
    starts: Vec<usize>,
    /// The byte offset each line's break starts at (the text's length for the last line).
    ends: Vec<usize>,
    len: usize,
}

impl Lines {
    pub(super) fn new(text: &str, breaks: Breaks) -> Lines {
        let bytes = text.as_bytes();
        let (mut starts, mut ends) = (vec![0], Vec::new());
        let mut i = 0;
        while i < bytes.len() {
            let width = match bytes[i] {
                b'\n' => 1,
                b'\r' if breaks == Breaks::Any => 1 + usize::from(bytes.get(i + 1) == Some(&b'\n')),
                _ => 0,
            };
            if width == 0 {
                i += 1;
            } else {
                ends.push(i);
                i += width;
                starts.push(i);
            }
        }
        ends.push(text.len());
        Lines {
            starts,
            ends,
            len: text.len(),
        }
    }

    /// How many lines the text has (at least 1; a final break ends the last line).
    fn count(&self) -> usize {
        let n = self.starts.len();
        if n > 1 && self.starts[n - 1] == self.len {
            n - 1
        } else {
            n
        }
    }

    /// The position of byte `offset` of `text` (the text these lines are of). An offset at or
    /// past the end is the end of the last line: never a line past the end of the file; one
    /// inside a line break is the end of its line.
    pub(super) fn pos(&self, text: &str, offset: usize) -> Pos {
        let offset = offset.min(text.len());
        let line = self
            .starts
            .partition_point(|s| *s <= offset)
            .min(self.count());
        let start = self.starts[line - 1];
        let mut offset = offset.clamp(start, self.ends[line - 1]);
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        Pos {
            line,
            column: text[start..offset].chars().count() + 1,
        }
    }

    /// `pos` moved inside the text: a line past the end is the end of the last line, a column
    /// past the end of its line is just after its last character.
    pub(super) fn clamp(&self, text: &str, pos: Pos) -> Pos {
        if pos.line == 0 || pos.line > self.count() {
            return self.pos(text, text.len());
        }
        let (start, end) = (self.starts[pos.line - 1], self.ends[pos.line - 1]);
        let width = text[start..end].chars().count();
        Pos {
            line: pos.line,
            column: pos.column.clamp(1, width + 1),
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_characters_and_inside_the_text() {
        let text = "ab\néé x\n";
        let lines = Lines::new(text, Breaks::Lf);
        assert_eq!(lines.pos(text, 0), Pos { line: 1, column: 1 });
        assert_eq!(lines.pos(text, 3), Pos { line: 2, column: 1 });
        // `x` is the 4th character of line 2 (each `é` is two bytes).
        assert_eq!(lines.pos(text, 8), Pos { line: 2, column: 4 });
        // The end of the text is the end of the last line, not a line 3.
        assert_eq!(lines.pos(text, text.len()), Pos { line: 2, column: 5 });
        assert_eq!(
            Lines::new("", Breaks::Lf).pos("", 0),
            Pos { line: 1, column: 1 }
        );
        assert_eq!(
            lines.clamp(text, Pos { line: 9, column: 1 }),
            Pos { line: 2, column: 5 }
        );
        assert_eq!(
            lines.clamp(text, Pos { line: 1, column: 7 }),
            Pos { line: 1, column: 3 }
        );
    }

    /// A lone `\r` is a line break in YAML and JSON (as their parsers count), not in TOML; a
    /// `\r\n` is one break, and its `\r` is no character of the line in YAML and JSON.
    #[test]
    fn lines_break_where_the_format_s_parser_breaks_them() {
        let text = "a: 1\rbb: 2\r\nccc: x";
        let any = Lines::new(text, Breaks::Any);
        // `bb` starts line 2, `ccc` line 3; `x` is column 6 of line 3.
        assert_eq!(any.pos(text, 5), Pos { line: 2, column: 1 });
        assert_eq!(any.pos(text, text.len() - 1), Pos { line: 3, column: 6 });
        // Line 2 is `bb: 2`, five characters (the `\r\n` is not part of it).
        assert_eq!(
            any.clamp(
                text,
                Pos {
                    line: 2,
                    column: 40
                }
            ),
            Pos { line: 2, column: 6 }
        );
        // An offset inside the `\r\n` is the end of line 2.
        assert_eq!(any.pos(text, 11), Pos { line: 2, column: 6 });
        let lf = Lines::new(text, Breaks::Lf);
        assert_eq!(lf.pos(text, 5), Pos { line: 1, column: 6 });
        assert_eq!(lf.pos(text, text.len() - 1), Pos { line: 2, column: 6 });
        // A text ending in a break has no empty last line, in either way of counting.
        assert_eq!(
            Lines::new("a\r", Breaks::Any).pos("a\r", 2),
            Pos { line: 1, column: 2 }
        );
        assert_eq!(
            Lines::new("a\n", Breaks::Lf).pos("a\n", 2),
            Pos { line: 1, column: 2 }
        );
    }
}
