//! A `tracing` subscriber that keeps each event it is given as one line, `LEVEL message k=v ..`
//! (fields in emission order), or `LEVEL target message k=v ..`, for exact-value assertions.
//! Shared by the event tests of `breaker-core` (included by path).
#![allow(dead_code)] // each test uses the part it needs

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The lines of the events `enabled` lets through, in order.
#[derive(Clone)]
pub struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
    enabled: fn(&Metadata<'_>) -> bool,
    target: bool,
}

impl Capture {
    /// Every event `enabled` accepts, as `LEVEL message k=v ..`.
    pub fn new(enabled: fn(&Metadata<'_>) -> bool) -> Capture {
        Capture {
            lines: Arc::default(),
            enabled,
            target: false,
        }
    }

    /// Every event, as `LEVEL message k=v ..`.
    pub fn all() -> Capture {
        Capture::new(|_| true)
    }

    /// Lines with the event's target after the level: `LEVEL target message k=v ..`.
    pub fn with_target(mut self) -> Capture {
        self.target = true;
        self
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The lines so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

/// An event's message and its other fields.
struct Line(String, String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        } else {
            self.1.push_str(&format!(" {}={:?}", field.name(), value));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.1.push_str(&format!(" {}={}", field.name(), value));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        (self.enabled)(m)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new(), String::new());
        event.record(&mut line);
        let m = event.metadata();
        let line = if self.target {
            format!("{} {} {}{}", m.level(), m.target(), line.0, line.1)
        } else {
            format!("{} {}{}", m.level(), line.0, line.1)
        };
        self.lines.lock().unwrap().push(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
