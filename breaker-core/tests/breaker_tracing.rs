//! The `tracing` events of a breaker are exactly the expected ones for a scripted sequence:
//! one `info` event per transition (name, key, from, to, reason, the counts that caused it)
//! and one `debug` event per rejection.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::registry::Registry;
use std::sync::Arc;
use std::time::Duration;
use tracing::Level;

#[path = "support/events.rs"]
mod events;
use events::Capture;

#[test]
fn transitions_and_rejections_emit_exact_events_with_name_and_key() {
    let capture = Capture::all();
    let time = ManualClock::new();
    let factory = CircuitBreaker::builder(BreakerPolicy {
        consecutive_failures: Some(2),
        cooldown: Duration::from_secs(5),
        cooldown_max: Duration::from_secs(5),
        ..BreakerPolicy::default()
    })
    .name("inventory")
    .clock(Clock::manual(&time))
    .totals(false)
    .build_factory()
    .unwrap();
    let registry: Registry<String> = Registry::builder(factory).build_tagged();
    tracing::subscriber::with_default(capture.clone(), || {
        let b = registry.get_or_create("host-a").unwrap();
        assert_eq!(b.key(), "host-a");
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
        time.set(Duration::from_secs(2));
        assert!(b.try_acquire().is_err());
        time.set(Duration::from_secs(5));
        b.try_acquire().unwrap().success();
    });
    let lines = capture.lines();
    assert_eq!(
        lines,
        [
            format!("{} circuit breaker state transition breaker=inventory key=host-a from=closed to=open reason=consecutive_failures generation=1 consecutive_failures=2 window_calls=0 window_failures=0 window_slow=0 cooldown=Some(5s)", Level::INFO),
            format!("{} call rejected breaker=inventory key=host-a reason=open retry_after=Some(3s)", Level::DEBUG),
            format!("{} circuit breaker state transition breaker=inventory key=host-a from=open to=half-open reason=cooldown_elapsed generation=2 consecutive_failures=0 window_calls=0 window_failures=0 window_slow=0 cooldown=None", Level::INFO),
            format!("{} circuit breaker state transition breaker=inventory key=host-a from=half-open to=closed reason=probes_succeeded generation=3 consecutive_failures=0 window_calls=0 window_failures=0 window_slow=0 cooldown=None", Level::INFO),
        ]
    );
}

/// A transition decided elsewhere (the shared-state seam) names who decided it; a local one
/// has no `origin` field at all (above).
#[test]
fn a_remote_transition_names_its_origin() {
    let capture = Capture::all();
    let time = ManualClock::new();
    let b = CircuitBreaker::builder(BreakerPolicy::default())
        .name("inventory")
        .clock(Clock::manual(&time))
        .totals(false)
        .build()
        .unwrap();
    tracing::subscriber::with_default(capture.clone(), || {
        b.apply_remote(breaker_core::breaker::RemoteTransition {
            to: breaker_core::State::Open,
            reason: breaker_core::breaker::TransitionReason::FailureRate,
            open_until: Some(Duration::from_secs(20).as_nanos() as u64),
            streak: None,
            origin: Arc::from("replica-b"),
        });
    });
    let lines = capture.lines();
    assert_eq!(
        lines,
        [format!("{} circuit breaker state transition breaker=inventory key= from=closed to=open reason=failure_rate generation=1 consecutive_failures=0 window_calls=0 window_failures=0 window_slow=0 cooldown=Some(20s) origin=replica-b", Level::INFO)]
    );
}
