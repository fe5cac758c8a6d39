//! The store's own breaker and its observability.
//!
//! # Why
//! A hung Redis must not add latency: after `store_failures` consecutive failed operations the
//! store's breaker opens and no operation is attempted until its cooldown ends (doubling on
//! every failed retry, up to a maximum). While it is open the store is *degraded*: flushes are
//! dropped (counted), probe-lease requests are answered at once with
//! "store unavailable" (a probe then runs by the store-error mode), and breakers follow
//! the store-error mode.
//!
//! # Observability
//! One `tracing` event per change, never one per failed operation: `store degraded` (warn) and
//! `store recovered` (info), target `breaker_redis`, fields `namespace`, `replica`, `error` /
//! `degraded_for_ms`; never a URL or a credential. Counters in [`StoreStats`]; with the
//! `metrics` feature also through the `metrics` facade, every series labelled with the
//! `namespace` only:
//!
//! | name | kind | meaning |
//! |---|---|---|
//! | `breaker_store_flushes_total` | counter | flush operations answered |
//! | `breaker_store_dropped_flushes_total` | counter | flushes with counts not delivered |
//! | `breaker_store_errors_total` | counter | failed store operations |
//! | `breaker_store_events_total` | counter | label `event` = `store_degraded` \| `store_recovered` |
//! | `breaker_store_degraded` | gauge | 1 while degraded |
//! | `breaker_store_rtt_seconds` | histogram | round-trip time of answered operations |

use crate::error::StoreError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Counters of one store (one coordinator). Read with [`Store::stats`](crate::Store::stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Script calls sent to the store (a pipeline of N calls counts N).
    pub operations: u64,
    /// Round trips (a pipeline counts one).
    pub round_trips: u64,
    /// Flush operations answered.
    pub flushes: u64,
    /// Flushes whose counts were not delivered (store degraded, timeout, error).
    pub dropped_flushes: u64,
    /// Probe-acquire operations sent.
    pub acquires: u64,
    /// Failed store operations.
    pub errors: u64,
    /// Breakers this replica wrote back after the store lost them (seeded from the local
    /// breaker), or closed after a fault because its local probes had recovered.
    pub repairs: u64,
    /// Times the namespace's epoch changed (the store lost its data: restarted empty,
    /// flushed): every registered breaker was reconciled.
    pub epochs: u64,
    /// Breaker items the store answered `stale` (counts or writes fenced off: the word was
    /// not the one they were decided on).
    pub stale: u64,
    /// Published transitions received.
    pub pushes: u64,
    /// Transitions applied to local breakers (from replies and pushes).
    pub applied: u64,
    /// Times the store became degraded.
    pub degraded_events: u64,
    /// Times it recovered.
    pub recovered_events: u64,
    /// Whether it is degraded now.
    pub degraded: bool,
    /// Round-trip time of the last answered operation, µs.
    pub last_rtt_us: u64,
    /// Largest round-trip time seen, µs.
    pub max_rtt_us: u64,
}

#[derive(Default)]
pub(crate) struct Stats {
    pub operations: AtomicU64,
    pub round_trips: AtomicU64,
    pub flushes: AtomicU64,
    pub dropped_flushes: AtomicU64,
    pub acquires: AtomicU64,
    pub errors: AtomicU64,
    pub repairs: AtomicU64,
    pub epochs: AtomicU64,
    pub stale: AtomicU64,
    pub pushes: AtomicU64,
    pub applied: AtomicU64,
    pub degraded_events: AtomicU64,
    pub recovered_events: AtomicU64,
    pub degraded: AtomicBool,
    pub last_rtt_us: AtomicU64,
    pub max_rtt_us: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub(crate) fn snapshot(&self) -> StoreStats {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreStats {
            operations: l(&self.operations),
            round_trips: l(&self.round_trips),
            flushes: l(&self.flushes),
            dropped_flushes: l(&self.dropped_flushes),
            acquires: l(&self.acquires),
            errors: l(&self.errors),
            repairs: l(&self.repairs),
            epochs: l(&self.epochs),
            stale: l(&self.stale),
            pushes: l(&self.pushes),
            applied: l(&self.applied),
            degraded_events: l(&self.degraded_events),
            recovered_events: l(&self.recovered_events),
            degraded: self.degraded.load(Ordering::Relaxed),
            last_rtt_us: l(&self.last_rtt_us),
            max_rtt_us: l(&self.max_rtt_us),
        }
    }

    pub(crate) fn rtt(&self, ns: &str, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.last_rtt_us.store(us, Ordering::Relaxed);
        self.max_rtt_us.fetch_max(us, Ordering::Relaxed);
        metrics_rtt(ns, d);
    }
}

/// A change of the store's health, returned by [`StoreBreaker::success`] and
/// [`StoreBreaker::failure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Degraded,
    Recovered { after: Duration },
}

/// The store's own breaker: consecutive failures, a doubling cooldown.
pub(crate) struct StoreBreaker {
    threshold: u32,
    base: Duration,
    max: Duration,
    consecutive: u32,
    cooldown: Duration,
    open_until: Option<Instant>,
    degraded_since: Option<Instant>,
}

