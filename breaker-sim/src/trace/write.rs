//! Writing traces.

use super::{Call, CallOutcome, Phase};
use std::io::{self, Write};

/// Writes one JSON Lines trace line (with its newline). Times are milliseconds, written in
/// the shortest form that reads back to the same nanosecond; `status` 0 and `attempt` 1 are
/// left out.
///
/// # Errors
/// The writer's.
pub fn write_line(
    out: &mut impl Write,
    t_ns: u64,
    latency_ns: u64,
    outcome: CallOutcome,
    status: u16,
    phase: Option<&str>,
    attempt: u16,
) -> io::Result<()> {
    write!(
        out,
        "{{\"t_ms\":{},\"latency_ms\":{},\"outcome\":\"{}\"",
        ns_ms(t_ns),
        ns_ms(latency_ns),
        outcome.as_str()
    )?;
    if status != 0 {
        write!(out, ",\"status\":{status}")?;
    }
    if let Some(p) = phase {
        write!(
            out,
            ",\"phase\":{}",
            serde_json::to_string(p).expect("a string serializes")
        )?;
    }
    if attempt > 1 {
        write!(out, ",\"attempt\":{attempt}")?;
    }
    out.write_all(b"}\n")
}

/// Writes the header row of a CSV trace.
///
/// # Errors
/// The writer's.
pub fn write_csv_header(out: &mut impl Write) -> io::Result<()> {
    out.write_all(b"t_ms,latency_ms,outcome,status,phase,attempt\n")
}

/// `ns` as milliseconds, shortest form.
fn ns_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Writes [`Call`]s as JSON Lines or CSV, with their phases' labels.
pub struct TraceWriter<W: Write> {
    out: W,
    csv: bool,
}

impl<W: Write> TraceWriter<W> {
    /// A JSON Lines writer.
    pub fn json_lines(out: W) -> Self {
        TraceWriter { out, csv: false }
    }

    /// A CSV writer; writes the header row.
    ///
    /// # Errors
    /// The writer's.
    pub fn csv(mut out: W) -> io::Result<Self> {
        write_csv_header(&mut out)?;
        Ok(TraceWriter { out, csv: true })
    }

    /// Writes `call`, labelled with its phase's name from `phases` (none if `phases` is
    /// empty).
    ///
    /// # Errors
    /// The writer's.
    pub fn write(&mut self, call: &Call, phases: &[Phase]) -> io::Result<()> {
        let phase = phases.get(call.phase as usize).map(|p| p.name.as_str());
        if !self.csv {
            return write_line(
                &mut self.out,
                call.t_ns,
                call.latency_ns,
                call.outcome,
                call.status,
                phase,
                call.attempt,
            );
        }
        let status = if call.status == 0 {
            String::new()
        } else {
            call.status.to_string()
        };
        let phase = phase.map_or(String::new(), |p| {
            if p.contains([',', '"', '\n']) {
                format!("\"{}\"", p.replace('"', "\"\""))
            } else {
                p.to_owned()
            }
        });
        let attempt = if call.attempt > 1 {
            call.attempt.to_string()
        } else {
            String::new()
        };
        writeln!(
            self.out,
            "{},{},{},{status},{phase},{attempt}",
            ns_ms(call.t_ns),
            ns_ms(call.latency_ns),
            call.outcome.as_str()
        )
    }

    /// Flushes and returns the writer.
    ///
    /// # Errors
    /// The writer's.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: std::io::Write> std::fmt::Debug for TraceWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter").finish_non_exhaustive()
    }
}
