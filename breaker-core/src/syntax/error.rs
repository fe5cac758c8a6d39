//! The one error type of the DSL parser.

use std::fmt;
use std::ops::Range;

/// A DSL string that does not follow the grammar, or that parses to an invalid policy.
///
/// Every error names the offending fragment and its range in the input, so a caller can
/// point at it: config loading reports them next to the file position, and the
/// `#[circuit_breaker]` attribute's compile error, which sits under the whole string literal
/// (stable `proc_macro` cannot point inside one), quotes the literal and gives the range.
/// [`span`](Self::span) is the byte range (to slice the input with); what the text shows is
/// the character range ([`chars`](Self::chars)), as a person counts and as config files'
/// columns count: the two differ only in text that is not ASCII (`"3x éxp"`: bytes `3..7`,
/// characters `3..6`).
///
/// `Display` writes `{message} at {start}..{end}` (characters), then `; expected {expected}`
/// when the parser knows what would have been accepted, then `; {help}` when there is a
/// suggestion:
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::retry::RetryPolicy;
/// let err = "3x exp jiter".parse::<RetryPolicy>().unwrap_err();
/// assert_eq!(err.span, 7..12);
/// assert_eq!(err.fragment, "jiter");
/// assert_eq!(
///     err.to_string(),
///     "unknown jitter `jiter` at 7..12; expected one of `(`, `jitter`, `full-jitter`, \
///      `equal-jitter`, `decorrelated-jitter`, `additive-jitter` or end of input; \
///      did you mean `jitter`?"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DslError {
    /// The offending text, exactly as it appears in the input (`""` at the end of the input).
    pub fragment: String,
    /// Byte range of `fragment` in the input; always on `char` boundaries. The error's text
    /// shows the character range, [`chars`](Self::chars).
    pub span: Range<usize>,
    /// What would have been accepted at `span`, each entry a complete phrase (tokens are in
    /// backticks: `` `jitter` ``, descriptions are not: `a duration such as `30s``). Empty for
    /// errors about a value rather than the syntax, such as a policy that fails validation.
    pub expected: Vec<String>,
    /// What is wrong, lowercase, naming the fragment, without the position.
    pub message: String,
    /// A suggestion such as ``did you mean `jitter`?``, if there is one.
    pub help: Option<String>,
    /// Character range of `fragment` in the input, start and end (a DSL string is far
    /// shorter than 4 Gi characters; kept small, as the error is returned by value).
    chars: [u32; 2],
}

/// `r` as `[start, end]`, each saturated at `u32::MAX`.
fn narrow(r: &Range<usize>) -> [u32; 2] {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    [n(r.start), n(r.end)]
}

/// Byte range `span` of `src` as an error's text shows it: its character range, `start..end`.
pub(crate) fn shown_span(src: &str, span: &Range<usize>) -> String {
    let r = char_range(src, span);
    format!("{}..{}", r.start, r.end)
}

/// The character range of byte range `span` of `src` (`span` itself where it is not on
/// `src`'s character boundaries, which no error's span is).
pub(crate) fn char_range(src: &str, span: &Range<usize>) -> Range<usize> {
    match (src.get(..span.start), src.get(span.clone())) {
        (Some(before), Some(inside)) => {
            let start = before.chars().count();
            start..start + inside.chars().count()
        }
        _ => span.clone(),
    }
}

impl DslError {
    /// An error at `span` of `src`. A message of several clauses (`what is wrong; what to do
    /// instead`, as the validator's and the order's messages are) keeps its first clause as
    /// the message and the rest as the help, so the position follows what is wrong, as in
    /// every other error, and not a hint.
    pub(crate) fn new(src: &str, span: Range<usize>, message: impl Into<String>) -> DslError {
        let mut message = message.into();
        let help = message.find("; ").map(|i| {
            let rest = message[i + 2..].to_owned();
            message.truncate(i);
            rest
        });
        DslError {
            fragment: src.get(span.clone()).unwrap_or_default().to_owned(),
            chars: narrow(&char_range(src, &span)),
            span,
            expected: Vec::new(),
            message,
            help,
        }
    }

