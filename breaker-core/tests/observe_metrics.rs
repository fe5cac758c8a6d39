//! Exact metric values for a scripted sequence of calls (feature `metrics`).
#![cfg(feature = "metrics")]

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::observe::{self, BreakerMetrics, TimeoutKind};
use breaker_core::registry::Registry;
use breaker_core::Outcome;
use metrics_util::debugging::DebuggingRecorder;
use std::time::Duration;

#[path = "support/metrics.rs"]
mod support;
use support::{collect, expected};

/// Drives `breaker` like the tower service does: acquire, then record the outcome on both the
/// permit and the metrics; `None` drops the permit (cancellation).
fn call(breaker: &CircuitBreaker, metrics: &BreakerMetrics, outcome: Option<Outcome>) -> bool {
    match breaker.try_acquire() {
        Ok(permit) => {
            match outcome {
                Some(o) => {
                    permit.record(o);
                    metrics.outcome(o);
                }
                None => {
                    drop(permit);
                    metrics.cancelled();
                }
            }
            true
        }
        Err(rejected) => {
            metrics.rejected(rejected.reason());
            false
        }
    }
}

#[test]
fn scripted_sequence_gives_exact_counters_and_gauges() {
    let recorder = DebuggingRecorder::new();
    let values = metrics::with_local_recorder(&recorder, || {
        let time = ManualClock::new();
        let breaker = observe::instrument(
            CircuitBreaker::builder(BreakerPolicy {
                consecutive_failures: Some(2),
                cooldown: Duration::from_secs(10),
                cooldown_max: Duration::from_secs(10),
                ..BreakerPolicy::default()
            })
            .name("inventory")
            .clock(Clock::manual(&time)),
        )
        .build()
        .unwrap();
        observe::track(&breaker);
        let m = BreakerMetrics::new("inventory");

        assert!(call(&breaker, &m, Some(Outcome::Success)));
        assert!(call(&breaker, &m, Some(Outcome::Failure)));
        assert!(call(&breaker, &m, Some(Outcome::Ignored)));
        assert!(call(&breaker, &m, Some(Outcome::Failure))); // trips: closed -> open
        assert!(!call(&breaker, &m, Some(Outcome::Success))); // rejected: open
        assert!(!call(&breaker, &m, Some(Outcome::Success))); // rejected: open
        time.advance(Duration::from_secs(10));
        let probe = breaker.try_acquire().unwrap(); // open -> half-open
        assert!(!call(&breaker, &m, Some(Outcome::Success))); // rejected: half_open_full
        drop(probe);
        m.cancelled(); // the probe was cancelled
        assert!(call(&breaker, &m, Some(Outcome::Success))); // half-open -> closed
        breaker.force_open(); // closed -> forced-open
        assert!(!call(&breaker, &m, Some(Outcome::Success))); // rejected: forced_open
        assert_eq!(breaker.state(), State::ForcedOpen);

        observe::retry("inventory");
        observe::retry("inventory");
        observe::timeout("inventory", TimeoutKind::Attempt);
        observe::timeout("inventory", TimeoutKind::Deadline);
        collect(&recorder)
    });

    assert_eq!(
        values,
        expected(&[
            ("breaker_calls_total{breaker=inventory,outcome=cancelled}", 1.0),
            ("breaker_calls_total{breaker=inventory,outcome=failure}", 2.0),
            ("breaker_calls_total{breaker=inventory,outcome=ignored}", 1.0),
            ("breaker_calls_total{breaker=inventory,outcome=success}", 2.0),
            ("breaker_rejections_total{breaker=inventory,reason=forced_open}", 1.0),
            ("breaker_rejections_total{breaker=inventory,reason=half_open_full}", 1.0),
            ("breaker_rejections_total{breaker=inventory,reason=open}", 2.0),
            ("breaker_retries_total{breaker=inventory}", 2.0),
            ("breaker_state{breaker=inventory,state=closed}", 0.0),
            ("breaker_state{breaker=inventory,state=forced-open}", 1.0),
            ("breaker_state{breaker=inventory,state=half-open}", 0.0),
            ("breaker_state{breaker=inventory,state=open}", 0.0),
            ("breaker_timeouts_total{breaker=inventory,kind=attempt}", 1.0),
            ("breaker_timeouts_total{breaker=inventory,kind=deadline}", 1.0),
            (
                "breaker_transitions_total{breaker=inventory,from=closed,reason=consecutive_failures,to=open}",
                1.0
            ),
            (
                "breaker_transitions_total{breaker=inventory,from=closed,reason=manual,to=forced-open}",
                1.0
            ),
            (
                "breaker_transitions_total{breaker=inventory,from=half-open,reason=probes_succeeded,to=closed}",
                1.0
            ),
            (
                "breaker_transitions_total{breaker=inventory,from=open,reason=cooldown_elapsed,to=half-open}",
                1.0
            ),
        ])
    );
}

#[test]
fn registry_state_gauge_counts_breakers_per_state_without_key_labels() {
    let recorder = DebuggingRecorder::new();
    let values = metrics::with_local_recorder(&recorder, || {
        let time = ManualClock::new();
        let factory = observe::instrument(
            CircuitBreaker::builder(BreakerPolicy {
                consecutive_failures: Some(1),
                ..BreakerPolicy::default()
            })
            .name("hosts")
            .clock(Clock::manual(&time))
            .totals(false),
        )
        .build_factory()
        .unwrap();
        let reg: Registry<u32> = Registry::builder(factory)
            .idle_ttl(Duration::from_secs(60))
            .state_gauge(true)
            .build();
        for k in 0..10 {
            drop(reg.get_or_create(&k).unwrap());
        }
        for k in 0..3 {
            reg.get(&k).unwrap().try_acquire().unwrap().failure(); // 3 open
        }
        reg.remove(&9).unwrap(); // a closed one removed
        reg.remove(&2).unwrap(); // an open one removed
        time.advance(Duration::from_secs(3600));
        assert_eq!(reg.evict_idle(), 6); // keys 3..=8, closed and idle
        collect(&recorder)
    });
    assert_eq!(
        values,
        expected(&[
            ("breaker_state{breaker=hosts,state=closed}", 0.0),
            ("breaker_state{breaker=hosts,state=open}", 2.0),
            (
                "breaker_transitions_total{breaker=hosts,from=closed,reason=consecutive_failures,to=open}",
                3.0
            ),
        ])
    );
}
