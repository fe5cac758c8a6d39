//! Recording calls for replay: one JSON Lines line per call, for `breaker simulate`.
//!
//! # Why
//! Choosing a breaker's thresholds by guessing ends in a breaker that trips on a blip or one
//! that opens after the callers have piled up. A [`Recorder`] writes what each call did (when
//! it arrived, how long it took, how it ended) so the `breaker` tool can replay the very same
//! calls against other policies and show what each would have done.
//!
//! # Cost
//! Off by default. When on, a call costs two clock reads and **one bounded, non-blocking
//! hand-off** of a small fixed-size record into a channel whose buffer is allocated once
//! ([`std::sync::mpsc::sync_channel`]): nothing is allocated per call and the caller never
//! waits. When the buffer is full the record is dropped and counted ([`Recorder::dropped`]).
//! One writer thread per recorder formats the lines and writes them through a buffer,
//! flushing whenever it has caught up. A thread rather than an async task: file writes block,
//! and must not block an async runtime's workers.
//!
//! # The lines
//! `{"t_ms":1520.125,"latency_ms":38.5,"outcome":"failure","status":503}`, the trace format of
//! `breaker simulate` (its JSON Schema: `breaker trace schema`): `t_ms` is the call's start
//! since the recorder was created, `latency_ms` its duration, `outcome` one of [`Recorded`],
//! `status` the HTTP status where known, `phase` the label set by [`Recorder::phase`] at the
//! call's start (if any), `attempt` the attempt's number when above 1. Lines are written in
//! the order calls *end*; the replay puts them back in arrival order.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::record::{Recorded, Recorder};
//!
//! let (recorder, lines) = Recorder::to_memory();
//! let start = recorder.start();
//! // ... the call ...
//! recorder.record(start, Recorded::Success, Some(200));
//! recorder.flush().unwrap();
//! assert!(lines.text().starts_with("{\"t_ms\":"));
//! ```

use crate::clock::Clock;
use crate::sync::{AtomicU64, Ordering};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How a recorded call (or attempt) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recorded {
    /// The dependency answered with a success.
    Success,
    /// The dependency answered with a failure, or the transport failed.
    Failure,
    /// An answer that is neither (classified as ignored, such as a 404).
    Ignored,
    /// No answer before the pipeline's limit (its timeout or deadline).
    Timeout,
    /// Refused locally (an open breaker, a full bulkhead): the dependency was not called.
    Rejected,
    /// The caller dropped the call before it ended.
    Cancelled,
}

impl Recorded {
    /// The name written in traces.
    pub const fn as_str(self) -> &'static str {
        match self {
            Recorded::Success => "success",
            Recorded::Failure => "failure",
            Recorded::Ignored => "ignored",
            Recorded::Timeout => "timeout",
            Recorded::Rejected => "rejected",
            Recorded::Cancelled => "cancelled",
        }
    }
}

impl From<crate::classify::Outcome> for Recorded {
    fn from(o: crate::classify::Outcome) -> Recorded {
        match o {
            crate::classify::Outcome::Success => Recorded::Success,
            crate::classify::Outcome::Failure => Recorded::Failure,
            crate::classify::Outcome::Ignored => Recorded::Ignored,
        }
    }
}

/// One recorded call: fixed size, so handing it over allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Start, nanoseconds since the recorder was created.
    pub t_ns: u64,
    /// Duration, nanoseconds.
    pub latency_ns: u64,
    /// How it ended.
    pub outcome: Recorded,
    /// The HTTP status, 0 when not known.
    pub status: u16,
    /// The attempt's number, from 1.
    pub attempt: u16,
}

enum Msg {
    Call(Entry),
    /// Calls starting at or after `.0` are labelled `.1`.
    Phase(u64, Box<str>),
    /// Write and flush everything received so far, then answer.
    Flush(SyncSender<io::Result<(u64, u64)>>),
}

/// A function that receives each entry on the recording thread ([`RecorderBuilder::to_sink`]).
type Sink = Box<dyn Fn(&Entry) + Send + Sync>;

struct Shared {
    tx: Option<SyncSender<Msg>>,
    /// Receives every entry on the caller's thread (a [`RecorderBuilder::to_sink`] recorder,
    /// which has no writer).
    sink: Option<Sink>,
    /// A [`Recorder::tee`]: the two recorders every entry goes to, in order.
    next: Option<Box<[Recorder; 2]>>,
    clock: Clock,
    origin: u64,
    dropped: Arc<AtomicU64>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Closing the channel ends the writer after it has written everything.
        drop(self.tx.take());
        let handle = self
            .writer
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// Writes one line per recorded call to a file (or any writer), off the caller's thread.
/// Cloning is cheap; clones share the writer. See the [module docs](self).
///
/// The writer thread ends, after writing every line handed to it, when the last clone is
/// dropped (which waits for it).
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

/// The default number of calls the hand-off buffer holds.
pub const DEFAULT_CAPACITY: usize = 8192;

/// Builds a [`Recorder`].
#[must_use = "a builder does nothing until `to_file` or `to_writer` is called"]
pub struct RecorderBuilder {
    capacity: usize,
    clock: Option<Clock>,
}

impl RecorderBuilder {
    /// How many calls the hand-off buffer holds before it drops them (default
    /// [`DEFAULT_CAPACITY`]; at least 1). 40 bytes each, allocated once.
    pub fn capacity(mut self, calls: usize) -> Self {
        self.capacity = calls.max(1);
        self
    }

