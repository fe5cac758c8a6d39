//! The tokenizer and the parsing helpers shared by every grammar of the DSL.

use super::error::{suggest, tick, DslError};
use crate::field::{Field, FieldError};
use std::ops::Range;
use std::time::Duration;

/// Characters that form a token on their own and need no whitespace around them.
const PUNCT: [char; 4] = ['(', ')', ',', '>'];

/// The units a duration part accepts, as listed in errors (humantime accepts the long forms too).
pub(crate) const UNITS: [&str; 8] = ["ns", "us", "ms", "s", "m", "h", "d", "w"];
/// Every unit humantime 2 accepts (its `parse_unit`), so that `30 secs` is known for a unit
/// written after a space, and suggestions are only spellings that parse.
const ALL_UNITS: [&str; 40] = [
    "nanos", "nsec", "ns", "usec", "us", "µs", "millis", "msec", "ms", "seconds", "second", "secs",
    "sec", "s", "minutes", "minute", "min", "mins", "m", "hours", "hour", "hr", "hrs", "h", "days",
    "day", "d", "weeks", "week", "wk", "wks", "w", "months", "month", "M", "years", "year", "yr",
    "yrs", "y",
];
/// Nanoseconds per unit, for the exact equivalent of a fraction (`1.5s` is `1s 500ms`).
fn unit_nanos(unit: &str) -> Option<u128> {
    const S: u128 = 1_000_000_000;
    Some(match unit {
        "nanos" | "nsec" | "ns" => 1,
        "usec" | "us" | "µs" => 1_000,
        "millis" | "msec" | "ms" => 1_000_000,
        "seconds" | "second" | "secs" | "sec" | "s" => S,
        "minutes" | "minute" | "min" | "mins" | "m" => 60 * S,
        "hours" | "hour" | "hr" | "hrs" | "h" => 3_600 * S,
        "days" | "day" | "d" => 86_400 * S,
        "weeks" | "week" | "wk" | "wks" | "w" => 7 * 86_400 * S,
        // humantime's month and year.
        "months" | "month" | "M" => 2_630_016 * S,
        "years" | "year" | "yr" | "yrs" | "y" => 31_557_600 * S,
        _ => return None,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub text: &'a str,
    pub span: Range<usize>,
}

/// Splits `src` into tokens: each of `( ) , >` alone, and maximal runs of anything else that is
/// not ASCII whitespace.
pub(crate) fn tokenize(src: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, c) in src.char_indices() {
        let boundary = c.is_ascii_whitespace() || PUNCT.contains(&c);
        if boundary {
            if let Some(s) = start.take() {
                tokens.push(Token {
                    text: &src[s..i],
                    span: s..i,
                });
            }
            if !c.is_ascii_whitespace() {
                tokens.push(Token {
                    text: &src[i..i + 1],
                    span: i..i + 1,
                });
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        tokens.push(Token {
            text: &src[s..],
            span: s..src.len(),
        });
    }
    tokens
}

/// A cursor over the tokens of one DSL string, remembering which token set which field so that
/// validation errors can point at it.
pub(crate) struct Parser<'a> {
    pub src: &'a str,
    tokens: Vec<Token<'a>>,
    pos: usize,
    fields: Vec<(Field, Range<usize>)>,
    /// Whether a word is a keyword of the grammar being parsed: after a number it is the next
    /// clause, not a misspelt duration unit (`fixed 100 jitter`: `100` lacks a unit).
    keyword: fn(&str) -> bool,
}

impl<'a> Parser<'a> {
    /// A parser of `src` whose grammar has no keywords (see [`Parser::keywords`]).
    pub(crate) fn new(src: &'a str) -> Parser<'a> {
        Parser {
            src,
            tokens: tokenize(src),
            pos: 0,
            fields: Vec::new(),
            keyword: |_| false,
        }
    }

    /// This parser, for a grammar whose keywords `keyword` tells.
    pub(crate) fn keywords(self, keyword: fn(&str) -> bool) -> Parser<'a> {
        Parser { keyword, ..self }
    }

    pub(crate) fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.pos)
    }

    pub(crate) fn peek_is(&self, text: &str) -> bool {
        self.peek().is_some_and(|t| t.text == text)
    }

    pub(crate) fn peek_at(&self, n: usize) -> Option<&Token<'a>> {
        self.tokens.get(self.pos + n)
    }

    pub(crate) fn bump(&mut self) -> Option<Token<'a>> {
        let t = self.tokens.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// Start of the next token (or the end of the input).
    pub(crate) fn here(&self) -> usize {
        self.peek().map_or(self.src.len(), |t| t.span.start)
    }

    /// End of the previous token.
    pub(crate) fn last_end(&self) -> usize {
        self.pos
            .checked_sub(1)
            .map_or(0, |i| self.tokens[i].span.end)
    }

    pub(crate) fn record(&mut self, field: Field, span: Range<usize>) {
        self.fields.push((field, span));
    }

    /// The fields recorded so far, in the order written.
    pub(crate) fn written(&self) -> Vec<Field> {
        self.fields.iter().map(|(f, _)| *f).collect()
    }

    /// An error at the next token (or the end of input), with `what` naming the slot
    /// (`jitter`, `backoff`) and `expected` the accepted tokens, already formatted.
    pub(crate) fn unexpected(
        &self,
        what: &str,
        expected: &[String],
        candidates: &[&str],
    ) -> DslError {
        match self.peek() {
            None => DslError::new(
                self.src,
                self.src.len()..self.src.len(),
                "unexpected end of input",
            )
            .expected(expected),
            Some(t) => {
                let message = if what.is_empty() {
                    format!("unexpected `{}`", t.text)
                } else {
                    format!("unknown {what} `{}`", t.text)
                };
                let err = DslError::new(self.src, t.span.clone(), message).expected(expected);
                match suggest(t.text, candidates) {
                    Some(s) => err.help(format!("did you mean `{s}`?")),
                    None => err,
                }
            }
        }
    }

    /// Consumes `text` or fails naming it.
    pub(crate) fn expect(&mut self, text: &str) -> Result<Token<'a>, DslError> {
        if self.peek_is(text) {
            Ok(self.bump().expect("peeked"))
        } else {
            Err(self.unexpected("", &[tick(text)], &[text]))
        }
    }

    /// Fails unless every token was consumed.
    pub(crate) fn finish(&self, expected: &[String]) -> Result<(), DslError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unexpected("", expected, &[])),
        }
    }

    /// Turns the first validation error into a `DslError` at the token that set the field
    /// (the whole input if no token did).
    pub(crate) fn field_error(&self, errors: &[FieldError]) -> DslError {
        let e = &errors[0];
        let span = self
            .fields
            .iter()
            .rev()
            .find(|(f, _)| *f == e.field)
            .map_or(0..self.src.len(), |(_, s)| s.clone());
        DslError::new(self.src, span, e.to_string())
    }

    /// For a layer written in a config file, where it may set only some fields over inherited
    /// ones: `value` and the fields written, if `check` finds nothing wrong with the fields
    /// written. A rule that reads a field the string does not write (no trip rule, `min_calls`
    /// against an inherited window) is left to the merged policy.
    pub(crate) fn written_validated<T>(
        &self,
        value: T,
        check: impl FnOnce(&T, &mut Vec<FieldError>),
    ) -> Result<(T, Vec<Field>), DslError> {
        let mut written = self.written();
        written.sort_unstable();
        written.dedup();
        let value = self.validated(value, |value, errors| {
            let mut all = Vec::new();
            check(value, &mut all);
            errors.extend(all.into_iter().filter(|e| {
                std::iter::once(&e.field)
                    .chain(e.reads.iter())
                    .all(|f| written.contains(f))
            }));
        })?;
        Ok((value, written))
    }

    /// `value` if `check` finds nothing wrong with it, else its first error at the token that
    /// set the field: the DSL's rendering of the one validator's errors.
    pub(crate) fn validated<T>(
        &self,
        value: T,
        check: impl FnOnce(&T, &mut Vec<FieldError>),
    ) -> Result<T, DslError> {
        let mut errors = Vec::new();
        check(&value, &mut errors);
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(self.field_error(&errors))
        }
    }

    /// `int = digit , { digit } ;` as a `u32`.
    pub(crate) fn int(&mut self, what: &str) -> Result<(u32, Range<usize>), DslError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.unexpected(what, &[format!("{what} such as `5`")], &[]));
        };
        if t.text.is_empty() || !t.text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.unexpected("", &[format!("{what} such as `5`")], &[]));
        }
        let n = t.text.parse::<u32>().map_err(|_| {
            DslError::new(
                self.src,
                t.span.clone(),
                format!("number `{}` is too large", t.text),
            )
            .expected([format!("at most {}", u32::MAX)])
        })?;
        self.bump();
        Ok((n, t.span))
    }

    /// `number = digit , { digit } , [ "." , digit , { digit } ] ;` as an `f64`: `what` names
    /// it, `range` is its valid range and `example` a valid value, for the error's
    /// `expected` (`a backoff ratio in 0.5..1.0, such as `0.9``). A number too large for an
    /// `f64` (hundreds of digits) is out of range rather than infinite, which would not print
    /// back as a number.
    pub(crate) fn number(
        &mut self,
        what: &str,
        range: &str,
        example: &str,
    ) -> Result<(f64, Range<usize>), DslError> {
        let expected = [format!("{what} in {range}, such as `{example}`")];
        match self.peek().cloned() {
            Some(t) if is_number(t.text) => {
                let v = self.finite(t.text, &t, what, &expected)?;
                self.bump();
                Ok((v, t.span))
            }
            _ => Err(self.unexpected("", &expected, &[])),
        }
    }

    /// `digits` (of token `t`) as a finite `f64`, or an out-of-range error naming the token.
    fn finite(
        &self,
        digits: &str,
        t: &Token<'_>,
        what: &str,
        expected: &[String],
    ) -> Result<f64, DslError> {
        match digits.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(DslError::new(
                self.src,
                t.span.clone(),
                format!(
                    "{what} `{}` is out of range: too large for a number",
                    t.text
                ),
            )
            .expected(expected)),
        }
    }

    /// `percent = number , "%" ;` (one token, no space before `%`).
    pub(crate) fn percent(&mut self, what: &str) -> Result<(f64, Range<usize>), DslError> {
        let expected = [format!("{what} such as `50%`")];
        match self.peek().cloned() {
            Some(t) if t.text.strip_suffix('%').is_some_and(is_number) => {
                let v = self.finite(&t.text[..t.text.len() - 1], &t, what, &expected)?;
                self.bump();
                Ok((v, t.span))
            }
            Some(t) if t.text.starts_with('-') => Err(DslError::new(
                self.src,
                t.span.clone(),
                format!("negative {what} `{}`", t.text),
            )
            .expected(expected)),
            Some(t) if is_number(t.text) => {
                let mut span = t.span.clone();
                let next = self.peek_at(1).cloned();
                if let Some(n) = next.filter(|n| n.text == "%") {
                    span.end = n.span.end;
                    return Err(DslError::new(
                        self.src,
                        span,
                        format!(
                            "space before `%` in {what} `{}`",
                            &self.src[t.span.start..n.span.end]
                        ),
                    )
                    .expected([format!("`{}%`", t.text)]));
                }
                Err(
                    DslError::new(self.src, span, format!("{what} `{}` has no `%`", t.text))
                        .expected([format!("`{}%`", t.text)]),
                )
            }
            _ => Err(self.unexpected("", &expected, &[])),
        }
    }

    /// Whether the next token starts a duration part (`<digits><letter>...`).
    pub(crate) fn at_duration_part(&self) -> bool {
        self.peek().is_some_and(|t| starts_duration_part(t.text))
    }

    /// `duration = duration-part , { duration-part } ;` where a part is one token such as
    /// `30s`, `1m`, `250ms` (number and unit with no space between), parsed by `humantime`.
    pub(crate) fn duration(&mut self, what: &str) -> Result<(Duration, Range<usize>), DslError> {
        let expected = || [format!("{what} such as `30s`, `250ms` or `1m 30s`")];
        let Some(first) = self.peek().cloned() else {
            return Err(self.unexpected("", &expected(), &[]));
        };
        if first.text.starts_with('-') {
            return Err(DslError::new(
                self.src,
                first.span.clone(),
                format!("negative duration `{}`", first.text),
            )
            .expected([format!(
                "a positive duration such as `{}`",
                &first.text[1..]
            )]));
        }
        if !first.text.is_empty() && first.text.bytes().all(|b| b.is_ascii_digit()) {
            if let Some(unit) = self.peek_at(1).filter(|u| ALL_UNITS.contains(&u.text)) {
                let span = first.span.start..unit.span.end;
                return Err(DslError::new(
                    self.src,
                    span.clone(),
                    format!(
                        "space between number and unit in duration `{}`",
                        &self.src[span]
                    ),
                )
                .expected([format!("`{}{}`", first.text, unit.text)]));
            }
            // `30 parsecs`: a word meant as the unit, but not one.
            if let Some(word) = self.peek_at(1).filter(|w| {
                w.text.bytes().all(|b| b.is_ascii_alphabetic()) && !(self.keyword)(w.text)
            }) {
                let whole = first.span.start..word.span.end;
                let err = DslError::new(
                    self.src,
                    word.span.clone(),
                    format!(
                        "unknown duration unit `{}` in `{}`",
                        word.text, &self.src[whole]
                    ),
                )
                .expected(UNITS.iter().map(|u| tick(u)));
                return Err(match suggest(word.text, &ALL_UNITS) {
                    Some(s) => err.help(format!("did you mean `{}{s}`?", first.text)),
                    None => err,
                });
            }
            return Err(DslError::new(
                self.src,
                first.span.clone(),
                format!("duration `{}` has no unit", first.text),
            )
            .expected(UNITS.iter().map(|u| tick(u))));
        }
        if is_number(first.text) {
            // `2.5 m`: a fraction, and a space.
            if let Some(unit) = self.peek_at(1).filter(|u| ALL_UNITS.contains(&u.text)) {
                let span = first.span.start..unit.span.end;
                let word = format!("{}{}", first.text, unit.text);
                if let Some(e) = self.fraction_error(span, &word) {
                    return Err(e);
                }
            }
        }
        if let Some(e) = self.fraction_error(first.span.clone(), first.text) {
            return Err(e);
        }
        if !starts_duration_part(first.text) {
            return Err(self.unexpected("", &expected(), &[]));
        }
        let mut total = Duration::ZERO;
        let start = first.span.start;
        while self.at_duration_part() {
            let t = self.bump().expect("peeked");
            // humantime takes `1m1.5s`; the grammar does not (fractions are `1s 500ms`).
            if let Some(e) = self.fraction_error(t.span.clone(), t.text) {
                return Err(e);
            }
            let d = self.duration_part(&t)?;
            total = total.checked_add(d).ok_or_else(|| {
                DslError::new(self.src, start..t.span.end, "duration is too large")
            })?;
        }
        Ok((total, start..self.last_end()))
    }

    /// The error for a duration written with a fraction (`1.5s`, `1m1.5s`), naming its exact
    /// equivalent in whole units; `None` if `word` is not one.
    fn fraction_error(&self, span: Range<usize>, word: &str) -> Option<DslError> {
        let equivalent = fraction_equivalent(word)?;
        Some(
            DslError::new(
                self.src,
                span.clone(),
                format!("fractional duration `{}`", &self.src[span]),
            )
            .expected([tick(&equivalent)])
            .help("fractions are written with a smaller unit"),
        )
    }

    fn duration_part(&self, t: &Token<'a>) -> Result<Duration, DslError> {
        humantime::parse_duration(t.text).map_err(|e| match e {
            humantime::DurationError::UnknownUnit {
                start, end, unit, ..
            } => {
                let span = t.span.start + start..t.span.start + end;
                let err = DslError::new(
                    self.src,
                    span,
                    format!("unknown duration unit `{unit}` in `{}`", t.text),
                )
                .expected(UNITS.iter().map(|u| tick(u)));
                match suggest(&unit, &ALL_UNITS) {
                    Some(s) => err.help(format!("did you mean `{s}`?")),
                    None => err,
                }
            }
            humantime::DurationError::NumberOverflow => DslError::new(
                self.src,
                t.span.clone(),
                format!("duration `{}` is too large", t.text),
            ),
            other => DslError::new(
                self.src,
                t.span.clone(),
                format!("invalid duration `{}`: {other}", t.text),
            )
            .expected([String::from(
                "a duration such as `30s`, `250ms` or `1m 30s`",
            )]),
        })
    }
}

