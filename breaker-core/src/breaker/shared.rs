//! What the breakers of one configuration share ([`Shared`]: the policy, its mirror for the
//! hot paths, the clock, the name, the listeners).

use super::event::Listener;
use super::policy::BreakerPolicy;
use super::rules::RateThresholds;
use super::CircuitBreaker;
use crate::clock::Clock;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use arc_swap::ArcSwap;

/// What all breakers built from one [`BreakerBuilder`](super::BreakerBuilder) share: the policy (swappable at run
/// time), the clock, the name and the listeners.
pub(crate) struct Shared {
    pub(crate) policy: ArcSwap<BreakerPolicy>,
    pub(crate) hot: Hot,
    pub(crate) clock: Clock,
    /// Interned, so a rejection can name its breaker without touching a shared refcount.
    pub(crate) name: &'static str,
    pub(crate) listeners: Vec<Listener>,
    pub(crate) totals: bool,
    /// Called with every breaker a factory creates from now on (set once; a fleet backend
    /// shares keyed breakers with it, see [`BreakerFactory::on_create`](super::BreakerFactory::on_create)).
    pub(crate) on_create: std::sync::OnceLock<OnCreate>,
}

/// What [`BreakerFactory::on_create`](super::BreakerFactory::on_create) runs.
pub(super) type OnCreate = Box<dyn Fn(&CircuitBreaker) + Send + Sync>;

/// The policy values that the success and admission paths read, mirrored from `policy` so those
/// paths never load the `ArcSwap` (a few nanoseconds and a shared debt list each time).
pub(crate) struct Hot {
    /// `consecutive_failures`, or 0 when that rule is off.
    consecutive: AtomicU32,
    min_calls: AtomicU32,
    /// The slow-call duration in nanoseconds, or 0 when that rule is off (then admission does
    /// not read the clock).
    slow_nanos: AtomicU64,
    /// `failure_rate_percent` as `f64` bits, or `u64::MAX` (a NaN) when that rule is off.
    failure_rate_bits: AtomicU64,
    /// The slow-call rate in percent as `f64` bits, or `u64::MAX` when that rule is off.
    slow_rate_bits: AtomicU64,
    /// Bumped by every reload that changes the window's shape; a breaker's window store
    /// remembers the value it was built for (see `store.rs`).
    pub(super) window_epoch: AtomicU32,
}

impl Hot {
    pub(super) fn new(p: &BreakerPolicy) -> Hot {
        let hot = Hot {
            consecutive: AtomicU32::new(0),
            min_calls: AtomicU32::new(0),
            slow_nanos: AtomicU64::new(0),
            failure_rate_bits: AtomicU64::new(u64::MAX),
            slow_rate_bits: AtomicU64::new(u64::MAX),
            window_epoch: AtomicU32::new(0),
        };
        hot.set(p);
        hot
    }

    pub(super) fn set(&self, p: &BreakerPolicy) {
        self.consecutive
            .store(p.consecutive_failures.unwrap_or(0), Ordering::Relaxed);
        self.min_calls.store(p.min_calls, Ordering::Relaxed);
        let slow = p.slow_call.map_or(0, |s| {
            u64::try_from(s.duration.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1)
        });
        self.slow_nanos.store(slow, Ordering::Relaxed);
        let bits = |p: Option<f64>| p.map_or(u64::MAX, f64::to_bits);
        self.failure_rate_bits
            .store(bits(p.failure_rate_percent), Ordering::Relaxed);
        self.slow_rate_bits
            .store(bits(p.slow_call.map(|s| s.rate_percent)), Ordering::Relaxed);
    }

    /// The failure-rate threshold in percent, if that rule is on.
    #[inline(always)]
    pub(crate) fn failure_rate_percent(&self) -> Option<f64> {
        let bits = self.failure_rate_bits.load(Ordering::Relaxed);
        (bits != u64::MAX).then(|| f64::from_bits(bits))
    }

    /// The slow-call rate threshold in percent, if that rule is on.
    #[inline(always)]
    pub(crate) fn slow_rate_percent(&self) -> Option<f64> {
        let bits = self.slow_rate_bits.load(Ordering::Relaxed);
        (bits != u64::MAX).then(|| f64::from_bits(bits))
    }

    #[inline(always)]
    pub(crate) fn consecutive(&self) -> u32 {
        self.consecutive.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn min_calls(&self) -> u32 {
        self.min_calls.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn slow_nanos(&self) -> u64 {
        self.slow_nanos.load(Ordering::Relaxed)
    }

    /// The window epoch, for the fast check that a breaker's window store still has the shape
    /// in force (a stale value only delays the switch to a new store by a call or two).
    #[inline(always)]
    pub(crate) fn window_epoch_relaxed(&self) -> u32 {
        self.window_epoch.load(Ordering::Relaxed)
    }

    /// The window epoch, ordered before a policy load that follows it: a store built from that
    /// policy has the shape of this epoch or a newer one.
    pub(crate) fn window_epoch(&self) -> u32 {
        self.window_epoch.load(Ordering::Acquire)
    }
}

impl Shared {
    /// Whether a call that started at `start` (a precise reading, taken under a slow-call
    /// rule) and ends at `now` was slow under the slow-call rule in force.
    pub(crate) fn is_slow(&self, start: Option<u64>, now: u64) -> bool {
        let limit = self.hot.slow_nanos();
        limit != 0 && start.is_some_and(|start| now.saturating_sub(start) >= limit)
    }
}

/// The policy's mirror on the closed path: the thresholds without an `ArcSwap` load.
impl RateThresholds for Hot {
    #[inline(always)]
    fn min_calls(&self) -> u32 {
        Hot::min_calls(self)
    }

    #[inline(always)]
    fn failure_rate_percent(&self) -> Option<f64> {
        Hot::failure_rate_percent(self)
    }

    #[inline(always)]
    fn slow_rate_percent(&self) -> Option<f64> {
        Hot::slow_rate_percent(self)
    }
}

/// Interns a breaker name: names are few (one per policy, not per key), so each distinct name
/// is leaked once and shared from then on.
pub(super) fn intern(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::OnceLock;
    static NAMES: OnceLock<std::sync::Mutex<HashSet<&'static str>>> = OnceLock::new();
    if name.is_empty() {
        return "";
    }
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}
