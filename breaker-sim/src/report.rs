//! What a replay reports, per policy: a table row and a JSON object with stable field names.

use crate::trace::Phase;
use breaker_core::breaker::State;
use serde::Serialize;
use std::fmt::Write as _;

/// The counters of a replay in progress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub calls: u64,
    pub rejected: u64,
    pub reached: u64,
    pub failures_reached: u64,
    pub successes_rejected: u64,
    pub successes_refused: u64,
    pub opens: u64,
    pub half_opens: u64,
    pub closes: u64,
    pub time_open_ns: u64,
    pub first_open_ns: Option<u64>,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub hedges: u64,
    /// The answered calls' latencies: calls per bucket (see [`latency_bucket`]).
    pub latencies: Vec<u64>,
}

/// Latencies below this many microseconds (10 ms) have a bucket each.
const EXACT_US: u64 = 10_000;
/// Buckets per decade above [`EXACT_US`]: four significant digits, `1000..=9999`.
const PER_DECADE: usize = 9_000;

/// The histogram bucket of a latency of `us` microseconds: one per microsecond below 10 ms,
/// then four significant digits (`12_345` µs falls in the bucket of `12_340`), so a
/// percentile is exact for a latency written in round milliseconds and within 0.1 % of any
/// other, and the histogram holds 9,000 buckets per decade of latency, whatever the trace's
/// length. Recording is one division and an increment.
fn latency_bucket(us: u64) -> usize {
    if us < EXACT_US {
        return us as usize;
    }
    let e = us.ilog10() - 3;
    EXACT_US as usize + (e as usize - 1) * PER_DECADE + (us / 10u64.pow(e) - 1000) as usize
}

/// The least latency (microseconds) of bucket `i`.
fn bucket_floor(i: usize) -> u64 {
    if (i as u64) < EXACT_US {
        return i as u64;
    }
    let j = i - EXACT_US as usize;
    let e = (j / PER_DECADE + 1) as u32;
    (j % PER_DECADE + 1000) as u64 * 10u64.pow(e)
}

impl Counts {
    /// Counts an answered call that took `ns`.
    pub(crate) fn latency(&mut self, ns: u64) {
        let i = latency_bucket(ns / 1_000);
        if self.latencies.len() <= i {
            self.latencies.resize(i + 1, 0);
        }
        self.latencies[i] += 1;
    }

    /// The nearest-rank `per_mille`/1000 quantile of the answered calls' latencies, in
    /// milliseconds: the least latency that at least that share of them did not exceed (its
    /// bucket's floor).
    fn quantile_ms(&self, per_mille: u64) -> Option<f64> {
        let n: u64 = self.latencies.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = (n * per_mille).div_ceil(1000).max(1);
        let mut seen = 0;
        for (i, &count) in self.latencies.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_floor(i) as f64 / 1e3);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_10ms_then_four_significant_digits() {
        for (us, floor) in [
            (0, 0),
            (9_999, 9_999),
            (10_000, 10_000),
            (12_345, 12_340),
            (99_999, 99_990),
            (100_000, 100_000),
            (105_000, 105_000),
            (123_456_789, 123_400_000),
            (u64::MAX, 18_440_000_000_000_000_000),
        ] {
            assert_eq!(bucket_floor(latency_bucket(us)), floor, "{us}");
        }
        // Consecutive buckets, no gap at a decade.
        assert_eq!(latency_bucket(99_999) + 1, latency_bucket(100_000));
        assert_eq!(latency_bucket(9_999) + 1, latency_bucket(10_000));
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut c = Counts::default();
        assert_eq!(c.quantile_ms(990), None);
        for ms in [5, 5, 5, 300] {
            c.latency(ms * 1_000_000);
        }
        // 4 values: the median is the 2nd, the p99 the 4th.
        assert_eq!(
            (c.quantile_ms(500), c.quantile_ms(990)),
            (Some(5.0), Some(300.0))
        );
    }
}