    pub(crate) fn expected<S: AsRef<str>>(mut self, expected: impl IntoIterator<Item = S>) -> Self {
        self.expected = expected
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        self
    }

    /// Adds a suggestion, after the message's own hint if it has one.
    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        let help = help.into();
        self.help = Some(match self.help.take() {
            Some(first) => format!("{first}; {help}"),
            None => help,
        });
        self
    }

    /// Moves the span to where the parsed text starts in `outer`, at byte `offset`: for a DSL
    /// fragment read inside a larger string (the argument of `closed(..)` in a scope).
    pub(crate) fn offset(mut self, outer: &str, offset: usize) -> Self {
        let before = char_range(outer, &(0..offset)).end;
        let chars = self.chars();
        self.span = self.span.start + offset..self.span.end + offset;
        self.chars = narrow(&(chars.start + before..chars.end + before));
        self
    }

    /// Character range of [`fragment`](Self::fragment) in the input: the range the error's
    /// text shows, [`span`](Self::span) counted in characters rather than bytes.
    pub fn chars(&self) -> Range<usize> {
        self.chars[0] as usize..self.chars[1] as usize
    }

    /// The message without the position: `{message}; expected {expected}; {help}`, for a
    /// caller that shows where the fragment is in another way.
    pub fn describe(&self) -> String {
        let mut out = self.message.clone();
        self.write_tail(&mut out);
        out
    }

    fn write_tail(&self, out: &mut String) {
        match self.expected.as_slice() {
            [] => {}
            [one] => {
                out.push_str("; expected ");
                out.push_str(one);
            }
            [init @ .., last] => {
                out.push_str("; expected one of ");
                out.push_str(&init.join(", "));
                out.push_str(" or ");
                out.push_str(last);
            }
        }
        if let Some(help) = &self.help {
            // "expected `consecutive`; did you mean `consecutive`?" says one thing twice.
            let repeats = matches!(self.expected.as_slice(), [one] if *help == format!("did you mean {one}?"));
            if !repeats {
                out.push_str("; ");
                out.push_str(help);
            }
        }
    }
}

impl fmt::Display for DslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [start, end] = self.chars;
        let mut out = format!("{} at {start}..{end}", self.message);
        self.write_tail(&mut out);
        f.write_str(&out)
    }
}

impl std::error::Error for DslError {}

/// Backticks a token for an `expected` list.
pub(crate) fn tick(s: &str) -> String {
    format!("`{s}`")
}

/// The closest candidate within edit distance 2 (for "did you mean"), if any; a swap of two
/// neighbouring letters is one edit (`opne` -> `open`).
///
/// A candidate is never one the word would have to be rewritten into whole (`x` is not
/// "`s`?"), but a short one may be reached by deleting (`ss` -> `s`). Two edits are a
/// suggestion only between words of 5 letters or more: in a 4-letter word they change half
/// of it (`name` is not "`rate`?"). Among candidates equally close, one that starts with the
/// word's first letter wins (`ss` -> `s`, not `ns`), then the first in `candidates`.
pub(crate) fn suggest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let lower = word.to_ascii_lowercase();
    let first = lower.chars().next();
    candidates
        .iter()
        .map(|c| (strsim::osa_distance(&lower, c), *c))
        .filter(|(d, c)| {
            let longest = c.chars().count().max(lower.chars().count());
            *d <= 2 && *d < longest && (*d <= 1 || longest >= 5)
        })
        .min_by_key(|(d, c)| (*d, c.chars().next() != first))
        .map(|(_, c)| c)
}

