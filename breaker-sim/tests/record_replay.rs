//! Record the calls of a live pipeline on tokio's paused clock (with the pipeline's own
//! recorder), replay the recording against the same policy, and get the decisions the live
//! breaker took: the same transitions at the same instants, the same rejections.

use breaker_core::breaker::{CircuitBreaker, State};
use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::policy::Policy;
use breaker_core::record::Recorder;
use breaker_core::retry::RetryPolicy;
use breaker_core::Error;
use breaker_sim::replay::{NamedPolicy, Options};
use breaker_sim::report::Report;
use breaker_sim::trace::{Format, TraceReader};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const BREAKER: &str = "3 consecutive, open 500ms";
const TIMEOUT: Duration = Duration::from_millis(61);
const RETRY: &str = "3x fixed 12ms";
/// One call every 11 ms; answers take 5 ms (healthy) or 2 ms (down), a hang is cut at 61 ms,
/// retries wait 12 ms: chosen (by searching) so that no two arrivals, attempt starts or
/// attempt ends of the run fall on the same instant, so the order of events at one instant,
/// which a live run does not define, never matters.
const PERIOD_MS: u64 = 11;
const CALLS: u64 = 5000 / PERIOD_MS;

/// The dependency at `ms` since the start: healthy, down, hanging, healthy again. A pure
/// function of time, as a replay assumes.
async fn dependency(ms: u64) -> Result<(), &'static str> {
    match ms {
        0..1000 | 3000.. => {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(())
        }
        1000..2000 => {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Err("503")
        }
        _ => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
    }
}

/// Runs the live pipeline; returns its transitions, its rejected calls and the recording.
async fn live(retry: Option<RetryPolicy>) -> (Vec<(u64, State)>, u64, String) {
    let transitions: Arc<Mutex<Vec<(u64, State)>>> = Arc::default();
    let sink = Arc::clone(&transitions);
    let breaker = CircuitBreaker::builder(BREAKER.parse().unwrap())
        .clock(Clock::tokio())
        .on_transition(move |t| sink.lock().unwrap().push((t.at.as_nanos() as u64, t.to)))
        .build()
        .unwrap();
    let (recorder, lines) = Recorder::builder().clock(Clock::tokio()).to_memory();
    let mut builder = Pipeline::builder()
        .breaker(breaker)
        .timeout(TIMEOUT)
        .recorder(recorder.clone());
    if let Some(r) = retry {
        builder = builder.retry(r).idempotent(true);
    }
    let pipeline = Arc::new(builder.build().unwrap());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..CALLS {
        tokio::time::sleep_until(start + Duration::from_millis(k * PERIOD_MS)).await;
        let pipeline = Arc::clone(&pipeline);
        tasks.push(tokio::spawn(async move {
            let result = pipeline
                .call(|| dependency(start.elapsed().as_millis() as u64))
                .await;
            matches!(result, Err(Error::Rejected(_)))
        }));
    }
    let mut rejected = 0;
    for t in tasks {
        rejected += u64::from(t.await.unwrap());
    }
    let (_, dropped) = recorder.flush().unwrap();
    assert_eq!(dropped, 0);
    let transitions = transitions.lock().unwrap().clone();
    (transitions, rejected, lines.text())
}

fn replay(text: String, retry: Option<RetryPolicy>) -> Report {
    let mut reader = TraceReader::new(
        "recorded",
        Box::new(std::io::Cursor::new(text.into_bytes())),
        Format::JsonLines,
    )
    .unwrap();
    let policy = NamedPolicy {
        name: "live".into(),
        policy: Policy {
            breaker: Some(BREAKER.parse().unwrap()),
            timeout: Some(TIMEOUT),
            retry,
            idempotent: retry.is_some(),
            ..Policy::default()
        },
        params: Vec::new(),
    };
    let options = Options {
        timeline: true,
        ..Options::default()
    };
    breaker_sim::run::run(&mut reader, &[policy], options, &|_| {})
        .unwrap()
        .remove(0)
}

async fn check(retry: Option<RetryPolicy>) {
    let (live, rejected, text) = live(retry).await;
    assert_eq!(text.contains("\"attempt\":2"), retry.is_some());
    // The run did go through the breaker's states: opened in the outage, closed at the end.
    assert!(live.len() >= 4, "{live:?}");
    assert!(live.iter().any(|(_, s)| *s == State::Open));
    assert_eq!(live.last().unwrap().1, State::Closed);
    let report = replay(text, retry);
    let timeline = report.timeline.as_ref().unwrap();
    // The replay's transitions, without its initial closed state and final repeat.
    let replayed = &timeline.transitions[1..timeline.transitions.len() - 1];
    assert_eq!(replayed, live.as_slice());
    assert_eq!(report.calls, CALLS);
    assert_eq!(report.rejected, rejected);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn replaying_a_recorded_live_run_gives_the_live_decisions() {
    check(None).await;
}

/// With retry: the pipeline records every attempt (retries with their number); the replay
/// makes its own retries, which read the recorded ones as the dependency's behaviour.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn with_retry_too() {
    check(Some(RETRY.parse().unwrap())).await;
}