    /// The clock of `t_ms` and `latency_ms` (default [`Clock::system`]; [`Clock::tokio`] on
    /// a paused test runtime).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// A recorder writing to `path` (created or truncated).
    ///
    /// # Errors
    /// If the file cannot be created.
    pub fn to_file(self, path: impl AsRef<Path>) -> io::Result<Recorder> {
        let file = std::fs::File::create(path)?;
        Ok(self.to_writer(file))
    }

    /// A recorder writing into memory (for tests), and the lines it writes.
    ///
    /// # Panics
    /// As [`to_writer`](Self::to_writer).
    pub fn to_memory(self) -> (Recorder, Lines) {
        let lines = Lines::default();
        (self.to_writer(lines.clone()), lines)
    }

    /// A recorder writing to `out` on its own thread.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    pub fn to_writer(self, out: impl Write + Send + 'static) -> Recorder {
        let (tx, rx) = mpsc::sync_channel(self.capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&dropped);
        let writer = std::thread::Builder::new()
            .name("breaker-recorder".into())
            .spawn(move || write_lines(rx, BufWriter::new(out), &counted))
            .expect("the recorder's writer thread starts");
        let clock = self.clock.unwrap_or_default();
        Recorder {
            shared: Arc::new(Shared {
                tx: Some(tx),
                sink: None,
                next: None,
                origin: clock.now_nanos(),
                clock,
                dropped,
                writer: Mutex::new(Some(writer)),
            }),
        }
    }

    /// A recorder that hands each entry to `sink` on the thread that records it, with no
    /// buffer and no writer thread: for a consumer that keeps counts in memory (a latency
    /// histogram of atomics, say) rather than writing lines. `sink` runs inside the call's
    /// path, so it must be short and never block or wait; [`phase`](Recorder::phase) labels
    /// nothing and [`flush`](Recorder::flush) has nothing to write. The capacity is unused.
    ///
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::record::{Recorded, Recorder};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let failures = Arc::new(AtomicU64::new(0));
    /// let counted = Arc::clone(&failures);
    /// let recorder = Recorder::builder().to_sink(move |e| {
    ///     if e.outcome == Recorded::Failure {
    ///         counted.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// });
    /// recorder.record(recorder.start(), Recorded::Failure, Some(503));
    /// assert_eq!(failures.load(Ordering::Relaxed), 1);
    /// ```
    pub fn to_sink(self, sink: impl Fn(&Entry) + Send + Sync + 'static) -> Recorder {
        let clock = self.clock.unwrap_or_default();
        Recorder {
            shared: Arc::new(Shared {
                tx: None,
                sink: Some(Box::new(sink)),
                next: None,
                origin: clock.now_nanos(),
                clock,
                dropped: Arc::new(AtomicU64::new(0)),
                writer: Mutex::new(None),
            }),
        }
    }
}

