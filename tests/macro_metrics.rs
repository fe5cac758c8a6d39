//! With the `metrics` feature, `#[circuit_breaker]` publishes its calls, rejections, transitions
//! and state under the function's `name`, with no wiring: exact values for a scripted sequence
//! on tokio's paused clock.
#![cfg(feature = "metrics")]

use breaker::circuit_breaker;
use breaker::Error;
use metrics_util::debugging::DebuggingRecorder;

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

#[path = "../breaker-core/tests/support/metrics.rs"]
mod support;
use support::{expected, nonzero};

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
    let got = nonzero(&recorder);
    let want = expected(&[
        ("breaker_calls_total{breaker=quotes,outcome=failure}", 2.0),
        ("breaker_calls_total{breaker=quotes,outcome=success}", 1.0),
        ("breaker_rejections_total{breaker=quotes,reason=open}", 1.0),
        ("breaker_state{breaker=quotes,state=open}", 1.0),
        (
            "breaker_transitions_total{breaker=quotes,from=closed,reason=consecutive_failures,to=open}",
            1.0,
        ),
    ]);
    assert_eq!(got, want);
}
