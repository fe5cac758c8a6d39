//! Synthetic traces from a short description and a seed, to try policies before there is
//! data.
//!
//! # The description
//! Phases separated by commas, each a kind, a length and options:
//!
//! ```text
//! healthy 30s, hang 20s timeout 2s, flapping 30s 20%, recovery 30s
//! ```
//!
//! | kind | the dependency |
//! |---|---|
//! | `healthy`, `recovery` | answers successes after about `latency` (and `N%` failures if given) |
//! | `hang` | never answers: each call is a `timeout` after `timeout` (default `2s`) |
//! | `down` | answers failures (status 503) after about `latency` (default `5ms`) |
//! | `flapping` | answers `N%` failures (default 20%, status 503), successes otherwise |
//! | `slow` | answers successes after about `latency` (default `1s`) |
//!
//! Options, in any order after the length: `N%` (share of failures), `latency D` (the typical
//! answer time: each call takes a uniform draw in `[D/2, 3D/2]`), `timeout D` (for `hang`),
//! `rate N/s` (calls per second, a Poisson process; default 50/s). Lengths and durations are
//! humantime strings without spaces (`500ms`, `30s`, `2m`). Every line is labelled with its
//! phase's kind, so replays report `detect_ms` and `recover_ms`.
//!
//! The same description and seed give the same trace, byte for byte.

use crate::trace::{Call, CallOutcome, Phase, TraceWriter};
use breaker_core::dsl::parse_duration;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::time::Duration;

/// The kind of a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Successes (and optional failures).
    Healthy,
    /// Like `Healthy`, named `recovery`.
    Recovery,
    /// No answer: timeouts.
    Hang,
    /// Fast failures.
    Down,
    /// A share of failures.
    Flapping,
    /// Slow successes.
    Slow,
}

impl Kind {
    const ALL: [(&'static str, Kind); 6] = [
        ("healthy", Kind::Healthy),
        ("recovery", Kind::Recovery),
        ("hang", Kind::Hang),
        ("down", Kind::Down),
        ("flapping", Kind::Flapping),
        ("slow", Kind::Slow),
    ];

    /// The kind's name, which labels its lines.
    pub fn as_str(self) -> &'static str {
        Kind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |(n, _)| n)
    }
}

/// One phase of a [`Scenario`].
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseSpec {
    /// What the dependency does.
    pub kind: Kind,
    /// How long the phase lasts.
    pub length: Duration,
    /// Share of failures, percent.
    pub failure_percent: f64,
    /// Typical answer time.
    pub latency: Duration,
    /// The caller's timeout, for `hang`.
    pub timeout: Duration,
    /// Calls per second.
    pub rate: f64,
}

/// A description of a trace: its phases. Parse one with [`str::parse`].
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The phases, in order.
    pub phases: Vec<PhaseSpec>,
}

/// A description that does not parse: the fragment and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid trace description at `{fragment}`: {message}")]
pub struct ScenarioError {
    /// The bad fragment.
    pub fragment: String,
    /// What was expected.
    pub message: String,
}

const DEFAULT_RATE: f64 = 50.0;

impl FromStr for Scenario {
    type Err = ScenarioError;

    fn from_str(s: &str) -> Result<Scenario, ScenarioError> {
        let err = |fragment: &str, message: String| ScenarioError {
            fragment: fragment.to_owned(),
            message,
        };
        let mut phases = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let mut words = part.split_whitespace();
            let Some(kind_word) = words.next() else {
                return Err(err(
                    part,
                    "an empty phase; expected `KIND LENGTH [options]`".into(),
                ));
            };
            let kind = Kind::ALL
                .iter()
                .find(|(n, _)| *n == kind_word)
                .map(|(_, k)| *k)
                .ok_or_else(|| {
                    err(
                        kind_word,
                        format!(
                            "unknown phase kind; expected one of {}",
                            Kind::ALL.map(|(n, _)| format!("`{n}`")).join(", ")
                        ),
                    )
                })?;
            let length_word = words
                .next()
                .ok_or_else(|| err(part, "the phase has no length; expected e.g. `30s`".into()))?;
            let duration = |w: &str| parse_duration(w).map_err(|e| err(w, e.to_string()));
            let length = duration(length_word)?;
            if length.is_zero() {
                return Err(err(length_word, "a phase must last longer than 0s".into()));
            }
            let mut spec = PhaseSpec {
                kind,
                length,
                failure_percent: match kind {
                    Kind::Flapping => 20.0,
                    Kind::Down | Kind::Hang => 100.0,
                    _ => 0.0,
                },
                latency: match kind {
                    Kind::Down => Duration::from_millis(5),
                    Kind::Slow => Duration::from_secs(1),
                    _ => Duration::from_millis(20),
                },
                timeout: Duration::from_secs(2),
                rate: DEFAULT_RATE,
            };
            while let Some(w) = words.next() {
                let mut value = |name: &str| {
                    words
                        .next()
                        .ok_or_else(|| err(w, format!("`{name}` needs a value")))
                };
                match w {
                    "latency" => spec.latency = duration(value("latency")?)?,
                    "timeout" => {
                        let v = value("timeout")?;
                        spec.timeout = duration(v)?;
                        if spec.timeout.is_zero() {
                            return Err(err(v, "a timeout must be longer than 0s".into()));
                        }
                    }
                    "rate" => {
                        let v = value("rate")?;
                        let n = v.strip_suffix("/s").unwrap_or(v);
                        spec.rate = n
                            .parse::<f64>()
                            .ok()
                            .filter(|r| r.is_finite() && *r > 0.0 && *r <= 1e6)
                            .ok_or_else(|| {
                                err(
                                    v,
                                    "expected calls per second in (0, 1000000], e.g. `50/s`".into(),
                                )
                            })?;
                    }
                    w if w.ends_with('%') => {
                        spec.failure_percent = w[..w.len() - 1]
                            .parse::<f64>()
                            .ok()
                            .filter(|p| (0.0..=100.0).contains(p))
                            .ok_or_else(|| err(w, "expected a percentage in 0..=100".into()))?;
                    }
                    other => {
                        return Err(err(
                            other,
                            "unknown option; expected `N%`, `latency D`, `timeout D` or `rate N/s`"
                                .into(),
                        ))
                    }
                }
            }
            phases.push(spec);
        }
        Ok(Scenario { phases })
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.phases.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(
                f,
                "{} {} {}% latency {} rate {}/s",
                p.kind.as_str(),
                breaker_core::dsl::format_duration(p.length),
                p.failure_percent,
                breaker_core::dsl::format_duration(p.latency),
                p.rate
            )?;
            if p.kind == Kind::Hang {
                write!(
                    f,
                    " timeout {}",
                    breaker_core::dsl::format_duration(p.timeout)
                )?;
            }
        }
        Ok(())
    }
}