fn is_number(s: &str) -> bool {
    let (int, frac) = s.split_once('.').unwrap_or((s, "1"));
    !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// `1.5s` as `1s 500ms`: the exact value of a duration word with fractions, in whole units
/// (digits below a nanosecond are dropped); `None` unless `word` is numbers with units and at
/// least one fraction.
fn fraction_equivalent(word: &str) -> Option<String> {
    fn digits(s: &str) -> usize {
        s.bytes().take_while(u8::is_ascii_digit).count()
    }
    if !word.contains('.') {
        return None;
    }
    let mut total: u128 = 0;
    let mut rest = word;
    while !rest.is_empty() {
        let (int, r) = rest.split_at(digits(rest));
        let (frac, r) = match r.strip_prefix('.') {
            Some(r) if digits(r) > 0 => r.split_at(digits(r)),
            Some(_) => return None,
            None => ("", r),
        };
        let (unit, r) = r.split_at(r.find(|c: char| c.is_ascii_digit()).unwrap_or(r.len()));
        let nanos = unit_nanos(unit)?;
        if int.is_empty() {
            return None;
        }
        total = total.checked_add(int.parse::<u128>().ok()?.checked_mul(nanos)?)?;
        if !frac.is_empty() {
            let frac = &frac[..frac.len().min(18)];
            let scale = 10u128.pow(frac.len() as u32);
            total = total.checked_add(frac.parse::<u128>().ok()? * nanos / scale)?;
        }
        rest = r;
    }
    let nanos = u64::try_from(total).ok()?;
    Some(fmt_duration(Duration::from_nanos(nanos)).to_string())
}

fn starts_duration_part(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && s[digits..].starts_with(|c: char| c.is_ascii_alphabetic())
}

impl Parser<'_> {
    /// Parses the whole input as one duration (see [`crate::dsl::parse_duration`]).
    pub(crate) fn whole_duration(mut self) -> Result<Duration, DslError> {
        let (d, _) = self.duration("a duration")?;
        self.finish(&[String::from("end of input")])?;
        Ok(d)
    }
}

