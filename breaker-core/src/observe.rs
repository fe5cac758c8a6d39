//! Metrics: counters and a gauge through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! # Why
//! A breaker that opens silently is a mystery on a dashboard. These metrics say how many calls
//! went through each breaker and how they ended, how many were rejected locally and why, how
//! often breakers changed state, and how many retries and timeouts the pipelines saw. They go
//! through the `metrics` facade, so any exporter (Prometheus, StatsD, ...) can publish them.
//!
//! # How
//! Everything here compiles with and without the `metrics` feature; without it every function
//! is an empty inline function and [`BreakerMetrics`] is zero-sized, so callers (the tower
//! layer, the pipeline, the macro's expansion) need no `cfg`.
//!
//! - Transitions: [`instrument`] adds a listener to a
//!   [`crate::breaker::BreakerBuilder`] that counts [`TRANSITIONS_TOTAL`] and
//!   moves the [`STATE`] gauge.
//! - Calls and rejections: the breaker core has no per-call hook, so whoever drives the breaker
//!   records them with a [`BreakerMetrics`] made once per breaker name. The tower
//!   [`BreakerService`](crate::tower::breaker::BreakerService) and the
//!   [`Pipeline`](crate::pipeline::Pipeline) (so also `#[circuit_breaker]`) do it themselves,
//!   under the name of the pipeline's breaker; a program driving a breaker by hand does it as
//!   in the example below.
//! - The breakers that a pipeline builds from a policy, that `#[circuit_breaker]` builds
//!   (keyed ones included) and that a [`PolicyRegistry`](crate::config::PolicyRegistry) builds
//!   are instrumented and tracked: their transitions and state gauge need no wiring. A breaker
//!   you build yourself and hand over needs [`instrument`] and [`track`].
//! - Retries and timeouts: [`retry`] and [`timeout`], called by the retry and timeout layers
//!   of a pipeline, and the tower [`TimeoutService`](crate::tower::timeout::TimeoutService)
//!   (under the name its layer was given, `""` by default).
//!
//! # Metric names and labels
//! Every label set is bounded: the breaker's name (chosen by the program, one per
//! [`BreakerFactory`](crate::breaker::BreakerFactory), *not* per key of a
//! [`Registry`](crate::registry::Registry)) and a label from a fixed list. Keys are never a
//! label unless the program adds them itself through [`BreakerMetrics::with_labels`].
//!
//! | name | kind | labels |
//! |---|---|---|
//! | [`CALLS_TOTAL`] `breaker_calls_total` | counter | `breaker`, `outcome` = `success` \| `failure` \| `ignored` \| `cancelled` |
//! | [`REJECTIONS_TOTAL`] `breaker_rejections_total` | counter | `breaker`, `reason` = `open` \| `half_open_full` \| `forced_open` |
//! | [`TRANSITIONS_TOTAL`] `breaker_transitions_total` | counter | `breaker`, `from`, `to` (a [`State::as_str`](crate::breaker::State::as_str) name: `closed`, `open`, `half-open`, `forced-open`, `forced-closed`), `reason` (a [`TransitionReason`](crate::breaker::TransitionReason) name) |
//! | [`STATE`] `breaker_state` | gauge | `breaker`, `state` (a [`State::as_str`](crate::breaker::State::as_str) name): how many tracked breakers of that name are in that state (0 or 1 for a single breaker) |
//! | [`RETRIES_TOTAL`] `breaker_retries_total` | counter | `breaker`: retry attempts after the first |
//! | [`TIMEOUTS_TOTAL`] `breaker_timeouts_total` | counter | `breaker`, `kind` = `attempt` \| `deadline` |
//! | [`HEDGES_TOTAL`] `breaker_hedges_total` | counter | `breaker`: hedges started |
//! | [`LAYER_REJECTIONS_TOTAL`] `breaker_layer_rejections_total` | counter | `breaker`, `layer` = `rate` \| `throttle` \| `limit` |
//! | [`CONCURRENCY_LIMIT`] `breaker_concurrency_limit` | gauge | `breaker`: the adaptive concurrency limit |
//!
//! A state is spelled as everywhere else, in `tracing` events and in [`State`](crate::breaker::State)'s `Display`:
//! `half-open`, not `half_open` (label values may hold a hyphen).
//!
//! At most 4 + 3 + 5 × 5 × 8 + 5 + 1 + 2 series per breaker name; in practice about 20 (most
//! from/to/reason combinations cannot happen).
//!
//! # Handles are bound when made
//! [`BreakerMetrics`] registers its counters when it is made, with the recorder installed at
//! that moment: install the global recorder (the exporter) *before* building breakers,
//! layers or pipelines.
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::{BreakerPolicy, CircuitBreaker};
//! use breaker::observe::{self, BreakerMetrics};
//!
//! let breaker = observe::instrument(
//!     CircuitBreaker::builder(BreakerPolicy::default()).name("inventory"),
//! )
//! .build()?;
//! observe::track(&breaker); // the state gauge now counts this breaker
//! let metrics = BreakerMetrics::new("inventory");
//! match breaker.try_acquire() {
//!     Ok(permit) => {
//!         permit.success();
//!         metrics.outcome(breaker::Outcome::Success);
//!     }
//!     Err(rejected) => metrics.rejected(rejected.reason()),
//! }
//! # Ok::<(), breaker::breaker::ValidationError>(())
//! ```

