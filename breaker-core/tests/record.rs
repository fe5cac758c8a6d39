//! Recording the calls of a pipeline and of a tower `PolicyLayer` for replay: one line per
//! attempt, with its start, duration and how it ended.
#![cfg(feature = "tokio")]

use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::record::Recorder;
use std::time::Duration;

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pipeline_records_every_attempt_and_how_it_ended() {
    let (recorder, out) = Recorder::builder().clock(Clock::tokio()).to_memory();
    let pipeline = Pipeline::builder()
        .breaker_policy("3 consecutive, open 10s".parse().unwrap())
        .clock(Clock::tokio())
        .retry("2x fixed 5ms".parse().unwrap())
        .idempotent(true)
        .timeout(Duration::from_millis(100))
        .recorder(recorder.clone())
        .build()
        .unwrap();
    // A success after 20 ms.
    let ok: Result<(), breaker_core::Error<&str>> = pipeline
        .call(|| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        })
        .await;
    assert!(ok.is_ok());
    // A failure at once, retried after 5 ms: a hang cut by the timeout. The breaker has now
    // seen 2 failures.
    let mut attempt = 0;
    let failed = pipeline
        .call(|| {
            attempt += 1;
            let first = attempt == 1;
            async move {
                if first {
                    Err("503")
                } else {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(())
                }
            }
        })
        .await;
    assert!(matches!(failed, Err(breaker_core::Error::GaveUp { .. })));
    // A third failure trips it; its retry is rejected.
    let tripped = pipeline.call(|| async { Err::<(), _>("503") }).await;
    assert!(matches!(tripped, Err(breaker_core::Error::Rejected(_))));
    // A call dropped by its caller after 30 ms... is rejected at once now; make a pipeline
    // without a breaker for it.
    let plain = Pipeline::builder()
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(30),
        plain.call(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<(), &str>(())
        }),
    )
    .await;
    assert!(dropped.is_err());
    assert_eq!(recorder.flush().unwrap(), (6, 0));
    assert_eq!(
        lines(&out.text()),
        [
            r#"{"t_ms":0,"latency_ms":20,"outcome":"success"}"#,
            r#"{"t_ms":20,"latency_ms":0,"outcome":"failure"}"#,
            r#"{"t_ms":25,"latency_ms":100,"outcome":"timeout","attempt":2}"#,
            r#"{"t_ms":125,"latency_ms":0,"outcome":"failure"}"#,
            r#"{"t_ms":130,"latency_ms":0,"outcome":"rejected","attempt":2}"#,
            r#"{"t_ms":130,"latency_ms":30,"outcome":"cancelled"}"#,
        ]
    );
}

/// A breaker outside retry refuses the call before any attempt: recorded as one rejection.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refusal_outside_retry_is_one_rejected_line() {
    let (recorder, out) = Recorder::builder().clock(Clock::tokio()).to_memory();
    let pipeline = Pipeline::builder()
        .breaker_policy("1 consecutive, open 10s".parse().unwrap())
        .clock(Clock::tokio())
        .retry("2x fixed 0ms".parse().unwrap())
        .idempotent(true)
        .order_names(["breaker", "retry"])
        .recorder(recorder.clone())
        .build()
        .unwrap();
    for _ in 0..2 {
        let _ = pipeline.call(|| async { Err::<(), _>("503") }).await;
    }
    recorder.flush().unwrap();
    assert_eq!(
        lines(&out.text()),
        [
            r#"{"t_ms":0,"latency_ms":0,"outcome":"failure"}"#,
            r#"{"t_ms":0,"latency_ms":0,"outcome":"failure","attempt":2}"#,
            r#"{"t_ms":0,"latency_ms":0,"outcome":"rejected"}"#,
        ]
    );
}

/// A tower stack records through the pipeline of its `PolicyLayer`.
#[cfg(feature = "tower")]
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_tower_policy_layer_records_through_its_pipeline() {
    use tower::{service_fn, Layer, Service, ServiceExt};
    let (recorder, out) = Recorder::builder().clock(Clock::tokio()).to_memory();
    let pipeline = Pipeline::builder()
        .timeout(Duration::from_millis(50))
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let layer = breaker_core::tower::policy::PolicyLayer::from_pipeline(pipeline);
    let mut svc = layer.layer(service_fn(|ms: u64| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<u64, std::io::Error>(ms)
    }));
    assert_eq!(svc.ready().await.unwrap().call(7).await.unwrap(), 7);
    assert!(svc.ready().await.unwrap().call(500).await.is_err());
    recorder.flush().unwrap();
    assert_eq!(
        lines(&out.text()),
        [
            r#"{"t_ms":0,"latency_ms":7,"outcome":"success"}"#,
            r#"{"t_ms":7,"latency_ms":50,"outcome":"timeout"}"#,
        ]
    );
}
