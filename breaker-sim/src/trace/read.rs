//! Reading traces: JSON Lines or CSV, streamed, put back in arrival order, phases labelled.

use super::{Call, CallOutcome, Phase, TraceError};
use breaker_core::classify::Outcome;
use serde::Deserialize;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// How many lines the reader holds to put lines back in arrival order: a line may come up to
/// this many lines after lines that arrived later than it. About 3 MiB of memory.
pub const REORDER_WINDOW: usize = 65_536;

/// Detected phases (a trace without labels) are built from buckets of this length.
const BUCKET_NS: u64 = 1_000_000_000;

/// The format of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line (`.jsonl`, `.ndjson`, `.json`, anything not `.csv`).
    JsonLines,
    /// A header row and one row per call (`.csv`).
    Csv,
}

impl Format {
    /// The format a file name says: `.csv` is CSV, anything else JSON Lines.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => Format::Csv,
            _ => Format::JsonLines,
        }
    }
}

/// A trace line as written, before its checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw<'a> {
    t_ms: Number<TMs, f64>,
    latency_ms: Number<LatencyMs, f64>,
    #[serde(default, borrow)]
    outcome: Option<Cow<'a, str>>,
    #[serde(default)]
    status: Option<Number<Status, u16>>,
    #[serde(default, borrow)]
    phase: Option<Cow<'a, str>>,
    #[serde(default)]
    attempt: Option<Number<Attempt, u16>>,
}

/// A number of a trace line whose type errors name its field ("expected `t_ms`, a number of
/// milliseconds"): serde's own name only the type (`f64`).
struct Number<F, T>(T, PhantomData<F>);

/// A numeric field of a trace line: its name and what it holds.
trait NumberField {
    const EXPECTED: &'static str;
}

macro_rules! number_fields {
    ($($marker:ident => $expected:literal),* $(,)?) => {$(
        struct $marker;
        impl NumberField for $marker {
            const EXPECTED: &'static str = $expected;
        }
    )*};
}

number_fields!(
    TMs => "`t_ms`, a number of milliseconds",
    LatencyMs => "`latency_ms`, a number of milliseconds",
    Status => "`status`, an HTTP status such as 503",
    Attempt => "`attempt`, a whole number from 1",
);

impl<'de, F: NumberField> Deserialize<'de> for Number<F, f64> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<F>(PhantomData<F>);
        impl<F: NumberField> serde::de::Visitor<'_> for V<F> {
            type Value = f64;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(F::EXPECTED)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
        }
        d.deserialize_f64(V::<F>(PhantomData))
            .map(|v| Number(v, PhantomData))
    }
}

impl<'de, F: NumberField> Deserialize<'de> for Number<F, u16> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<F>(PhantomData<F>);
        impl<F: NumberField> serde::de::Visitor<'_> for V<F> {
            type Value = u16;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(F::EXPECTED)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u16, E> {
                u16::try_from(v)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u16, E> {
                u16::try_from(v)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_u16(V::<F>(PhantomData))
            .map(|v| Number(v, PhantomData))
    }
}

/// A checked line waiting in the reorder window.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    t_ns: u64,
    line: u64,
    latency_ns: u64,
    outcome: CallOutcome,
    status: u16,
    attempt: u16,
    transient: bool,
    /// Interned label, `u32::MAX` for none.
    label: u32,
}

enum Source {
    Json(Box<dyn BufRead + Send>),
    Csv {
        reader: csv::Reader<Box<dyn Read + Send>>,
        headers: csv::StringRecord,
    },
}

/// Reads a trace call by call, in arrival order, with its phases. See the
/// [module docs](super) for the format.
///
/// Memory is bounded by [`REORDER_WINDOW`] lines plus one second of calls (for a trace without
/// labels, whose phases are detected per one-second bucket), whatever the trace's length.
pub struct TraceReader {
    path: PathBuf,
    source: Source,
    line: u64,
    buf: String,
    record: csv::StringRecord,
    bytes: u64,
    eof: bool,
    window: BinaryHeap<Reverse<Pending>>,
    released: Option<(u64, u64)>,
    labels: HashMap<String, u32>,
    label_names: Vec<String>,
    /// Whether the trace labels its phases: decided by the first line.
    labelled: Option<bool>,
    current_label: u32,
    /// Detection: the calls of the current one-second bucket.
    bucket: Vec<Call>,
    bucket_index: u64,
    ready: VecDeque<Call>,
    phases: Vec<Phase>,
}