#[cfg(feature = "tower")]
use crate::breaker::OwnedPermit;
#[cfg(feature = "tokio")]
use crate::breaker::Permit;
use crate::breaker::{BreakerBuilder, CircuitBreaker, RejectReason, Transition};
use crate::classify::Outcome;
#[cfg(any(feature = "tokio", feature = "tower"))]
use std::borrow::Borrow;

/// Counter of calls admitted by a breaker, by how they ended. Labels `breaker`, `outcome`.
pub const CALLS_TOTAL: &str = "breaker_calls_total";
/// Counter of calls rejected locally. Labels `breaker`, `reason`.
pub const REJECTIONS_TOTAL: &str = "breaker_rejections_total";
/// Counter of state changes. Labels `breaker`, `from`, `to`, `reason`.
pub const TRANSITIONS_TOTAL: &str = "breaker_transitions_total";
/// Gauge: tracked breakers per state. Labels `breaker`, `state`.
pub const STATE: &str = "breaker_state";
/// Counter of retry attempts (not counting the first attempt). Label `breaker`.
pub const RETRIES_TOTAL: &str = "breaker_retries_total";
/// Counter of timeouts raised by our timeout layer. Labels `breaker`, `kind`.
pub const TIMEOUTS_TOTAL: &str = "breaker_timeouts_total";
/// Counter: hedges started (attempts beyond the first of a hedged call).
pub const HEDGES_TOTAL: &str = "breaker_hedges_total";
/// Counter: local rejections by the rate limiter, adaptive throttling and the adaptive
/// concurrency limit, by `layer`.
pub const LAYER_REJECTIONS_TOTAL: &str = "breaker_layer_rejections_total";
/// Gauge: the adaptive concurrency limit now.
pub const CONCURRENCY_LIMIT: &str = "breaker_concurrency_limit";

pub use crate::timeout::TimeoutKind;

/// Adds the transition listener: every transition increments [`TRANSITIONS_TOTAL`] and moves
/// one unit of the [`STATE`] gauge from the old state to the new one. Without the `metrics`
/// feature, returns `builder` unchanged.
pub fn instrument(builder: BreakerBuilder) -> BreakerBuilder {
    #[cfg(feature = "metrics")]
    {
        builder.on_transition(record_transition)
    }
    #[cfg(not(feature = "metrics"))]
    {
        builder
    }
}

/// Records one transition (what the listener of [`instrument`] does).
#[inline]
pub fn record_transition(t: &Transition) {
    #[cfg(feature = "metrics")]
    {
        let name = t.name.to_string();
        metrics::counter!(
            TRANSITIONS_TOTAL,
            "breaker" => name.clone(),
            "from" => t.from.as_str(),
            "to" => t.to.as_str(),
            "reason" => t.reason.as_str(),
        )
        .increment(1);
        metrics::gauge!(STATE, "breaker" => name.clone(), "state" => t.from.as_str())
            .decrement(1.0);
        metrics::gauge!(STATE, "breaker" => name, "state" => t.to.as_str()).increment(1.0);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = t;
}

/// Counts `breaker` in the [`STATE`] gauge (one unit on its current state). Call it once per
/// breaker built through [`instrument`]; a [`Registry`](crate::registry::Registry) with
/// [`state_gauge`](crate::registry::RegistryBuilder::state_gauge) does it for its breakers.
#[inline]
pub fn track(breaker: &CircuitBreaker) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(STATE, "breaker" => breaker.name().to_string(), "state" => breaker.state().as_str())
        .increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = breaker;
}

/// Undoes [`track`] (one unit off the breaker's current state), for a breaker dropped from
/// use. A transition racing with it may leave the gauge off by one.
#[inline]
pub fn untrack(breaker: &CircuitBreaker) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(STATE, "breaker" => breaker.name().to_string(), "state" => breaker.state().as_str())
        .decrement(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = breaker;
}