/// Tails of a key that name a unit or what the value is, after a `_` (`timeout_ms`,
/// `window_size`): the key without them is what was meant.
const KEY_TAILS: &[&str] = &[
    "ms",
    "millis",
    "milliseconds",
    "s",
    "sec",
    "secs",
    "seconds",
    "count",
    "size",
    "policy",
    "config",
    "limit",
    "limiter",
];

/// Whether `gerund` is the `-ing` form of `word`: `hedging` of `hedge`, `retrying` of
/// `retry`.
fn is_gerund_of(gerund: &str, word: &str) -> bool {
    gerund
        .strip_suffix("ing")
        .is_some_and(|stem| stem == word || word.strip_suffix('e') == Some(stem))
}

/// Whether `plural` is an English plural of `word`: `-s`, `-es`, `-y` to `-ies`.
fn is_plural_of(plural: &str, word: &str) -> bool {
    plural
        .strip_prefix(word)
        .is_some_and(|tail| tail == "s" || tail == "es")
        || word
            .strip_suffix('y')
            .and_then(|stem| plural.strip_prefix(stem))
            .is_some_and(|tail| tail == "ies")
}

/// `key` in snake case: camel case split at its capitals (`maxAttempts`), `-` as `_`,
/// lowercase.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (i, c) in key.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 && !out.ends_with('_') {
            out.push('_');
        }
        out.push(if c == '-' {
            '_'
        } else {
            c.to_ascii_lowercase()
        });
    }
    out
}

/// The key of `keys` an unknown `key` most likely meant (a config file's key, an attribute's
/// option): the same key in snake case (`maxAttempts`), its plural or singular (`retries` for
/// `retry`, `policy` for `policies`) or its `-ing` form (`hedging`), the key with a unit or a
/// word after a `_` ([`KEY_TAILS`]: `timeout_ms`, `rate_limit`), else a key within a small
/// edit distance ([`suggest`]: `timout`). `None` for a word like none of them (`foo`).
pub(crate) fn suggest_key<'k>(key: &str, keys: &[&'k str]) -> Option<&'k str> {
    let word = snake_case(key);
    let trimmed = word
        .rsplit_once('_')
        .filter(|(_, tail)| KEY_TAILS.contains(tail))
        .map(|(head, _)| head);
    let forms = std::iter::once(word.as_str()).chain(trimmed);
    for form in forms {
        let same = |k: &&str| {
            *k == form || is_plural_of(form, k) || is_plural_of(k, form) || is_gerund_of(form, k)
        };
        if let Some(k) = keys.iter().copied().find(same) {
            return Some(k);
        }
    }
    suggest(&word, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(suggest("jiter", &["jitter", "full-jitter"]), Some("jitter"));
        assert_eq!(suggest("expo", &["fixed", "linear", "exp"]), Some("exp"));
        assert_eq!(suggest("zzzzzz", &["exp"]), None);
        // A short candidate reached by a deletion, and the word's first letter breaks ties.
        assert_eq!(suggest("ss", &["ns", "us", "ms", "s"]), Some("s"));
        assert_eq!(suggest("x", &["s", "m"]), None);
        assert_eq!(suggest("mss", &["ns", "ms", "s"]), Some("ms"));
        assert_eq!(suggest("opne", &["open", "probes"]), Some("open"));
        assert_eq!(suggest("name", &["rate", "hedge"]), None);
        assert_eq!(strsim::levenshtein("kitten", "sitting"), 3);
    }

    #[test]
    fn display_lists_expected() {
        let e = DslError::new("ab", 0..1, "bad").expected(["`x`", "end of input"]);
        assert_eq!(
            e.to_string(),
            "bad at 0..1; expected one of `x` or end of input"
        );
        let e = DslError::new("ab", 2..2, "bad")
            .expected(["`x`"])
            .help("try `x`");
        assert_eq!(e.to_string(), "bad at 2..2; expected `x`; try `x`");
        assert_eq!(e.describe(), "bad; expected `x`; try `x`");
        assert_eq!(e.fragment, "");
    }
}
