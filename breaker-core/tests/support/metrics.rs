//! Reading a `metrics_util` debugging recorder back as a map, for exact-value assertions. Shared
//! by the metric tests of `breaker-core` and of the facade (included there by path).

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::BTreeMap;

/// Every series as `name{label=value,..}` (labels sorted) -> value, zeros included (a counter
/// registered but never incremented reads 0).
pub fn collect(recorder: &DebuggingRecorder) -> BTreeMap<String, f64> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(_) => unreachable!("no histograms"),
            };
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

/// [`collect`] without the series that read 0.
#[allow(dead_code)] // not every test file needs it
pub fn nonzero(recorder: &DebuggingRecorder) -> BTreeMap<String, f64> {
    let mut all = collect(recorder);
    all.retain(|_, v| *v != 0.0);
    all
}

/// `pairs` as the map [`collect`] returns.
pub fn expected(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}