impl TraceReader {
    /// Opens `path`; `.csv` files are CSV, others JSON Lines.
    ///
    /// # Errors
    /// [`TraceError::Io`] if the file cannot be opened; for CSV, [`TraceError::Line`] if its
    /// header row cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        TraceReader::new(
            path,
            Box::new(BufReader::with_capacity(1 << 16, file)),
            Format::from_path(path),
        )
    }

    /// Reads `input` in `format`; `name` is the file named in errors.
    ///
    /// # Errors
    /// For CSV, [`TraceError::Line`] if the header row cannot be read.
    pub fn new(
        name: impl Into<PathBuf>,
        input: Box<dyn BufRead + Send>,
        format: Format,
    ) -> Result<TraceReader, TraceError> {
        let path = name.into();
        let source = match format {
            Format::JsonLines => Source::Json(input),
            Format::Csv => {
                let input: Box<dyn Read + Send> = Box::new(input);
                let mut reader = csv::ReaderBuilder::new()
                    .has_headers(true)
                    .trim(csv::Trim::All)
                    .from_reader(input);
                let headers = reader
                    .headers()
                    .map_err(|e| TraceError::Line {
                        path: path.clone(),
                        line: 1,
                        message: format!("cannot read the header row: {e}"),
                    })?
                    .clone();
                for (i, h) in headers.iter().enumerate() {
                    if !FIELDS.contains(&h) {
                        return Err(TraceError::Line {
                            path,
                            line: 1,
                            message: format!(
                                "unknown column `{h}` (column {}); expected {}",
                                i + 1,
                                expected_fields()
                            ),
                        });
                    }
                }
                Source::Csv { reader, headers }
            }
        };
        Ok(TraceReader {
            path,
            source,
            line: 0,
            buf: String::new(),
            record: csv::StringRecord::new(),
            bytes: 0,
            eof: false,
            window: BinaryHeap::new(),
            released: None,
            labels: HashMap::new(),
            label_names: Vec::new(),
            labelled: None,
            current_label: u32::MAX,
            bucket: Vec::new(),
            bucket_index: 0,
            ready: VecDeque::new(),
            phases: Vec::new(),
        })
    }

    /// The phases seen so far, in order. Complete once [`next_call`](Self::next_call) has
    /// returned `None`.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Bytes of the file read so far (for a progress bar).
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Appends up to `max` calls to `out`; returns how many (0 at the end of the trace).
    ///
    /// # Errors
    /// As [`next_call`](Self::next_call).
    pub fn read_chunk(&mut self, out: &mut Vec<Call>, max: usize) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < max {
            match self.next_call()? {
                Some(c) => {
                    out.push(c);
                    n += 1;
                }
                None => break,
            }
        }
        Ok(n)
    }

    /// The next call in arrival order (ties in file order), or `None` at the end.
    ///
    /// # Errors
    /// [`TraceError::Io`] if reading fails; [`TraceError::Line`] for a malformed line, a value
    /// out of range, an unknown or missing field, a line more than [`REORDER_WINDOW`] lines
    /// out of order, or labels on some lines but not the first.
    #[allow(clippy::should_implement_trait)]
    pub fn next_call(&mut self) -> Result<Option<Call>, TraceError> {
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Ok(Some(c));
            }
            if self.eof && self.window.is_empty() {
                if self.bucket.is_empty() {
                    return Ok(None);
                }
                self.close_bucket();
                continue;
            }
            if !self.eof && self.window.len() <= REORDER_WINDOW {
                if let Some(p) = self.read_line()? {
                    self.window.push(Reverse(p));
                }
                continue;
            }
            let Reverse(p) = self.window.pop().expect("the window is not empty");
            if let Some((t, line)) = self.released {
                if p.t_ns < t {
                    return Err(self.error_at(
                        p.line,
                        format!(
                            "`t_ms` {} is earlier than `t_ms` {} of line {line}, which is already \
                             replayed: lines may be out of arrival order by at most {REORDER_WINDOW} \
                             lines; sort the trace by `t_ms`",
                            ms(p.t_ns),
                            ms(t)
                        ),
                    ));
                }
            }
            self.released = Some((p.t_ns, p.line));
            self.release(p)?;
        }
    }

    fn error_at(&self, line: u64, message: String) -> TraceError {
        TraceError::Line {
            path: self.path.clone(),
            line,
            message,
        }
    }

    /// Reads and checks the next non-empty line; `None` at the end of the file.
    fn read_line(&mut self) -> Result<Option<Pending>, TraceError> {
        loop {
            match &mut self.source {
                Source::Json(input) => {
                    self.buf.clear();
                    let n = input
                        .read_line(&mut self.buf)
                        .map_err(|source| TraceError::Io {
                            path: self.path.clone(),
                            source,
                        })?;
                    if n == 0 {
                        self.eof = true;
                        return Ok(None);
                    }
                    self.bytes += n as u64;
                    self.line += 1;
                    let text = self.buf.trim();
                    if text.is_empty() {
                        continue;
                    }
                    let raw: Raw<'_> =
                        serde_json::from_str(text).map_err(|e| TraceError::Line {
                            path: self.path.clone(),
                            line: self.line,
                            message: json_message(&e),
                        })?;
                    let line = self.line;
                    return check(raw, line, &mut self.labels, &mut self.label_names)
                        .map(Some)
                        .map_err(|m| TraceError::Line {
                            path: self.path.clone(),
                            line,
                            message: m,
                        });
                }
                Source::Csv { reader, headers } => {
                    let more =
                        reader
                            .read_record(&mut self.record)
                            .map_err(|e| TraceError::Line {
                                path: self.path.clone(),
                                line: e.position().map_or(self.line + 1, |p| p.line()),
                                message: e.to_string(),
                            })?;
                    if !more {
                        self.eof = true;
                        return Ok(None);
                    }
                    let pos = self.record.position().map_or(0, |p| p.line());
                    self.bytes = self.record.position().map_or(self.bytes, |p| p.byte());
                    self.line = pos;
                    let raw: Raw<'_> =
                        self.record
                            .deserialize(Some(headers))
                            .map_err(|e| TraceError::Line {
                                path: self.path.clone(),
                                line: pos,
                                message: csv_message(&e, headers, &self.record),
                            })?;
                    return check(raw, pos, &mut self.labels, &mut self.label_names)
                        .map(Some)
                        .map_err(|m| TraceError::Line {
                            path: self.path.clone(),
                            line: pos,
                            message: m,
                        });
                }
            }
        }
    }

    /// Takes a line released in arrival order: gives it its phase.
    fn release(&mut self, p: Pending) -> Result<(), TraceError> {
        let labelled = *self.labelled.get_or_insert(p.label != u32::MAX);
        let mut call = Call {
            t_ns: p.t_ns,
            latency_ns: p.latency_ns,
            outcome: p.outcome,
            status: p.status,
            attempt: p.attempt,
            transient: p.transient,
            phase: 0,
        };
        if labelled {
            if p.label == u32::MAX {
                return Err(self.error_at(
                    p.line,
                    "`phase` is missing, but the trace's first call has one: label every line's \
                     phase or none"
                        .into(),
                ));
            }
            if p.label != self.current_label {
                self.current_label = p.label;
                self.phases.push(Phase {
                    name: self.label_names[p.label as usize].clone(),
                    start_ns: p.t_ns,
                    last_ns: p.t_ns,
                    known: 0,
                    failures: 0,
                });
            }
            call.phase = (self.phases.len() - 1) as u32;
            count(&mut self.phases, &call);
            self.ready.push_back(call);
            return Ok(());
        }
        if p.label != u32::MAX {
            return Err(self.error_at(
                p.line,
                "`phase` is set, but the trace's first call has none: label every line's phase \
                 or none"
                    .into(),
            ));
        }
        let bucket = p.t_ns / BUCKET_NS;
        if !self.bucket.is_empty() && bucket != self.bucket_index {
            self.close_bucket();
        }
        self.bucket_index = bucket;
        self.bucket.push(call);
        Ok(())
    }

    /// Detection: decides whether the buffered bucket is failing and releases its calls.
    fn close_bucket(&mut self) {
        let (mut known, mut failures) = (0u64, 0u64);
        for c in &self.bucket {
            if c.outcome.is_known() {
                known += 1;
                failures += u64::from(c.outcome.is_failure());
            }
        }
        let failing = known > 0 && failures * 2 >= known;
        let name = if failing { "outage" } else { "healthy" };
        let start = self.bucket[0].t_ns;
        let same = self.phases.last().is_some_and(|p| p.name == name);
        if !same && (known > 0 || self.phases.is_empty()) {
            self.phases.push(Phase {
                name: name.into(),
                start_ns: start,
                last_ns: start,
                known: 0,
                failures: 0,
            });
        }
        let phase = (self.phases.len() - 1) as u32;
        for mut c in self.bucket.drain(..) {
            c.phase = phase;
            count(&mut self.phases, &c);
            self.ready.push_back(c);
        }
    }
}