/// Counts one retry attempt (an attempt after the first) of the pipeline named `name`.
#[inline]
pub fn retry(name: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(RETRIES_TOTAL, "breaker" => name.to_string()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = name;
}

/// Counts one hedge (an attempt started beside one still in flight) under `name`, and emits a
/// `tracing` debug event.
#[inline]
pub fn hedge(name: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(HEDGES_TOTAL, "breaker" => name.to_string()).increment(1);
    tracing::debug!(target: "breaker", breaker = name, "hedge started");
}

/// Counts one local rejection by the rate limiter, adaptive throttling or the adaptive
/// concurrency limit (`layer`, by its name in the order: `rate`, `throttle`, `limit`) under
/// `name`, and emits a `tracing` debug event. (The breaker's own rejections are counted in
/// [`REJECTIONS_TOTAL`] by reason.)
#[inline]
pub fn layer_rejected(name: &str, layer: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(LAYER_REJECTIONS_TOTAL, "breaker" => name.to_string(), "layer" => layer)
        .increment(1);
    tracing::debug!(target: "breaker", breaker = name, layer, "call rejected locally");
}

/// Sets the [`CONCURRENCY_LIMIT`] gauge of `name` to `limit`, and emits a `tracing` debug
/// event of the change from `from`.
#[inline]
pub fn concurrency_limit(name: &str, from: u32, limit: u32) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(CONCURRENCY_LIMIT, "breaker" => name.to_string()).set(f64::from(limit));
    tracing::debug!(target: "breaker", breaker = name, from, limit, "concurrency limit moved");
}

/// Counts one timeout of kind `kind` raised by our timeout layer in the pipeline named `name`.
#[inline]
pub fn timeout(name: &str, kind: TimeoutKind) {
    #[cfg(feature = "metrics")]
    metrics::counter!(TIMEOUTS_TOTAL, "breaker" => name.to_string(), "kind" => kind.as_str())
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (name, kind);
}

/// The pre-registered counter of the timeouts of one kind under one name, for a layer that
/// counts its timeouts itself (the tower `TimeoutService`). Zero-sized without the `metrics`
/// feature.
#[cfg(all(feature = "tower", feature = "tokio"))]
#[derive(Clone)]
pub(crate) struct TimeoutMetrics {
    #[cfg(feature = "metrics")]
    counter: metrics::Counter,
}

#[cfg(all(feature = "tower", feature = "tokio"))]
impl TimeoutMetrics {
    /// Registers the counter of timeouts of `kind` under `name`, with the recorder installed
    /// now.
    pub(crate) fn new(name: &str, kind: TimeoutKind) -> Self {
        #[cfg(feature = "metrics")]
        {
            TimeoutMetrics {
                counter: metrics::counter!(
                    TIMEOUTS_TOTAL,
                    "breaker" => name.to_string(),
                    "kind" => kind.as_str(),
                ),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (name, kind);
            TimeoutMetrics {}
        }
    }

    /// Counts one timeout.
    #[inline]
    pub(crate) fn elapsed(&self) {
        #[cfg(feature = "metrics")]
        self.counter.increment(1);
    }
}

#[cfg(all(feature = "tower", feature = "tokio"))]
impl std::fmt::Debug for TimeoutMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeoutMetrics").finish_non_exhaustive()
    }
}

/// Pre-registered call and rejection counters of one breaker name. Make one per name, not per
/// call; cloning is cheap. Zero-sized without the `metrics` feature.
#[derive(Clone)]
pub struct BreakerMetrics {
    #[cfg(feature = "metrics")]
    handles: std::sync::Arc<Handles>,
}

#[cfg(feature = "metrics")]
struct Handles {
    /// success, failure, ignored, cancelled
    calls: [metrics::Counter; 4],
    /// open, half_open_full, forced_open
    rejections: [metrics::Counter; 3],
}

impl BreakerMetrics {
    /// Registers the counters of breaker `name` with the recorder installed now.
    pub fn new(name: &str) -> Self {
        Self::with_labels(name, &[])
    }

