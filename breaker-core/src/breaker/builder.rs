//! Building breakers: [`BreakerBuilder`], and [`CircuitBreaker::new`]'s per-thread cache of
//! the configuration block of equal default policies.

use super::event::{Listener, Transition};
use super::factory::BreakerFactory;
use super::machine::create;
use super::policy::{BreakerPolicy, ValidationError};
use super::shared::{intern, Hot, Shared};
use super::CircuitBreaker;
use crate::clock::Clock;
use arc_swap::ArcSwap;
#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::Arc;

/// A breaker with the system clock, no name and no listeners, sharing the configuration block
/// of this thread's previous such breaker if its policy and totals setting are `policy` and
/// `totals`; else with a new block, remembered in its place (one entry per thread: a thread
/// that alternates policies pays a configuration per breaker, as without the cache; the
/// policy is kept next to the block, so the check reads no `ArcSwap`). Not under loom: its
/// atomics must not outlive a model run.
///
/// The cache skips validation only for a policy equal to the one remembered, which was
/// validated when its block was built; any other policy is validated (an invalid one is an
/// `Err`, whatever is cached). `policy` is borrowed: a hit copies nothing, a miss clones it
/// once into the new block. A thread whose thread-locals are being destroyed gets a block of
/// its own per breaker.
#[cfg(not(loom))]
#[inline(always)]
pub(super) fn default_breaker(
    policy: &BreakerPolicy,
    totals: bool,
) -> Result<CircuitBreaker, ValidationError> {
    // The entry is taken out of the thread-local for the check and put back after it, so each
    // access is a closure small enough to inline, and no borrow flag is kept.
    if let Some(entry) = LAST.try_with(Cell::take).ok().flatten() {
        let hit = (entry.shared.totals == totals && same_policy(&entry.policy, policy))
            // Nothing reloads this block's policy (no factory is handed out), so its epoch
            // stays 0 and `policy` is the one in force.
            .then(|| create(Arc::clone(&entry.shared), None, totals, 0, policy));
        // The slot is empty (nothing in between builds a breaker), so nothing is dropped.
        let _ = LAST.try_with(|last| last.set(Some(entry)));
        if let Some(breaker) = hit {
            return Ok(breaker);
        }
    }
    default_breaker_miss(policy, totals)
}

/// This thread's last default configuration block and the policy it was built from.
#[cfg(not(loom))]
struct Last {
    policy: BreakerPolicy,
    shared: Arc<Shared>,
}

/// Whether `a` and `b` are the same policy, so one validation and one block serve both: every
/// field equal, floating-point fields bit for bit (stricter than `==`, which is what makes it
/// cheap: integer compares; `0.0` and `-0.0` then miss the cache and are validated, and no NaN
/// is ever cached since validation refuses it). Destructured without `..`, so a new field of
/// [`BreakerPolicy`] cannot be forgotten here.
#[cfg(not(loom))]
#[inline(always)]
fn same_policy(a: &BreakerPolicy, b: &BreakerPolicy) -> bool {
    use super::policy::SlowCall;
    let BreakerPolicy {
        consecutive_failures,
        failure_rate_percent,
        slow_call,
        window,
        min_calls,
        cooldown,
        cooldown_multiplier,
        cooldown_max,
        cooldown_jitter,
        half_open_probes,
        successes_to_close,
        max_probe_wait,
        neutral_probe,
    } = a;
    let bits = |p: Option<f64>| p.map(f64::to_bits);
    let slow = |s: Option<SlowCall>| s.map(|s| (s.duration, s.rate_percent.to_bits()));
    *consecutive_failures == b.consecutive_failures
        && *min_calls == b.min_calls
        && *half_open_probes == b.half_open_probes
        && *successes_to_close == b.successes_to_close
        && *cooldown == b.cooldown
        && *cooldown_max == b.cooldown_max
        && cooldown_multiplier.to_bits() == b.cooldown_multiplier.to_bits()
        && cooldown_jitter.to_bits() == b.cooldown_jitter.to_bits()
        && bits(*failure_rate_percent) == bits(b.failure_rate_percent)
        && slow(*slow_call) == slow(b.slow_call)
        && same_window(*window, b.window)
        && *max_probe_wait == b.max_probe_wait
        && *neutral_probe == b.neutral_probe
}