fn count(phases: &mut [Phase], c: &Call) {
    let p = &mut phases[c.phase as usize];
    p.last_ns = c.t_ns;
    if c.outcome.is_known() {
        p.known += 1;
        p.failures += u64::from(c.outcome.is_failure());
    }
}

/// The fields of a line.
const FIELDS: [&str; 6] = [
    "t_ms",
    "latency_ms",
    "outcome",
    "status",
    "phase",
    "attempt",
];

fn expected_fields() -> String {
    FIELDS.map(|f| format!("`{f}`")).join(", ")
}

/// Milliseconds of `ns`, as written in traces.
pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Nanoseconds of a checked, non-negative, finite `ms`.
fn ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

/// The largest `t_ms` and `latency_ms` accepted: about 115 days, far inside `u64` nanoseconds.
const MAX_MS: f64 = 1e10;

fn check(
    raw: Raw<'_>,
    line: u64,
    labels: &mut HashMap<String, u32>,
    names: &mut Vec<String>,
) -> Result<Pending, String> {
    let time = |field: &str, v: f64| {
        if v.is_finite() && (0.0..=MAX_MS).contains(&v) {
            Ok(ns(v))
        } else {
            Err(format!(
                "`{field}` must be a number of milliseconds in 0..={MAX_MS}, got {v}"
            ))
        }
    };
    let t_ns = time("t_ms", raw.t_ms.0)?;
    let latency_ns = time("latency_ms", raw.latency_ms.0)?;
    let status = match raw.status.map(|s| s.0) {
        None => 0,
        Some(s @ 100..=599) => s,
        Some(s) => {
            return Err(format!(
                "`status` must be an HTTP status in 100..=599, got {s}"
            ))
        }
    };
    let by_status = (status != 0).then(|| {
        let code = http::StatusCode::from_u16(status).expect("100..=599 is a status code");
        match breaker_core::http::status_outcome(code) {
            Outcome::Success => CallOutcome::Success,
            Outcome::Failure => CallOutcome::Failure,
            Outcome::Ignored => CallOutcome::Ignored,
        }
    });
    let outcome = match (&raw.outcome, by_status) {
        (Some(name), _) => CallOutcome::from_name(name).ok_or_else(|| {
            format!(
                "unknown `outcome` `{name}`; expected one of {}",
                CallOutcome::ALL
                    .map(|o| format!("`{}`", o.as_str()))
                    .join(", ")
            )
        })?,
        (None, Some(o)) => o,
        (None, None) => {
            return Err("neither `outcome` nor `status` is given; one of them is required".into())
        }
    };
    let attempt = match raw.attempt.map(|a| a.0) {
        None => 1,
        Some(0) => return Err("`attempt` must be at least 1, got 0".into()),
        Some(a) => a,
    };
    let transient = match outcome {
        CallOutcome::Failure => {
            status == 0
                || breaker_core::http::status_is_transient(
                    http::StatusCode::from_u16(status).expect("checked"),
                )
        }
        CallOutcome::Timeout => true,
        _ => false,
    };
    let label = match raw.phase {
        None => u32::MAX,
        Some(name) => match labels.get(name.as_ref()) {
            Some(&id) => id,
            None => {
                let id = names.len() as u32;
                labels.insert(name.to_string(), id);
                names.push(name.into_owned());
                id
            }
        },
    };
    Ok(Pending {
        t_ns,
        line,
        latency_ns,
        outcome,
        status,
        attempt,
        transient,
        label,
    })
}

/// serde_json's message, with the column instead of "line 1" (the reader counts lines).
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    format!(
        "{text} (column {}); expected a trace line such as {EXAMPLE}",
        e.column()
    )
}

/// The csv crate's message for a bad cell, with the column's name, its number and the cell as
/// written: "`latency_ms` (column 2): invalid float literal `abc`".
fn csv_message(e: &csv::Error, headers: &csv::StringRecord, record: &csv::StringRecord) -> String {
    match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => match err.field() {
            Some(f) => {
                let i = usize::try_from(f).unwrap_or(usize::MAX);
                let name = headers.get(i).unwrap_or("?");
                let cell = record.get(i).unwrap_or("");
                format!("`{name}` (column {}): {} `{cell}`", f + 1, err.kind())
            }
            None => err.kind().to_string(),
        },
        _ => e.to_string(),
    }
}

const EXAMPLE: &str =
    r#"{"t_ms": 1520.0, "latency_ms": 38.5, "outcome": "failure", "status": 503}"#;

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}
