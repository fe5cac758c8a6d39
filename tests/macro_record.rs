//! `#[circuit_breaker(record = path)]`: the function's pipeline records every attempt in the
//! recorder the path returns, asked once at the first call.

use breaker::circuit_breaker;
use breaker::clock::Clock;
use breaker::record::{Lines, Recorder};
use std::sync::OnceLock;
use std::time::Duration;

static RECORDING: OnceLock<(Recorder, Lines)> = OnceLock::new();

fn recorder() -> Option<Recorder> {
    Some(
        RECORDING
            .get_or_init(|| Recorder::builder().clock(Clock::tokio()).to_memory())
            .0
            .clone(),
    )
}

fn nowhere() -> Option<Recorder> {
    None
}

#[circuit_breaker(threshold = 2, cooldown = "10s", retry = "2x fixed 5ms", record = recorder)]
async fn flaky(fail: bool) -> Result<u32, &'static str> {
    tokio::time::sleep(Duration::from_millis(3)).await;
    if fail {
        Err("503")
    } else {
        Ok(7)
    }
}

#[circuit_breaker(threshold = 2, record = nowhere)]
async fn unrecorded() -> Result<u32, &'static str> {
    Ok(1)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_annotated_function_records_its_attempts() {
    assert_eq!(flaky(false).await.unwrap(), 7);
    // Two failed attempts trip the breaker (threshold 2).
    assert!(flaky(true).await.is_err());
    assert!(matches!(
        flaky(false).await,
        Err(breaker::Error::Rejected(_))
    ));
    assert_eq!(unrecorded().await.unwrap(), 1);
    let (recorder, lines) = RECORDING.get().unwrap();
    assert_eq!(recorder.flush().unwrap(), (4, 0));
    let text = lines.text();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(
        got,
        [
            r#"{"t_ms":0,"latency_ms":3,"outcome":"success"}"#,
            r#"{"t_ms":3,"latency_ms":3,"outcome":"failure"}"#,
            r#"{"t_ms":11,"latency_ms":3,"outcome":"failure","attempt":2}"#,
            r#"{"t_ms":14,"latency_ms":0,"outcome":"rejected"}"#,
        ]
    );
}