/// `a == b`, inline (the derived `PartialEq` of [`SlidingWindow`](super::SlidingWindow) is
/// called out of line).
#[cfg(not(loom))]
#[inline(always)]
fn same_window(a: super::SlidingWindow, b: super::SlidingWindow) -> bool {
    use super::SlidingWindow::{Count, Time};
    match (a, b) {
        (Count(a), Count(b)) => a == b,
        (
            Time { length, buckets },
            Time {
                length: l,
                buckets: n,
            },
        ) => length == l && buckets == n,
        _ => false,
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's [`Last`] entry (a thread whose thread-locals are being destroyed has
    /// none: each of its breakers gets a block of its own).
    static LAST: Cell<Option<Box<Last>>> = const { Cell::new(None) };
}

/// [`default_breaker`] for a policy other than the remembered one: validates it and builds a
/// new block, remembered from now on.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn default_breaker_miss(
    policy: &BreakerPolicy,
    totals: bool,
) -> Result<CircuitBreaker, ValidationError> {
    let factory = BreakerBuilder::new(policy.clone())
        .totals(totals)
        .build_factory()?;
    let breaker = create(Arc::clone(&factory.shared), None, totals, 0, policy);
    let last = Box::new(Last {
        policy: policy.clone(),
        shared: factory.shared,
    });
    // Replaces (and drops) the previous entry, whose block has no listener: no code of the
    // user's runs here.
    let _ = LAST.try_with(|slot| slot.set(Some(last)));
    Ok(breaker)
}

/// Builds [`CircuitBreaker`]s that share one policy, clock, name and listener set.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::breaker::{BreakerPolicy, CircuitBreaker};
/// let breaker = CircuitBreaker::builder(BreakerPolicy::default()).name("inventory").build()?;
/// # Ok::<(), breaker::breaker::ValidationError>(())
/// ```
pub struct BreakerBuilder {
    policy: BreakerPolicy,
    clock: Option<Clock>,
    /// `None`: no name (saves an allocation for the common unnamed breaker).
    name: Option<Arc<str>>,
    listeners: Vec<Listener>,
    totals: bool,
}

impl BreakerBuilder {
    pub(super) fn new(policy: BreakerPolicy) -> BreakerBuilder {
        BreakerBuilder {
            policy,
            clock: None,
            name: None,
            listeners: Vec::new(),
            totals: false,
        }
    }

    /// Uses `clock` instead of [`Clock::system`].
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Names the breaker (shown in events, errors and metrics).
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a state-change listener; see [`Listener`].
    pub fn on_transition(mut self, f: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.listeners.push(Arc::new(f));
        self
    }

    /// Whether to keep lifetime [`Totals`](super::Totals) (default `false`: opt in with
    /// `totals(true)`; [`Snapshot::totals`](super::Snapshot::totals) is `None` without them).
    /// Totals are striped per thread (64 bytes per stripe, one stripe per CPU rounded up to a
    /// power of two, at most 64), so counting never contends. The stripes are allocated at the
    /// breaker's first counted event (a call's end or a rejection), so a breaker never called
    /// costs a pointer for them.
    ///
    /// They are off by default because a breaker with them costs a second heap block
    /// at creation and, once called, a table of stripe pointers and a stripe per calling thread
    /// (a consecutive-rule breaker: 72 bytes in one allocation without totals, about 216 bytes
    /// in four with them), plus a store per call; turn them on where something reads them.
    /// The breakers built for a caller who has no builder to ask with keep them: an annotated
    /// function's own breaker and a config registry's policy breaker. A `Pipeline` that builds
    /// its breaker from a policy asks with `PipelineBuilder::totals`.
    pub fn totals(mut self, on: bool) -> Self {
        self.totals = on;
        self
    }

    /// Validates the policy and builds the breaker.
    ///
    /// A breaker with the system clock, no name and no listeners (what
    /// [`CircuitBreaker::new`] builds) shares its configuration block with the previous such
    /// breaker when the policy and the totals setting are equal, so making many of them costs
    /// one or two small allocations each, not a configuration per breaker. Nothing can change
    /// that block (only a [`BreakerFactory`] reloads policies), so the sharing is invisible.
    ///
    /// # Errors
    /// The policy's [`ValidationError`] if it is invalid.
    pub fn build(self) -> Result<CircuitBreaker, ValidationError> {
        #[cfg(not(loom))]
        if self.clock.is_none()
            && self.listeners.is_empty()
            && self.name.as_deref().map_or(true, str::is_empty)
        {
            return default_breaker(&self.policy, self.totals);
        }
        let factory = self.build_factory()?;
        let epoch = factory.shared.hot.window_epoch();
        let policy = factory.shared.policy.load();
        Ok(create(
            Arc::clone(&factory.shared),
            None,
            factory.shared.totals,
            epoch,
            &policy,
        ))
    }

    /// Validates the policy and returns a factory that creates any number of breakers sharing
    /// this policy, clock, name and listeners (a keyed registry uses it: one allocation of
    /// configuration for all keys).
    ///
    /// # Errors
    /// The policy's [`ValidationError`] if it is invalid.
    pub fn build_factory(self) -> Result<BreakerFactory, ValidationError> {
        self.policy.validate()?;
        Ok(BreakerFactory {
            shared: Arc::new(Shared {
                hot: Hot::new(&self.policy),
                policy: ArcSwap::from_pointee(self.policy),
                clock: self.clock.unwrap_or_default(),
                name: intern(self.name.as_deref().unwrap_or("")),
                listeners: self.listeners,
                totals: self.totals,
                on_create: std::sync::OnceLock::new(),
            }),
        })
    }
}

impl std::fmt::Debug for BreakerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerBuilder")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
