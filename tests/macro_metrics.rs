//! With the `metrics` feature, `#[circuit_breaker]` publishes its calls, rejections, transitions
//! and state under the function's `name`, with no wiring: exact values for a scripted sequence
//! on tokio's paused clock.
#![cfg(feature = "metrics")]

use breaker::circuit_breaker;
use breaker::Error;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
struct Down;

#[circuit_breaker(threshold = 2, cooldown = "10s", name = "quotes")]
async fn quote(ok: bool) -> Result<u32, Down> {
    if ok {
        Ok(42)
    } else {
        Err(Down)
    }
}

/// Every series with a non-zero value, as `name{label=value,..}` (labels sorted) -> value.
fn collect(recorder: &DebuggingRecorder) -> BTreeMap<String, f64> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
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
            (value != 0.0).then(|| (format!("{}{{{}}}", key.name(), labels.join(",")), value))
        })
        .collect()
}

#[test]
fn the_attribute_publishes_calls_rejections_transitions_and_state() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(quote(true).await.unwrap(), 42);
            assert!(matches!(quote(false).await, Err(Error::Inner(Down))));
            assert!(matches!(quote(false).await, Err(Error::Inner(Down))));
            assert!(matches!(quote(true).await, Err(Error::Rejected(_))));
        });
    });
    let got = collect(&recorder);
    let want: BTreeMap<String, f64> = [
        ("breaker_calls_total{breaker=quotes,outcome=failure}", 2.0),
        ("breaker_calls_total{breaker=quotes,outcome=success}", 1.0),
        ("breaker_rejections_total{breaker=quotes,reason=open}", 1.0),
        ("breaker_state{breaker=quotes,state=open}", 1.0),
        (
            "breaker_transitions_total{breaker=quotes,from=closed,reason=consecutive_failures,to=open}",
            1.0,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(got, want);
}
