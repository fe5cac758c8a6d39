//! `#[circuit_breaker(key = ..)]`: the `tracing` events of a keyed breaker name its key.
//!
//! Its own test binary with one test: a `tracing` callsite's interest is cached process-wide,
//! and a test that installs a thread's subscriber while other test threads first hit the same
//! callsites (every breaker's transition event is one callsite) can find it cached as
//! uninteresting, so the event is never delivered.

use breaker::circuit_breaker;
use breaker::Error;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

/// Records each event as `LEVEL message k=v ...`.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl tracing::field::Visit for Line {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!(" {}={}", field.name(), value));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == "breaker"
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        self.0.lock().unwrap().push(line.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[derive(Debug)]
struct Down;

#[circuit_breaker(threshold = 1, key = tenant, name = "events")]
async fn for_tenant(tenant: &str) -> Result<(), Down> {
    Err(Down)
}

#[tokio::test(flavor = "current_thread")]
async fn transitions_and_rejections_of_a_keyed_breaker_name_the_key() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    assert!(matches!(for_tenant("acme").await, Err(Error::Inner(Down))));
    assert!(matches!(for_tenant("acme").await, Err(Error::Rejected(_))));
    let lines = capture.0.lock().unwrap().clone();
    let transition = lines
        .iter()
        .find(|l| l.contains("message=circuit breaker state transition"))
        .expect("a transition event");
    assert!(
        transition.contains(" breaker=events key=acme from=closed to=open"),
        "{transition}"
    );
    let rejection = lines
        .iter()
        .find(|l| l.contains("message=call rejected"))
        .expect("a rejection event");
    assert!(
        rejection.contains(" breaker=events key=acme reason=open"),
        "{rejection}"
    );
}
