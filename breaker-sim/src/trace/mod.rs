//! The trace format: one call per line, JSON Lines or CSV.
//!
//! # Why
//! A trace is what a dependency did, call by call: when each call arrived, how long the
//! dependency took to answer and what it answered. Replaying it against a policy asks "what
//! would this breaker have done with these calls?", so the format keeps exactly what the
//! decision needs and nothing of the caller's own choices.
//!
//! # A line
//! ```text
//! {"t_ms": 1520.0, "latency_ms": 38.5, "outcome": "failure", "status": 503}
//! ```
//! | field | type | meaning |
//! |---|---|---|
//! | `t_ms` | number, `>= 0` | arrival of the call, milliseconds since the trace's start |
//! | `latency_ms` | number, `>= 0` | how long the call took, milliseconds (a `timeout`: when the caller gave up) |
//! | `outcome` | string | `success`, `failure`, `ignored`, `timeout`, `rejected` or `cancelled`; may be left out when `status` is given |
//! | `status` | integer `100..=599` | the HTTP status, where known; without `outcome` the standard HTTP classification decides (5xx, 408, 429: failure; other 4xx: ignored; else success) |
//! | `phase` | string | optional label of the trace's phase (`"healthy"`, `"hang"`); label every line or none |
//! | `attempt` | integer `>= 1` | optional, default 1: a line with `attempt > 1` is a retry the recording caller made, not a call of its own (see below) |
//!
//! `trace.schema.json` (printed by `breaker trace schema`) is the JSON Schema of a line. CSV
//! files have a header row with the same column names, in any order; an empty cell is an
//! absent value. Unknown fields, missing fields, values out of range and malformed lines are
//! errors that name the line; nothing is skipped.
//!
//! # What a line tells about the dependency
//! - `success`, `failure`, `ignored`: the dependency answered so after `latency_ms`.
//! - `timeout`: the dependency did not answer within `latency_ms` (the recording caller's
//!   timeout); replayed, it *hangs*: a policy's timeout ends it (a failure), and without any
//!   timeout it fails at `t_ms + latency_ms`, where the trace's knowledge ends.
//! - `rejected`: the recording caller's breaker refused the call, so the trace does not know
//!   what the dependency would have answered; replayed, a call admitted by the policy takes
//!   the dependency's behaviour at `t_ms` (see [`crate::replay`]: the known answer nearest
//!   `t_ms`, at or before it or at most a second after it).
//! - `cancelled`: the caller dropped the call after `latency_ms` without an answer; replayed,
//!   the dependency hangs and the caller drops the call at `t_ms + latency_ms` (a cancellation
//!   for the breaker, which records nothing), unless a policy's timeout ends it first.
//! - `attempt > 1`: not a call; its answer is the dependency's behaviour at its `t_ms`, which
//!   the replay's own retries read.
//!
//! Lines need not be sorted: a recorder writes a call when it ends, so lines come in the order
//! calls ended. The reader puts them back in arrival order within a window of
//! [`REORDER_WINDOW`] lines (memory stays independent of the trace's length); a line more out
//! of order than that is an error telling to sort the file.

mod read;
mod schema;
mod write;

pub use read::{Format, TraceReader, REORDER_WINDOW};
pub use schema::{json_schema, TraceLine};
pub use write::{write_csv_header, write_line, TraceWriter};

use std::fmt;
use std::path::PathBuf;

/// What a trace line says happened to a call. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallOutcome {
    /// The dependency answered and the caller's classifier called it a success.
    Success,
    /// The dependency answered with a failure (or the transport failed).
    Failure,
    /// The dependency answered with something neither success nor failure (a 404).
    Ignored,
    /// No answer within `latency_ms`: the dependency hung.
    Timeout,
    /// The recording caller's breaker refused the call: the dependency was not called.
    Rejected,
    /// The caller dropped the call after `latency_ms`, with no answer.
    Cancelled,
}

impl CallOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [CallOutcome; 6] = [
        CallOutcome::Success,
        CallOutcome::Failure,
        CallOutcome::Ignored,
        CallOutcome::Timeout,
        CallOutcome::Rejected,
        CallOutcome::Cancelled,
    ];

    /// The lowercase name used in traces.
    pub const fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Success => "success",
            CallOutcome::Failure => "failure",
            CallOutcome::Ignored => "ignored",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Cancelled => "cancelled",
        }
    }

    /// The outcome named `name` (as in a trace), if any.
    pub fn from_name(name: &str) -> Option<CallOutcome> {
        CallOutcome::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether the line tells what the dependency answered (or that it hung), so that other
    /// calls may take it as the dependency's behaviour at that time.
    pub const fn is_known(self) -> bool {
        matches!(
            self,
            CallOutcome::Success
                | CallOutcome::Failure
                | CallOutcome::Ignored
                | CallOutcome::Timeout
        )
    }

    /// Failure or timeout: what a breaker counts against the dependency.
    pub const fn is_failure(self) -> bool {
        matches!(self, CallOutcome::Failure | CallOutcome::Timeout)
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of a trace, as the replay reads it: times in whole nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// Arrival, nanoseconds since the trace's start.
    pub t_ns: u64,
    /// Duration, nanoseconds.
    pub latency_ns: u64,
    /// What happened.
    pub outcome: CallOutcome,
    /// The HTTP status, `0` when not known.
    pub status: u16,
    /// 1 for a call, `> 1` for a retry the recording caller made.
    pub attempt: u16,
    /// Whether a retry layer may try again after this answer: a failure (5xx, 408, 429 or no
    /// status) or a timeout; never a success, an ignored answer, a rejection.
    pub transient: bool,
    /// Index of the line's phase in [`TraceReader::phases`].
    pub phase: u32,
}

/// A phase of a trace: a run of lines with one label, or, in a trace without labels, a run
/// of one-second buckets that were all failing or all not (see [`TraceReader`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// The label (`"hang"`), or `"healthy"` / `"outage"` for a detected phase.
    pub name: String,
    /// When its first line arrived, nanoseconds.
    pub start_ns: u64,
    /// When its last line arrived, nanoseconds.
    pub last_ns: u64,
    /// Lines with a known answer ([`CallOutcome::is_known`]).
    pub known: u64,
    /// Of those, failures and timeouts.
    pub failures: u64,
}

impl Phase {
    /// An outage: at least half of the phase's known answers are failures or timeouts.
    pub fn is_outage(&self) -> bool {
        self.known > 0 && self.failures * 2 >= self.known
    }
}

/// A bad trace: where and what.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a valid trace line.
    #[error("{}:{line}: {message}", .path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1 (the header of a CSV file is line 1).
        line: u64,
        /// What is wrong and what was expected.
        message: String,
    },
}