/// What one policy did with a trace. The JSON form (`breaker simulate --json`, one object per
/// line and policy) has these field names, in this order; they are stable.
///
/// Times are milliseconds since the trace's start (`*_ms` fields that are durations are
/// milliseconds long); `null` where there is nothing to report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The policy's name in its config file, or the DSL string as given; for a sweep point
    /// the base's name followed by the swept values.
    pub policy: String,
    /// Logical calls: the trace's lines with `attempt` 1.
    pub calls: u64,
    /// Calls not rejected locally: `calls - rejected`.
    pub admitted: u64,
    /// Calls whose result was a local rejection (by the breaker, bulkhead, rate limit,
    /// adaptive limit or throttle).
    pub rejected: u64,
    /// Attempts that reached the dependency (retries included): with retry above `calls`.
    pub reached: u64,
    /// Of those, attempts that failed: a failure answer or a timeout (not an attempt dropped
    /// before its end: a hedge's loser, a cancelled call's).
    pub failures_reached: u64,
    /// Calls the breaker refused that would have succeeded (their line, or the dependency's
    /// behaviour at their arrival, is a success): the availability the breaker cost. Its
    /// share of `successes_refused`.
    pub successes_rejected: u64,
    /// Calls any local layer refused (breaker, bulkhead, rate limit, adaptive limit,
    /// throttle) that would have succeeded: the availability the whole policy cost, what a
    /// sweep ranks by. Equal to `successes_rejected` for a policy whose only refusing layer
    /// is its breaker.
    pub successes_refused: u64,
    /// Transitions to open.
    pub opens: u64,
    /// Transitions to half-open.
    pub half_opens: u64,
    /// Transitions to closed.
    pub closes: u64,
    /// Time spent open (until the lazy promotion to half-open by the first call after the
    /// cooldown, or the end of the trace).
    pub time_open_ms: f64,
    /// When the breaker first opened.
    pub first_open_ms: Option<f64>,
    /// From the start of the trace's first outage (the first phase in which at least half of
    /// the known answers are failures or timeouts, labelled or detected, and the outage phases
    /// right after it) to the breaker's first opening after that start.
    pub detect_ms: Option<f64>,
    /// From the end of that outage (the start of the first phase after it that is no outage)
    /// to the first instant from then on at which the breaker was closed (0 if it was closed
    /// then); `null` if it never closed again, or the trace ends in the outage.
    pub recover_ms: Option<f64>,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Calls that ended in an error from the dependency or a timeout (ignored answers
    /// included).
    pub failed: u64,
    /// Calls their caller dropped (`cancelled` lines).
    pub cancelled: u64,
    /// Hedges started (attempts a hedge layer sent beyond each attempt's first, whether or
    /// not a layer inside hedge then refused them).
    pub hedges: u64,
    /// The median latency of the calls that succeeded or failed (not those rejected locally
    /// nor those cancelled), from arrival to result, retries and backoff included: the
    /// nearest-rank percentile, to the microsecond below 10 ms and to four significant
    /// digits above (rounded down); `null` when no call was answered.
    pub p50_ms: Option<f64>,
    /// The 99th percentile of the same latencies (nearest rank): the least latency that at
    /// least 99% of those calls did not exceed.
    pub p99_ms: Option<f64>,
    /// For a sweep point: the swept keys and their values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<(String, String)>,
    /// For a sweep point: its rank, from 1 (see [`crate::sweep`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// For a sweep point: whether it is on the Pareto front of `failures_reached` against
    /// `successes_refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pareto: Option<bool>,
    /// The timeline, when asked for (not part of the JSON).
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

impl Report {
    pub(crate) fn new(
        policy: String,
        params: Vec<(String, String)>,
        c: Counts,
        detect_ms: Option<f64>,
        recover_ms: Option<f64>,
        timeline: Option<Timeline>,
    ) -> Report {
        Report {
            policy,
            calls: c.calls,
            admitted: c.calls - c.rejected,
            rejected: c.rejected,
            reached: c.reached,
            failures_reached: c.failures_reached,
            successes_rejected: c.successes_rejected,
            successes_refused: c.successes_refused,
            opens: c.opens,
            half_opens: c.half_opens,
            closes: c.closes,
            time_open_ms: ms(c.time_open_ns),
            first_open_ms: c.first_open_ns.map(ms),
            detect_ms,
            recover_ms,
            succeeded: c.succeeded,
            failed: c.failed,
            cancelled: c.cancelled,
            hedges: c.hedges,
            p50_ms: c.quantile_ms(500),
            p99_ms: c.quantile_ms(990),
            params,
            rank: None,
            pareto: None,
            timeline,
        }
    }

    /// The report as one line of JSON (no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report serializes")
    }
}