impl StoreBreaker {
    pub(crate) fn new(threshold: u32, base: Duration, max: Duration) -> StoreBreaker {
        StoreBreaker {
            threshold,
            base,
            max,
            consecutive: 0,
            cooldown: base,
            open_until: None,
            degraded_since: None,
        }
    }

    /// Whether an operation may be attempted now (closed, or the cooldown is over: a retry).
    pub(crate) fn allows(&self, now: Instant) -> bool {
        self.open_until.map_or(true, |t| now >= t)
    }

    #[cfg(test)]
    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded_since.is_some()
    }

    pub(crate) fn degraded_since(&self) -> Option<Instant> {
        self.degraded_since
    }

    /// When the next retry may be attempted while open.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.open_until
    }

    /// Opens at once (a first connection that failed): degraded from the start.
    pub(crate) fn degrade_now(&mut self, now: Instant) {
        self.consecutive = self.threshold;
        self.open_until = Some(now);
        self.degraded_since = Some(now);
    }

    pub(crate) fn success(&mut self, now: Instant) -> Change {
        self.consecutive = 0;
        self.open_until = None;
        self.cooldown = self.base;
        match self.degraded_since.take() {
            Some(since) => Change::Recovered {
                after: now.saturating_duration_since(since),
            },
            None => Change::None,
        }
    }

    pub(crate) fn failure(&mut self, now: Instant) -> Change {
        self.consecutive = self.consecutive.saturating_add(1);
        if self.consecutive < self.threshold {
            return Change::None;
        }
        self.open_until = Some(now + self.cooldown);
        self.cooldown = (self.cooldown * 2).min(self.max);
        if self.degraded_since.is_none() {
            self.degraded_since = Some(now);
            Change::Degraded
        } else {
            Change::None
        }
    }
}

/// Emits the one log line and the metrics of a change.
pub(crate) fn report(
    stats: &Stats,
    ns: &str,
    replica: &str,
    change: &Change,
    error: Option<&StoreError>,
) {
    match change {
        Change::None => {}
        Change::Degraded => {
            stats.degraded.store(true, Ordering::Relaxed);
            add(&stats.degraded_events, 1);
            let error = error.map(|e| e.to_string()).unwrap_or_default();
            tracing::warn!(
                target: "breaker_redis",
                namespace = ns,
                replica = replica,
                error = %error,
                "store degraded: shared breakers follow the store-error mode until it answers again"
            );
            metrics_event(ns, "store_degraded", true);
        }
        Change::Recovered { after } => {
            stats.degraded.store(false, Ordering::Relaxed);
            add(&stats.recovered_events, 1);
            tracing::info!(
                target: "breaker_redis",
                namespace = ns,
                replica = replica,
                degraded_for_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                "store recovered: every shared breaker is reconciled with the store"
            );
            metrics_event(ns, "store_recovered", false);
        }
    }
}

#[cfg(feature = "metrics")]
fn metrics_event(ns: &str, event: &'static str, degraded: bool) {
    metrics::counter!("breaker_store_events_total", "namespace" => ns.to_owned(), "event" => event)
        .increment(1);
    metrics::gauge!("breaker_store_degraded", "namespace" => ns.to_owned()).set(if degraded {
        1.0
    } else {
        0.0
    });
}

#[cfg(not(feature = "metrics"))]
fn metrics_event(_: &str, _: &'static str, _: bool) {}

#[cfg(feature = "metrics")]
fn metrics_rtt(ns: &str, d: Duration) {
    metrics::histogram!("breaker_store_rtt_seconds", "namespace" => ns.to_owned())
        .record(d.as_secs_f64());
}

#[cfg(not(feature = "metrics"))]
fn metrics_rtt(_: &str, _: Duration) {}

/// Counts a metric of the facade (flushes, dropped flushes, errors).
#[cfg(feature = "metrics")]
pub(crate) fn metrics_count(ns: &str, name: &'static str, n: u64) {
    metrics::counter!(name, "namespace" => ns.to_owned()).increment(n);
}

#[cfg(not(feature = "metrics"))]
pub(crate) fn metrics_count(_: &str, _: &'static str, _: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_doubles_its_cooldown() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut b = StoreBreaker::new(3, s, 4 * s);
        assert_eq!(b.failure(t0), Change::None);
        assert_eq!(b.failure(t0), Change::None);
        assert!(b.allows(t0));
        assert_eq!(b.failure(t0), Change::Degraded);
        assert!(!b.allows(t0 + s / 2));
        assert!(b.allows(t0 + s));
        assert_eq!(b.failure(t0 + s), Change::None, "one event per change");
        assert_eq!(b.retry_at(), Some(t0 + 3 * s), "cooldown doubled");
        b.failure(t0 + 3 * s);
        b.failure(t0 + 7 * s);
        assert_eq!(b.retry_at(), Some(t0 + 11 * s), "capped at the maximum");
        assert_eq!(b.success(t0 + 11 * s), Change::Recovered { after: 11 * s });
        assert!(b.allows(t0 + 11 * s) && !b.is_degraded());
    }
}
