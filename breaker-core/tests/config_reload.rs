//! A reload reaches every layer (issue 17): after `PolicyRegistry::reload`, new calls of a
//! pipeline from the registry run under the policy's new retry, timeout, deadline and bulkhead,
//! calls in flight finish under the old ones, and the breaker keeps its state. A reload that
//! drops a policy in use is refused; every reload is a `tracing` event and a metric; a watched
//! file reloads on change. On tokio's paused clock.
#![cfg(feature = "config")]

use breaker_core::clock::Clock;
#[cfg(any(feature = "metrics", feature = "watch"))]
use breaker_core::config::Loader;
use breaker_core::config::{self, Format, LivePipeline, Policies, PolicyRegistry};
use breaker_core::{Error, State};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Result<T = ()> = std::result::Result<T, Error<&'static str>>;

fn policies(text: &str) -> Policies {
    config::load_str(text, Format::Toml).unwrap()
}

/// A registry of the one policy `p`: `layers` and a breaker that opens after 2 failures in a
/// row, on tokio's clock.
fn registry(layers: &str) -> PolicyRegistry {
    PolicyRegistry::from_policies_with_clock(policy(layers), Some(Clock::tokio()))
}

fn policy(layers: &str) -> Policies {
    policies(&format!(
        "[policies.p]\nbreaker = \"2 consecutive, open 30s\"\n{layers}\n"
    ))
}

/// One failed call, one breaker failure.
async fn fail(p: &LivePipeline) {
    let r: Result = p.call(|| async { Err("down") }).await;
    assert!(matches!(r, Err(Error::Inner("down"))), "{r:?}");
}

/// Reloads `next` between two failures: the second opens the breaker, so its count survived
/// the reload. Then resets the breaker for the rest of the test.
async fn reload_keeping_breaker_state(registry: &PolicyRegistry, p: &LivePipeline, next: &str) {
    fail(p).await;
    registry.reload_from(policy(next)).unwrap();
    assert_eq!(registry.breaker("p").unwrap().state(), State::Closed);
    fail(p).await;
    assert_eq!(registry.breaker("p").unwrap().state(), State::Open);
    registry.breaker("p").unwrap().reset();
}

