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
#[derive(Clone, Debug, Default)]
pub(super) struct Lines {
    starts: Vec<usize>,
    len: usize,
}

impl Lines {
    pub(super) fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines {
            starts,
            len: text.len(),
        }
    }

    /// How many lines the text has (at least 1; a final newline ends the last line).
    fn count(&self) -> usize {
        let n = self.starts.len();
        if n > 1 && self.starts[n - 1] == self.len {
            n - 1
        } else {
            n
        }
    }

    /// The position of byte `offset` of `text` (the text these lines are of). An offset at or
    /// past the end is the end of the last line: never a line past the end of the file.
    pub(super) fn pos(&self, text: &str, offset: usize) -> Pos {
        let mut offset = offset.min(text.len());
        if offset == text.len() && text.ends_with('\n') {
            // The final newline: the end of the last line.
            offset -= 1;
        }
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .starts
            .partition_point(|s| *s <= offset)
            .min(self.count());
        let start = self.starts[line - 1].min(offset);
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
        let start = self.starts[pos.line - 1];
        let end = self.starts.get(pos.line).map_or(text.len(), |s| s - 1);
        let width = text[start..end.max(start)].chars().count();
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
        let lines = Lines::new(text);
        assert_eq!(lines.pos(text, 0), Pos { line: 1, column: 1 });
        assert_eq!(lines.pos(text, 3), Pos { line: 2, column: 1 });
        // `x` is the 4th character of line 2 (each `é` is two bytes).
        assert_eq!(lines.pos(text, 8), Pos { line: 2, column: 4 });
        // The end of the text is the end of the last line, not a line 3.
        assert_eq!(lines.pos(text, text.len()), Pos { line: 2, column: 5 });
        assert_eq!(lines.pos("", 0), Pos { line: 1, column: 1 });
        assert_eq!(
            lines.clamp(text, Pos { line: 9, column: 1 }),
            Pos { line: 2, column: 5 }
        );
        assert_eq!(
            lines.clamp(text, Pos { line: 1, column: 7 }),
            Pos { line: 1, column: 3 }
        );
    }
}