/// Parses a whole string as one duration, in a grammar without keywords.
pub(crate) fn parse_duration(src: &str) -> Result<Duration, DslError> {
    Parser::new(src).whole_duration()
}

/// A duration written inside a word of a grammar (`100/1m30s`, `10ms..200ms`): the DSL's
/// format ([`fmt_duration`]) without its spaces.
pub(crate) fn compact(d: Duration) -> String {
    fmt_duration(d).to_string().replace(' ', "")
}

/// Writes a duration in the DSL (`humantime`'s format: `1m 30s`, `250ms`, `0s`).
pub(crate) fn fmt_duration(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<&str> {
        tokenize(s).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn tokens_and_whitespace() {
        assert_eq!(
            texts("5x exp(100ms, max 2s)"),
            ["5x", "exp", "(", "100ms", ",", "max", "2s", ")"]
        );
        assert_eq!(
            texts("  timeout>retry >\tbreaker "),
            ["timeout", ">", "retry", ">", "breaker"]
        );
        assert_eq!(tokenize("a  bc")[1].span, 3..5);
        assert!(tokenize(" \t\n").is_empty());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 30s "), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration("30parsecs").unwrap_err().to_string(),
            "unknown duration unit `parsecs` in `30parsecs` at 2..9; expected one of `ns`, `us`, \
             `ms`, `s`, `m`, `h`, `d` or `w`"
        );
        assert_eq!(parse_duration("").unwrap_err().span, 0..0);
        // A word after the number is taken for the unit it was meant to be.
        let e = parse_duration("30 parsecs").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown duration unit `parsecs` in `30 parsecs` at 3..10; expected one of `ns`, \
             `us`, `ms`, `s`, `m`, `h`, `d` or `w`"
        );
        // `secs` is a unit (humantime's): only the space is wrong (issue 13).
        let e = parse_duration("2 secs").unwrap_err();
        assert_eq!(
            e.to_string(),
            "space between number and unit in duration `2 secs` at 0..6; expected `2secs`"
        );
        // A keyword of the grammar is not a unit: the number lacks one.
        let mut p = Parser::new("100 jitter").keywords(|w| w == "jitter");
        assert!(p
            .duration("a delay")
            .unwrap_err()
            .to_string()
            .starts_with("duration `100` has no unit"));
    }

    #[test]
    fn formatting_round_trips() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(86_400 * 400 + 7),
        ] {
            assert_eq!(parse_duration(&fmt_duration(d).to_string()), Ok(d));
        }
    }
}