#[tokio::test(start_paused = true)]
async fn reload_changes_the_retry_attempts_of_new_calls() {
    let registry =
        registry("retry = \"2x fixed 10ms\"\nidempotent = true\norder = \"breaker > retry\"");
    let p = registry.pipeline("p").unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let attempt = |calls: &Arc<AtomicU32>| {
        let calls = Arc::clone(calls);
        move || {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), _>("down") }
        }
    };
    let r = p.call(attempt(&calls)).await;
    assert!(matches!(r, Err(Error::GaveUp { attempts: 2, .. })), "{r:?}");
    assert_eq!(calls.swap(0, Ordering::Relaxed), 2);

    let report = registry
        .reload_from(policy(
            "retry = \"4x fixed 10ms\"\nidempotent = true\norder = \"breaker > retry\"",
        ))
        .unwrap();
    assert_eq!(report.changed, ["p"]);
    // The breaker (outside the retry) saw one failed call; the next opens it.
    let r = p.call(attempt(&calls)).await;
    assert!(matches!(r, Err(Error::GaveUp { attempts: 4, .. })), "{r:?}");
    assert_eq!(calls.load(Ordering::Relaxed), 4);
    assert_eq!(registry.breaker("p").unwrap().state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn reload_changes_the_timeout_of_new_calls_and_not_of_calls_in_flight() {
    let registry = registry("timeout = \"100ms\"");
    let p = registry.pipeline("p").unwrap();
    fail(&p).await;
    let slow = || async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok::<_, &str>(1)
    };
    // Started before the reload: runs under the 100 ms timeout.
    let in_flight = p.call(slow);
    registry.reload_from(policy("timeout = \"200ms\"")).unwrap();
    let after = p.call(slow);
    let (in_flight, after) = tokio::join!(in_flight, after);
    match in_flight {
        Err(Error::Timeout(e)) => assert_eq!(e.after, Duration::from_millis(100)),
        other => panic!("{other:?}"),
    }
    assert_eq!(after.unwrap(), 1);
    // The timed-out call was the second failure in a row: the count from before the reload
    // was kept.
    assert_eq!(registry.breaker("p").unwrap().state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn reload_changes_the_deadline_of_new_calls() {
    let registry = registry("deadline = \"100ms\"");
    let p = registry.pipeline("p").unwrap();
    let slow = || async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok::<_, &str>(1)
    };
    match p.call(slow).await {
        Err(Error::Timeout(e)) => assert_eq!(e.after, Duration::from_millis(100)),
        other => panic!("{other:?}"),
    }
    // That timeout was a breaker failure; start the count afresh.
    registry.breaker("p").unwrap().reset();
    reload_keeping_breaker_state(&registry, &p, "deadline = \"200ms\"").await;
    assert_eq!(p.call(slow).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn reload_changes_the_bulkhead_limit_of_new_calls() {
    let registry = registry("bulkhead = \"1 concurrent\"");
    let p = registry.pipeline("p").unwrap();
    let slow = || async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, &str>(1)
    };
    let full = |r: &Result<i32>| matches!(r, Err(Error::Rejected(e)) if e.layer() == breaker_core::layer::Layer::Bulkhead);
    let (a, b) = tokio::join!(p.call(slow), p.call(slow));
    assert_eq!(a.unwrap(), 1);
    assert!(full(&b), "{b:?}");

    reload_keeping_breaker_state(&registry, &p, "bulkhead = \"2 concurrent\"").await;
    let (a, b, c) = tokio::join!(p.call(slow), p.call(slow), p.call(slow));
    assert_eq!((a.unwrap(), b.unwrap()), (1, 1));
    assert!(full(&c), "{c:?}");
}

/// A reload that changes another layer keeps the bulkhead, and the calls counted in it.
#[tokio::test(start_paused = true)]
async fn a_reload_of_another_layer_keeps_the_bulkhead() {
    let registry = registry("bulkhead = \"1 concurrent\"\ntimeout = \"1s\"");
    let p = registry.pipeline("p").unwrap();
    let slow = || async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, &str>(1)
    };
    let in_flight = p.call(slow);
    registry
        .reload_from(policy("bulkhead = \"1 concurrent\"\ntimeout = \"2s\""))
        .unwrap();
    let (a, b) = tokio::join!(in_flight, p.call(slow));
    assert_eq!(a.unwrap(), 1);
    assert!(matches!(b, Err(Error::Rejected(_))), "{b:?}");
}

/// A policy that disappears while a pipeline uses it keeps its last good version: the
/// reload is refused, saying which policy and who uses it, and calls go on.
#[tokio::test(start_paused = true)]
async fn a_reload_that_drops_a_policy_in_use_is_refused() {
    let registry = registry("timeout = \"1s\"");
    let p = registry.pipeline("p").unwrap();
    let err = registry
        .reload_from(policies("[policies.q]\ntimeout = \"1s\"\n"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "policies.p: policy `p` is used by a pipeline from `PolicyRegistry::pipeline` and the \
         new config does not have it; the previous policies stay in force"
    );
    assert_eq!(registry.names(), ["p"]);
    assert_eq!(p.call(|| async { Ok::<_, &str>(3) }).await.unwrap(), 3);
    // Once the pipeline is gone, the policy may go.
    drop(p);
    let report = registry
        .reload_from(policies("[policies.q]\ntimeout = \"1s\"\n"))
        .unwrap();
    assert_eq!(
        (report.added, report.removed),
        (vec!["q".to_owned()], vec!["p".to_owned()])
    );
}

/// Every reload, good or failed, is a `tracing` event and a count of
/// `breaker_config_reloads_total{result}`.
#[cfg(feature = "metrics")]
#[test]
fn every_reload_is_an_event_and_a_metric() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let dir = tempdir("events");
    let path = dir.join("policies.toml");
    std::fs::write(&path, "[policies.p]\ntimeout = \"1s\"\n").unwrap();
    let registry = PolicyRegistry::load(Loader::file(&path).no_env()).unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let events = reload_events();
    metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(events.clone(), || {
            std::fs::write(&path, "[policies.p]\ntimeout = \"2s\"\n").unwrap();
            registry.reload().unwrap();
            std::fs::write(&path, "[policies.p]\ntimeout = 2\n").unwrap();
            registry.reload().unwrap_err();
        })
    });
    let mut counts: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == config::RELOADS_TOTAL)
        .map(|(key, _, _, value)| {
            let result = key.key().labels().find(|l| l.key() == "result").unwrap();
            let DebugValue::Counter(n) = value else {
                panic!("a counter")
            };
            (result.value().to_owned(), n)
        })
        .collect();
    counts.sort();
    assert_eq!(counts, [("error".to_owned(), 1), ("ok".to_owned(), 1)]);
    let events = events.lines();
    assert_eq!(
        events,
        [
            "INFO config reloaded added=[] changed=[\"p\"] removed=[]".to_owned(),
            format!(
                "WARN config reload failed; the previous policies stay in force errors=1 \
                 error={}:2:11: policies.p.timeout: invalid type: integer `2`, expected a \
                 string: A duration such as \"250ms\", \"30s\" or \"1m 30s\".",
                path.display()
            ),
        ]
    );
    assert_eq!(
        registry.get("p").unwrap().timeout,
        Some(Duration::from_secs(2))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A watched file reloads its registry when it changes: edited in place, and replaced by a
/// rename as editors do. Waits are bounded polls, never fixed sleeps.
#[cfg(feature = "watch")]
#[test]
fn a_watched_file_reloads_on_change() {
    use std::time::Instant;
    let dir = tempdir("watch");
    let path = dir.join("policies.toml");
    std::fs::write(&path, "[policies.p]\ntimeout = \"1s\"\n").unwrap();
    let registry = PolicyRegistry::load(Loader::file(&path).no_env()).unwrap();
    let watch = registry.watch(Duration::from_millis(50)).unwrap();
    assert_eq!(
        watch.path(),
        dir.canonicalize().unwrap().join("policies.toml")
    );
    let timeout_becomes = |expected: u64| {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if registry.get("p").unwrap().timeout == Some(Duration::from_secs(expected)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    };
    std::fs::write(&path, "[policies.p]\ntimeout = \"2s\"\n").unwrap();
    assert!(timeout_becomes(2), "the edit was not picked up");
    // A broken file keeps the policies; the watch goes on.
    std::fs::write(&path, "[policies.p]\ntimeout = 2\n").unwrap();
    let replaced = dir.join("policies.toml.new");
    std::fs::write(&replaced, "[policies.p]\ntimeout = \"3s\"\n").unwrap();
    std::fs::rename(&replaced, &path).unwrap();
    assert!(timeout_becomes(3), "the replaced file was not picked up");
    drop(watch);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(any(feature = "metrics", feature = "watch"))]
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-reload-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(feature = "metrics")]
#[path = "support/events.rs"]
mod events;
#[cfg(feature = "metrics")]
use events::Capture;

/// Every event of the config reloads, as `LEVEL message k=v ...`.
#[cfg(feature = "metrics")]
fn reload_events() -> Capture {
    Capture::new(|m| m.target() == "breaker::config")
}
