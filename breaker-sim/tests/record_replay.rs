//! Record calls of a live pipeline on tokio's paused clock, replay the recording against the
//! same policy, and get the decisions the live breaker took: the same transitions at the same
//! instants, the same rejections.

use breaker_core::breaker::{CircuitBreaker, State};
use breaker_core::clock::Clock;
use breaker_core::pipeline::Pipeline;
use breaker_core::policy::Policy;
use breaker_core::record::{Recorded, Recorder};
use breaker_core::Error;
use breaker_sim::replay::{NamedPolicy, Options};
use breaker_sim::trace::{Format, TraceReader};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const BREAKER: &str = "3 consecutive, open 500ms";
const TIMEOUT: Duration = Duration::from_millis(103);
/// One call every 7 ms; answers take 16 ms (healthy) or 4 ms (down), a hang is cut at 103 ms:
/// no two events of the run fall on the same instant, so the order of events at an instant,
/// which a live run does not define, never matters.
const PERIOD_MS: u64 = 7;

/// The dependency at `ms` since the start: healthy, down, hanging, healthy again.
async fn dependency(ms: u64) -> Result<(), &'static str> {
    match ms {
        0..1000 | 3000.. => {
            tokio::time::sleep(Duration::from_millis(16)).await;
            Ok(())
        }
        1000..2000 => {
            tokio::time::sleep(Duration::from_millis(4)).await;
            Err("503")
        }
        _ => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn replaying_a_recorded_live_run_gives_the_live_decisions() {
    let live_transitions: Arc<Mutex<Vec<(u64, State)>>> = Arc::default();
    let sink = Arc::clone(&live_transitions);
    let breaker = CircuitBreaker::builder(BREAKER.parse().unwrap())
        .clock(Clock::tokio())
        .on_transition(move |t| sink.lock().unwrap().push((t.at.as_nanos() as u64, t.to)))
        .build()
        .unwrap();
    let (recorder, lines) = Recorder::builder().clock(Clock::tokio()).to_memory();
    let pipeline = Arc::new(
        Pipeline::builder()
            .breaker(breaker)
            .timeout(TIMEOUT)
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    let rejected = Arc::new(Mutex::new(0u64));
    let mut tasks = Vec::new();
    for k in 0..(5000 / PERIOD_MS) {
        tokio::time::sleep_until(start + Duration::from_millis(k * PERIOD_MS)).await;
        let (pipeline, recorder, rejected) = (
            Arc::clone(&pipeline),
            recorder.clone(),
            Arc::clone(&rejected),
        );
        tasks.push(tokio::spawn(async move {
            let at = recorder.start();
            let ms = start.elapsed().as_millis() as u64;
            let result = pipeline.call(|| dependency(ms)).await;
            let outcome = match result {
                Ok(()) => Recorded::Success,
                Err(Error::Inner(_)) => Recorded::Failure,
                Err(Error::Timeout(_)) => Recorded::Timeout,
                Err(Error::Rejected(_)) => {
                    *rejected.lock().unwrap() += 1;
                    Recorded::Rejected
                }
                Err(e) => panic!("unexpected {e}"),
            };
            recorder.record(at, outcome, None);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (written, dropped) = recorder.flush().unwrap();
    assert_eq!((written, dropped), (5000 / PERIOD_MS, 0));

    let live = live_transitions.lock().unwrap().clone();
    // The run did go through the breaker's states: opened in the outage, probed, closed.
    assert!(live.len() >= 4, "{live:?}");
    assert!(live.iter().any(|(_, s)| *s == State::Open));
    assert_eq!(live.last().unwrap().1, State::Closed);

    let text = lines.text();
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
            ..Policy::default()
        },
        params: Vec::new(),
    };
    let options = Options {
        timeline: true,
        ..Options::default()
    };
    let report = breaker_sim::run::run(&mut reader, &[policy], options, &|_| {})
        .unwrap()
        .remove(0);
    let timeline = report.timeline.as_ref().unwrap();
    // The replay's transitions: after the initial closed state, up to the final repeat.
    let replayed = &timeline.transitions[1..timeline.transitions.len() - 1];
    assert_eq!(replayed, live.as_slice());
    assert_eq!(report.rejected, *rejected.lock().unwrap());
    assert_eq!(report.calls, 5000 / PERIOD_MS);
}