    /// Like [`new`](Self::new), with extra labels on the call and rejection counters, for
    /// programs that opt in to, say, a per-key label. Every distinct label set is a new series
    /// in the exporter: keep their number bounded.
    pub fn with_labels(name: &str, extra: &[(&'static str, String)]) -> Self {
        #[cfg(feature = "metrics")]
        {
            let make = |metric: &'static str, label: &'static str, value: &'static str| {
                let mut labels = vec![
                    metrics::Label::new("breaker", name.to_string()),
                    metrics::Label::new(label, value),
                ];
                labels.extend(
                    extra
                        .iter()
                        .map(|(k, v)| metrics::Label::new(*k, v.clone())),
                );
                metrics::counter!(metric, labels)
            };
            let calls = ["success", "failure", "ignored", "cancelled"]
                .map(|o| make(CALLS_TOTAL, "outcome", o));
            let rejections = [
                RejectReason::Open,
                RejectReason::HalfOpenFull,
                RejectReason::ForcedOpen,
            ]
            .map(|r| make(REJECTIONS_TOTAL, "reason", r.as_str()));
            BreakerMetrics {
                handles: std::sync::Arc::new(Handles { calls, rejections }),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (name, extra);
            BreakerMetrics {}
        }
    }

    /// A handle that counts nothing and registers nothing: for a pipeline without a breaker.
    #[cfg(feature = "tokio")]
    pub(crate) fn noop() -> Self {
        #[cfg(feature = "metrics")]
        {
            BreakerMetrics {
                handles: std::sync::Arc::new(Handles {
                    calls: std::array::from_fn(|_| metrics::Counter::noop()),
                    rejections: std::array::from_fn(|_| metrics::Counter::noop()),
                }),
            }
        }
        #[cfg(not(feature = "metrics"))]
        BreakerMetrics {}
    }

    /// Counts an admitted call that ended with `outcome`.
    #[inline]
    pub fn outcome(&self, outcome: Outcome) {
        #[cfg(feature = "metrics")]
        self.handles.calls[match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::Ignored => 2,
        }]
        .increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = outcome;
    }

    /// Counts an admitted call that the caller cancelled (its future or permit was dropped).
    #[inline]
    pub fn cancelled(&self) {
        #[cfg(feature = "metrics")]
        self.handles.calls[3].increment(1);
    }

    /// Counts a call rejected locally for `reason`.
    #[inline]
    pub fn rejected(&self, reason: RejectReason) {
        #[cfg(feature = "metrics")]
        self.handles.rejections[match reason {
            RejectReason::Open => 0,
            RejectReason::HalfOpenFull => 1,
            RejectReason::ForcedOpen => 2,
        }]
        .increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = reason;
    }
}

/// The breaker permit of an admitted call and the counters its outcome goes to: the one guard
/// of the [`Pipeline`](crate::pipeline::Pipeline) (a borrowed [`Permit`] and counters) and of
/// the tower [`BreakerService`](crate::tower::breaker::BreakerService) (an [`OwnedPermit`]
/// and counters of its own). The outcome is recorded once, in the breaker and in the counters;
/// dropped without one, the permit records a cancellation (a failure while panicking), and so
/// do the counters.
#[cfg(any(feature = "tokio", feature = "tower"))]
pub(crate) struct Metered<P: Record, M: Borrow<BreakerMetrics>> {
    pub(crate) permit: P,
    pub(crate) metrics: M,
}

#[cfg(any(feature = "tokio", feature = "tower"))]
impl<P: Record, M: Borrow<BreakerMetrics>> Metered<P, M> {
    /// Records `outcome` in the breaker and the counters, unless already recorded.
    #[inline(always)]
    pub(crate) fn record(&mut self, outcome: Outcome) {
        if self.permit.record_once(outcome) {
            self.metrics.borrow().outcome(outcome);
        }
    }
}

#[cfg(all(feature = "metrics", any(feature = "tokio", feature = "tower")))]
impl<P: Record, M: Borrow<BreakerMetrics>> Drop for Metered<P, M> {
    fn drop(&mut self) {
        if !self.permit.is_done() {
            if std::thread::panicking() {
                self.metrics.borrow().outcome(Outcome::Failure);
            } else {
                self.metrics.borrow().cancelled();
            }
        }
    }
}

/// A permit that records its outcome in place, once.
#[cfg(any(feature = "tokio", feature = "tower"))]
pub(crate) trait Record {
    /// Records `outcome`; `false` if an outcome was recorded before.
    fn record_once(&mut self, outcome: Outcome) -> bool;
    /// Whether an outcome has been recorded.
    #[cfg(feature = "metrics")]
    fn is_done(&self) -> bool;
}

#[cfg(feature = "tokio")]
impl Record for Permit<'_> {
    #[inline(always)]
    fn record_once(&mut self, outcome: Outcome) -> bool {
        self.record_in_place(outcome)
    }
    #[cfg(feature = "metrics")]
    fn is_done(&self) -> bool {
        Permit::is_done(self)
    }
}

/// An owned permit, taken when its outcome is recorded.
#[cfg(feature = "tower")]
impl Record for Option<OwnedPermit> {
    fn record_once(&mut self, outcome: Outcome) -> bool {
        self.take().map(|p| p.record(outcome)).is_some()
    }
    #[cfg(feature = "metrics")]
    fn is_done(&self) -> bool {
        self.is_none()
    }
}

impl std::fmt::Debug for BreakerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerMetrics").finish_non_exhaustive()
    }
}