/// Milliseconds of `ns`.
pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Milliseconds for a table: `1520.0` as `1520`, `12.25` as `12.2` (one decimal).
fn cell_ms(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

/// The columns of the table, in order.
const COLUMNS: [&str; 18] = [
    "policy",
    "calls",
    "admitted",
    "rejected",
    "reached",
    "failures_reached",
    "successes_rejected",
    "successes_refused",
    "opens",
    "half_opens",
    "closes",
    "time_open_ms",
    "first_open_ms",
    "detect_ms",
    "recover_ms",
    "hedges",
    "p50_ms",
    "p99_ms",
];

/// The reports as a text table, one row per report, with the JSON field names as headers; a
/// sweep adds `rank` first and marks the Pareto front with `*`.
pub fn table(reports: &[Report]) -> String {
    let sweep = reports.iter().any(|r| r.rank.is_some());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header: Vec<String> = COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    if sweep {
        header.insert(0, "rank".into());
    }
    rows.push(header);
    for r in reports {
        let mut row = vec![
            r.policy.clone(),
            r.calls.to_string(),
            r.admitted.to_string(),
            r.rejected.to_string(),
            r.reached.to_string(),
            r.failures_reached.to_string(),
            r.successes_rejected.to_string(),
            r.successes_refused.to_string(),
            r.opens.to_string(),
            r.half_opens.to_string(),
            r.closes.to_string(),
            cell_ms(Some(r.time_open_ms)),
            cell_ms(r.first_open_ms),
            cell_ms(r.detect_ms),
            cell_ms(r.recover_ms),
            r.hedges.to_string(),
            cell_ms(r.p50_ms),
            cell_ms(r.p99_ms),
        ];
        if sweep {
            let mark = if r.pareto == Some(true) { "*" } else { "" };
            row.insert(0, format!("{}{mark}", r.rank.unwrap_or(0)));
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let name_col = usize::from(sweep);
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i] - cell.chars().count();
            if i == name_col {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// How many time buckets a timeline keeps at most: when calls arrive past the last, the
/// buckets are merged in pairs and their length doubles, so memory stays bounded.
pub const MAX_BUCKETS: usize = 240;
const FIRST_BUCKET_NS: u64 = 100_000_000;

/// A policy's timeline, for a plot: its transitions and its calls per time bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// Bucket length, nanoseconds (100 ms, doubled as needed).
    pub bucket_ns: u64,
    /// Per bucket, by arrival: calls that succeeded, failed, were rejected, were cancelled.
    pub buckets: Vec<[u32; 4]>,
    /// `(when, state entered)`, in order, starting closed at 0; the last entry repeats the
    /// state at the end of the replay.
    pub transitions: Vec<(u64, State)>,
    /// When the replay ended (its last event), nanoseconds.
    pub end_ns: u64,
    /// The trace's phases.
    pub phases: Vec<Phase>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            bucket_ns: FIRST_BUCKET_NS,
            buckets: Vec::new(),
            transitions: vec![(0, State::Closed)],
            end_ns: 0,
            phases: Vec::new(),
        }
    }
}

impl Timeline {
    /// Makes room for a call arriving at `t`.
    pub(crate) fn reserve(&mut self, t: u64) {
        while (t / self.bucket_ns) as usize >= MAX_BUCKETS {
            let merged = self
                .buckets
                .chunks(2)
                .map(|pair| {
                    let mut sum = pair[0];
                    if let Some(b) = pair.get(1) {
                        for k in 0..4 {
                            sum[k] += b[k];
                        }
                    }
                    sum
                })
                .collect();
            self.buckets = merged;
            self.bucket_ns *= 2;
        }
        let i = (t / self.bucket_ns) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, [0; 4]);
        }
    }

    /// Counts a call that arrived at `arrival` and ended as `kind` (0 succeeded, 1 failed,
    /// 2 rejected, 3 cancelled).
    pub(crate) fn add(&mut self, arrival: u64, kind: usize) {
        let i = (arrival / self.bucket_ns) as usize;
        if let Some(b) = self.buckets.get_mut(i) {
            b[kind] += 1;
        }
    }
}