/// A shared in-memory sink of a [`Recorder::to_memory`] recorder.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Recorder {
    /// Starts building a recorder.
    pub fn builder() -> RecorderBuilder {
        RecorderBuilder {
            capacity: DEFAULT_CAPACITY,
            clock: None,
        }
    }

    /// A recorder writing JSON Lines to `path`, with the defaults.
    ///
    /// # Errors
    /// If the file cannot be created.
    pub fn to_file(path: impl AsRef<Path>) -> io::Result<Recorder> {
        Recorder::builder().to_file(path)
    }

    /// A recorder writing into memory (for tests), and the lines it writes.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    pub fn to_memory() -> (Recorder, Lines) {
        Recorder::builder().to_memory()
    }

    /// The recorder's clock now, nanoseconds since it was created: a call's start.
    #[inline]
    pub fn start(&self) -> u64 {
        self.shared
            .clock
            .now_nanos()
            .saturating_sub(self.shared.origin)
    }

    /// Records a call that started at `start` (from [`start`](Self::start)) and ends now.
    #[inline]
    pub fn record(&self, start: u64, outcome: Recorded, status: Option<u16>) {
        self.record_attempt(start, outcome, status, 1);
    }

    /// Records attempt number `attempt` (from 1) of a call: an attempt above 1 is a retry,
    /// which a replay reads as the dependency's behaviour at its start, not as a call.
    #[inline]
    pub fn record_attempt(&self, start: u64, outcome: Recorded, status: Option<u16>, attempt: u16) {
        let end = self.start();
        self.record_entry(Entry {
            t_ns: start,
            latency_ns: end.saturating_sub(start),
            outcome,
            status: status.unwrap_or(0),
            attempt: attempt.max(1),
        });
    }

    /// Hands `entry` to the writer (drops and counts it if the buffer is full), to the sink,
    /// or to both recorders of a [`tee`](Self::tee). Never blocks.
    #[inline]
    pub fn record_entry(&self, entry: Entry) {
        if let Some(tx) = &self.shared.tx {
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                tx.try_send(Msg::Call(entry))
            {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(sink) = &self.shared.sink {
            sink(&entry);
        }
        if let Some(next) = &self.shared.next {
            for r in next.iter() {
                r.record_entry(entry);
            }
        }
    }

    /// A recorder that hands every entry to `self`, then to `other`, with `self`'s clock and
    /// start (`t_ns`): put first the recorder whose start times matter, such as a trace file,
    /// and after it one that reads only latencies and outcomes. [`phase`](Self::phase),
    /// [`flush`](Self::flush) and [`dropped`](Self::dropped) are `self`'s.
    ///
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::record::{Recorded, Recorder};
    /// let (file, lines) = Recorder::to_memory();
    /// let (other, more) = Recorder::to_memory();
    /// let both = file.tee(other.clone());
    /// both.record(both.start(), Recorded::Success, None);
    /// both.flush().unwrap();
    /// other.flush().unwrap();
    /// assert_eq!(lines.text().lines().count(), 1);
    /// assert_eq!(more.text().lines().count(), 1);
    /// ```
    pub fn tee(self, other: Recorder) -> Recorder {
        Recorder {
            shared: Arc::new(Shared {
                tx: None,
                sink: None,
                origin: self.shared.origin,
                clock: self.shared.clock.clone(),
                dropped: Arc::new(AtomicU64::new(0)),
                writer: Mutex::new(None),
                next: Some(Box::new([self, other])),
            }),
        }
    }

    /// The recorder a [`tee`](Self::tee) put first, whose phases, flush and drops it reports.
    fn first(&self) -> Option<&Recorder> {
        self.shared.next.as_ref().map(|n| &n[0])
    }

    /// Labels the calls that start from now on with `name` (the trace's phases, which a replay
    /// reports `detect_ms` and `recover_ms` against). Waits for room in the buffer. A trace
    /// labels every line or none, so name the first phase before the first call.
    pub fn phase(&self, name: &str) {
        if let Some(tx) = &self.shared.tx {
            let _ = tx.send(Msg::Phase(self.start(), name.into()));
        } else if let Some(first) = self.first() {
            first.phase(name);
        }
    }

    /// Calls dropped so far because the buffer was full.
    pub fn dropped(&self) -> u64 {
        match self.first() {
            Some(first) => first.dropped(),
            None => self.shared.dropped.load(Ordering::Relaxed),
        }
    }

    /// Waits until everything recorded before this call is written and flushed; returns the
    /// lines written and the calls dropped so far.
    ///
    /// # Errors
    /// The first write error of the writer (after one, it writes nothing more).
    pub fn flush(&self) -> io::Result<(u64, u64)> {
        let Some(tx) = self.shared.tx.as_ref() else {
            return match self.first() {
                Some(first) => first.flush(),
                // A sink: nothing is buffered.
                None => Ok((0, self.dropped())),
            };
        };
        let (ack, done) = mpsc::sync_channel(1);
        tx.send(Msg::Flush(ack))
            .map_err(|_| io::Error::other("the recorder's writer has stopped"))?;
        done.recv()
            .map_err(|_| io::Error::other("the recorder's writer has stopped"))?
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("clock", &self.shared.clock)
            .field("dropped", &self.dropped())
            .finish()
    }
}

/// The writer thread.
fn write_lines(rx: Receiver<Msg>, mut out: impl Write, dropped: &AtomicU64) {
    let mut phases: Vec<(u64, Box<str>)> = Vec::new();
    let mut line = String::with_capacity(160);
    let mut written = 0u64;
    let mut failed: Option<io::Error> = None;
    let mut pending = false;
    loop {
        let msg = match rx.try_recv() {
            Ok(m) => m,
            Err(mpsc::TryRecvError::Empty) => {
                if pending && failed.is_none() {
                    if let Err(e) = out.flush() {
                        failed = Some(e);
                    }
                    pending = false;
                }
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        match msg {
            Msg::Call(e) => {
                if failed.is_some() {
                    continue;
                }
                // The label in force at the call's start.
                let i = phases.partition_point(|(t, _)| *t <= e.t_ns);
                let phase = i.checked_sub(1).map(|i| &*phases[i].1);
                line.clear();
                format_line(&mut line, &e, phase);
                match out.write_all(line.as_bytes()) {
                    Ok(()) => written += 1,
                    Err(e) => failed = Some(e),
                }
                pending = true;
            }
            Msg::Phase(at, name) => {
                let i = phases.partition_point(|(t, _)| *t <= at);
                phases.insert(i, (at, name));
            }
            Msg::Flush(ack) => {
                let result = match &failed {
                    Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
                    None => out
                        .flush()
                        .map(|()| (written, dropped.load(Ordering::Relaxed))),
                };
                pending = false;
                let _ = ack.send(result);
            }
        }
    }
    let _ = out.flush();
}

/// One trace line, with its newline.
pub(crate) fn format_line(out: &mut String, e: &Entry, phase: Option<&str>) {
    let ms = |ns: u64| ns as f64 / 1e6;
    let _ = write!(
        out,
        "{{\"t_ms\":{},\"latency_ms\":{},\"outcome\":\"{}\"",
        ms(e.t_ns),
        ms(e.latency_ns),
        e.outcome.as_str()
    );
    if e.status != 0 {
        let _ = write!(out, ",\"status\":{}", e.status);
    }
    if let Some(p) = phase {
        out.push_str(",\"phase\":\"");
        for c in p.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if u32::from(c) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if e.attempt > 1 {
        let _ = write!(out, ",\"attempt\":{}", e.attempt);
    }
    out.push_str("}\n");
}

impl std::fmt::Debug for RecorderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecorderBuilder")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.0.lock().map_or(0, |b| b.len());
        f.debug_struct("Lines").field("bytes", &len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    #[test]
    fn lines_have_the_trace_format() {
        let time = ManualClock::new();
        let lines = Lines::default();
        let recorder = Recorder::builder()
            .clock(Clock::manual(&time))
            .to_writer(lines.clone());
        time.advance(Duration::from_micros(1_520_125));
        let a = recorder.start();
        time.advance(Duration::from_micros(38_500));
        recorder.record(a, Recorded::Failure, Some(503));
        recorder.phase("hang \"2\"");
        let b = recorder.start();
        time.advance(Duration::from_secs(2));
        recorder.record_attempt(b, Recorded::Timeout, None, 2);
        // A call that started before the phase began and ended after: the earlier label.
        recorder.record(a, Recorded::Cancelled, None);
        assert_eq!(recorder.flush().unwrap(), (3, 0));
        assert_eq!(
            lines.text(),
            "{\"t_ms\":1520.125,\"latency_ms\":38.5,\"outcome\":\"failure\",\"status\":503}\n\
             {\"t_ms\":1558.625,\"latency_ms\":2000,\"outcome\":\"timeout\",\"phase\":\"hang \\\"2\\\"\",\"attempt\":2}\n\
             {\"t_ms\":1520.125,\"latency_ms\":2038.5,\"outcome\":\"cancelled\"}\n"
        );
    }

    /// A writer that blocks until released, so the hand-off buffer fills.
    struct Stuck {
        entered: SyncSender<()>,
        release: Receiver<()>,
        out: Lines,
    }

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.entered.try_send(());
            let _ = self.release.recv();
            self.out.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_buffer_drops_and_counts_instead_of_blocking() {
        let (entered, in_write) = mpsc::sync_channel(8);
        let (release, released) = mpsc::channel();
        let lines = Lines::default();
        // The writer thread buffers lines and writes them out when it has caught up, so it
        // gets stuck in `Stuck::write` at its first flush.
        let recorder = Recorder::builder().capacity(2).to_writer(Stuck {
            entered,
            release: released,
            out: lines.clone(),
        });
        let entry = |t| Entry {
            t_ns: t,
            latency_ns: 1,
            outcome: Recorded::Success,
            status: 0,
            attempt: 1,
        };
        // The writer takes call 0 and blocks in its flush (the buffer is empty after it).
        recorder.record_entry(entry(0));
        in_write.recv().unwrap();
        // Two more fill the buffer; the next three are dropped at once.
        for t in 1..6 {
            recorder.record_entry(entry(t));
        }
        assert_eq!(recorder.dropped(), 3);
        for _ in 0..16 {
            release.send(()).unwrap();
        }
        assert_eq!(recorder.flush().unwrap(), (3, 3));
        let text = lines.text();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("\"t_ms\":0.000002,"), "{text}");
    }

    #[test]
    fn dropping_the_last_clone_writes_everything() {
        let (recorder, lines) = Recorder::to_memory();
        let other = recorder.clone();
        for _ in 0..100 {
            let s = other.start();
            other.record(s, Recorded::Success, None);
        }
        drop(other);
        drop(recorder);
        assert_eq!(lines.text().lines().count(), 100);
    }
}