/// The calls of a scenario, in arrival order, one at a time (memory independent of length).
pub struct Generator {
    phases: Vec<PhaseSpec>,
    starts: Vec<u64>,
    labels: Vec<Phase>,
    rng: SmallRng,
    phase: usize,
    t: f64,
}

impl Generator {
    /// A generator of `scenario`'s calls, seeded with `seed`.
    pub fn new(scenario: &Scenario, seed: u64) -> Generator {
        let mut starts = Vec::new();
        let mut at = 0u64;
        for p in &scenario.phases {
            starts.push(at);
            at += u64::try_from(p.length.as_nanos()).unwrap_or(u64::MAX / 4);
        }
        starts.push(at);
        let labels = scenario
            .phases
            .iter()
            .zip(&starts)
            .map(|(p, s)| Phase {
                name: p.kind.as_str().into(),
                start_ns: *s,
                last_ns: *s,
                known: 0,
                failures: 0,
            })
            .collect();
        Generator {
            phases: scenario.phases.clone(),
            starts,
            labels,
            rng: SmallRng::seed_from_u64(seed),
            phase: 0,
            t: 0.0,
        }
    }

    /// The phases, with their labels and start times (the counts are not kept).
    pub fn phases(&self) -> &[Phase] {
        &self.labels
    }
}

/// Rounds to whole microseconds, so traces read well.
fn micros(ns: f64) -> u64 {
    ((ns / 1e3).round() * 1e3) as u64
}

impl Iterator for Generator {
    type Item = Call;

    fn next(&mut self) -> Option<Call> {
        loop {
            let spec = self.phases.get(self.phase)?;
            let u: f64 = self.rng.gen();
            self.t += -(1.0 - u).ln() / spec.rate * 1e9;
            let end = self.starts[self.phase + 1] as f64;
            if self.t >= end {
                self.t = end;
                self.phase += 1;
                continue;
            }
            let fail = self.rng.gen::<f64>() * 100.0 < spec.failure_percent;
            let jitter: f64 = self.rng.gen();
            let latency = spec.latency.as_nanos() as f64 * (0.5 + jitter);
            let (outcome, latency, status) = match (spec.kind, fail) {
                (Kind::Hang, _) => (CallOutcome::Timeout, spec.timeout.as_nanos() as f64, 0),
                (_, true) => (CallOutcome::Failure, latency, 503),
                (_, false) => (CallOutcome::Success, latency, 0),
            };
            return Some(Call {
                t_ns: micros(self.t),
                latency_ns: micros(latency),
                outcome,
                status,
                attempt: 1,
                transient: outcome.is_failure(),
                phase: self.phase as u32,
            });
        }
    }
}

/// A whole generated trace in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The calls, in arrival order.
    pub calls: Vec<Call>,
    /// The phases.
    pub phases: Vec<Phase>,
}

/// Generates `scenario` with `seed`, in memory.
pub fn generate(scenario: &Scenario, seed: u64) -> Trace {
    let mut g = Generator::new(scenario, seed);
    let calls = g.by_ref().collect();
    Trace {
        calls,
        phases: g.labels,
    }
}

/// `trace` as JSON Lines text.
pub fn to_json_lines(trace: &Trace) -> String {
    let mut w = TraceWriter::json_lines(Vec::new());
    for c in &trace.calls {
        w.write(c, &trace.phases).expect("writing to memory");
    }
    String::from_utf8(w.finish().expect("writing to memory")).expect("JSON is UTF-8")
}

/// Writes `scenario`'s calls with `seed` to `out`, streamed, as JSON Lines or CSV; returns
/// how many.
///
/// # Errors
/// The writer's.
pub fn write(scenario: &Scenario, seed: u64, out: impl Write, csv: bool) -> io::Result<u64> {
    let mut g = Generator::new(scenario, seed);
    let phases = g.labels.clone();
    let mut w = if csv {
        TraceWriter::csv(out)?
    } else {
        TraceWriter::json_lines(out)
    };
    let mut n = 0;
    for c in g.by_ref() {
        w.write(&c, &phases)?;
        n += 1;
    }
    w.finish()?;
    Ok(n)
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("phases", &self.phases.len())
            .finish_non_exhaustive()
    }
}
