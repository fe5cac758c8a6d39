//! Building breakers: [`BreakerBuilder`], and [`BreakerFactory`] for many breakers that share
//! one configuration (a keyed registry), with run-time policy reloads.

use super::closed::WindowSlot;
use super::event::{Listener, Transition};
use super::machine::{Heavy, Inner};
use super::policy::{BreakerPolicy, ValidationError};
use super::state::Word;
use super::totals::Striped;
use super::CircuitBreaker;
use crate::clock::Clock;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use arc_swap::ArcSwap;
#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::Arc;

/// What all breakers built from one [`BreakerBuilder`] share: the policy (swappable at run
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
    /// shares keyed breakers with it, see [`BreakerFactory::on_create`]).
    pub(crate) on_create: std::sync::OnceLock<OnCreate>,
}

/// What [`BreakerFactory::on_create`] runs.
type OnCreate = Box<dyn Fn(&CircuitBreaker) + Send + Sync>;

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
    /// remembers the value it was built for (see `closed.rs`).
    window_epoch: AtomicU32,
}

impl Hot {
    fn new(p: &BreakerPolicy) -> Hot {
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

    fn set(&self, p: &BreakerPolicy) {
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

/// Interns a breaker name: names are few (one per policy, not per key), so each distinct name
/// is leaked once and shared from then on.
fn intern(name: &str) -> &'static str {
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
            .then(|| create(Arc::clone(&entry.shared), None, totals, 0, policy, false));
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
        && *window == b.window
        && *max_probe_wait == b.max_probe_wait
        && *neutral_probe == b.neutral_probe
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
    let breaker = create(Arc::clone(&factory.shared), None, totals, 0, policy, false);
    let last = Box::new(Last {
        policy: policy.clone(),
        shared: factory.shared,
    });
    // Replaces (and drops) the previous entry, whose block has no listener: no code of the
    // user's runs here.
    let _ = LAST.try_with(|slot| slot.set(Some(last)));
    Ok(breaker)
}

/// A new breaker of configuration `shared`, with lifetime totals on or off. `policy` is the
/// policy in force, read after window epoch `epoch` (so it has that epoch's shape or a newer
/// one; see `BreakerFactory::create_with`).
#[inline(always)]
fn create(
    shared: Arc<Shared>,
    key: Option<Arc<str>>,
    totals: bool,
    epoch: u32,
    policy: &BreakerPolicy,
    room: bool,
) -> CircuitBreaker {
    let window = policy
        .uses_window()
        .then(|| Box::new(WindowSlot::new(policy.window, epoch)));
    let totals = totals.then(Striped::new);
    let heavy = (room || window.is_some() || totals.is_some() || key.is_some()).then(|| {
        Box::new(Heavy {
            window,
            totals,
            key,
            fleet: std::sync::OnceLock::new(),
        })
    });
    CircuitBreaker {
        inner: triomphe::Arc::new(Inner {
            state: AtomicU64::new(Word::INITIAL),
            at: AtomicU64::new(0),
            since: AtomicU64::new(0),
            consecutive: AtomicU64::new(0),
            shared,
            heavy,
        }),
    }
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
    /// (a consecutive-rule breaker: 64 bytes in one allocation without totals, about 208 bytes
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
        // A named breaker always has room for a fleet hook (`Store::share`): it is one per
        // policy, not per key, so the few bytes do not add up.
        let factory = self.build_factory()?;
        let epoch = factory.shared.hot.window_epoch();
        let policy = factory.shared.policy.load();
        Ok(create(
            Arc::clone(&factory.shared),
            None,
            factory.shared.totals,
            epoch,
            &policy,
            true,
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

/// Creates breakers that share one policy, clock, name and listener set; see
/// [`BreakerBuilder::build_factory`]. Cloning is cheap.
#[derive(Clone)]
pub struct BreakerFactory {
    shared: Arc<Shared>,
}

impl BreakerFactory {
    /// A new breaker, closed, with its own state.
    pub fn create(&self) -> CircuitBreaker {
        self.create_with_key(None)
    }

    /// Like [`create`](Self::create), for one key of a keyed set (one breaker per host or
    /// tenant): the key is kept with the breaker and named in its `tracing` events
    /// (`key = "..."`). It costs one heap block per breaker; metric labels do not include it.
    pub fn create_keyed(&self, key: impl Into<String>) -> CircuitBreaker {
        self.create_with_key(Some(key.into().into()))
    }

    fn create_with_key(&self, key: Option<Arc<str>>) -> CircuitBreaker {
        self.create_with(key, self.shared.totals)
    }

    /// A breaker of this factory with lifetime totals on or off whatever the factory's
    /// setting (a keyed registry turns them off: they cost memory per key).
    pub(crate) fn create_with(&self, key: Option<Arc<str>>, totals: bool) -> CircuitBreaker {
        // The epoch first: the policy loaded after it has that epoch's shape or a newer one.
        let epoch = self.shared.hot.window_epoch();
        let policy = self.shared.policy.load();
        match self.shared.on_create.get() {
            None => create(Arc::clone(&self.shared), key, totals, epoch, &policy, false),
            Some(f) => {
                let breaker = create(Arc::clone(&self.shared), key, totals, epoch, &policy, true);
                f(&breaker);
                breaker
            }
        }
    }

    /// Runs `f` with every breaker this factory (and its clones) creates from now on, before
    /// it is handed out; such breakers always have room for a fleet hook. Set once: returns
    /// whether it was set. Hidden and unstable: a fleet backend shares keyed breakers with it
    /// (`#[circuit_breaker(scope = "shared", key = ..)]`).
    #[doc(hidden)]
    pub fn on_create(&self, f: impl Fn(&CircuitBreaker) + Send + Sync + 'static) -> bool {
        self.shared.on_create.set(Box::new(f)).is_ok()
    }

    /// Replaces the policy of every breaker made by this factory, keeping their state: an open
    /// breaker stays open, counts are kept.
    ///
    /// If the window's shape changed (another count, length or bucket count, or a count window
    /// for a time window or back), each breaker starts a new, empty window of the new shape at
    /// its next recorded outcome; the old window's calls are not carried over (a window of
    /// another shape cannot hold them faithfully). A rate rule added to a policy that had none
    /// applies to breakers created afterwards.
    ///
    /// # Errors
    /// The new policy's [`ValidationError`]; the old policy stays in force.
    pub fn set_policy(&self, policy: BreakerPolicy) -> Result<(), ValidationError> {
        policy.validate()?;
        let hot = &self.shared.hot;
        hot.set(&policy);
        let window = policy.window;
        let old = self.shared.policy.swap(Arc::new(policy));
        if old.window != window {
            // After the swap: whoever reads the new epoch then loads the policy sees this
            // policy or a newer one.
            hot.window_epoch.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<BreakerPolicy> {
        self.shared.policy.load_full()
    }

    /// The clock every breaker of this factory reads (a keyed registry measures idle time
    /// with it).
    pub(crate) fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// The name of this factory's breakers.
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// A breaker like [`create`](Self::create)'s with room for a fleet hook whatever its
    /// policy and totals (a config registry's named policy shares its one breaker with a
    /// fleet backend on demand; it is one per policy, so the few bytes do not add up).
    pub(crate) fn create_shareable(&self) -> CircuitBreaker {
        let epoch = self.shared.hot.window_epoch();
        let policy = self.shared.policy.load();
        let shared = Arc::clone(&self.shared);
        let breaker = create(shared, None, self.shared.totals, epoch, &policy, true);
        if let Some(f) = self.shared.on_create.get() {
            f(&breaker);
        }
        breaker
    }

    /// Whether this factory's breakers keep lifetime totals.
    pub(crate) fn totals(&self) -> bool {
        self.shared.totals
    }
}

impl std::fmt::Debug for BreakerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerBuilder")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for BreakerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerFactory")
            .field("name", &self.shared.name)
            .field("policy", &self.shared.policy.load())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
