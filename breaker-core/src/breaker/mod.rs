//! The circuit breaker: a lazy, lock-free state machine with RAII permits.
//!
//! # Why
//! A dependency that is down should cost its callers nothing: no waiting for timeouts, no
//! threads tied up, no load added to the thing that is trying to recover. A breaker watches the
//! outcomes of calls and, once a [`BreakerPolicy`] rule says the dependency is unhealthy,
//! *opens*: calls are rejected locally in nanoseconds with a [`Rejected`] error. After the
//! cooldown it lets a few *probe* calls through (*half-open*); if they succeed it *closes*,
//! if one fails it opens again.
//!
//! # How
//! - **Lazy recovery.** There is no timer, task or thread per breaker. Open becomes half-open on
//!   the request path, when a call arrives after the cooldown, so 10,000 idle breakers cost only
//!   their memory (64 bytes each with the consecutive-failure rule and totals off).
//! - **One state word.** The state, the generation, the open streak and the half-open probe
//!   counts live in one `AtomicU64` (see `state.rs`). Every transition is one compare-and-swap that
//!   bumps the generation, so exactly one thread wins it and fires its event once. Admitting a
//!   probe is one compare-and-swap that reserves the slot.
//! - **Generations.** Every [`Permit`] remembers the generation that admitted it. An outcome
//!   recorded after the state has moved on is *late*: it is counted in
//!   [`Totals::late`] and changes nothing (cases BR-10, BR-12).
//! - **RAII permits.** [`CircuitBreaker::try_acquire`] returns a [`Permit`]; recording consumes
//!   it. A permit dropped without an outcome is a cancellation (neutral, slot released); a
//!   permit dropped while the thread panics is a failure.
//! - **Injected clock.** All timing goes through a monotonic [`Clock`]; tests drive it by hand or
//!   with tokio's paused clock (case BR-23).
//!
//! ```
//! use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, State};
//! use breaker_core::clock::{Clock, ManualClock};
//! use std::time::Duration;
//!
//! let time = ManualClock::new();
//! let breaker = CircuitBreaker::builder(BreakerPolicy {
//!     consecutive_failures: Some(2),
//!     cooldown: Duration::from_secs(10),
//!     cooldown_max: Duration::from_secs(10),
//!     ..BreakerPolicy::default()
//! })
//! .clock(Clock::manual(&time))
//! .build()
//! .unwrap();
//!
//! breaker.try_acquire().unwrap().failure();
//! breaker.try_acquire().unwrap().failure();
//! assert_eq!(breaker.state(), State::Open);
//! let rejected = breaker.try_acquire().unwrap_err();
//! assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
//!
//! time.advance(Duration::from_secs(10));
//! breaker.try_acquire().unwrap().success(); // the probe
//! assert_eq!(breaker.state(), State::Closed);
//! ```

mod event;
mod policy;
mod state;
mod striped;
mod totals;
mod window;

pub use event::{Listener, Transition, TransitionReason};
pub use policy::{
    BreakerPolicy, FieldError, NeutralProbe, SlidingWindow, SlowCall, ValidationError,
    MAX_COUNT_WINDOW, MAX_HALF_OPEN_PROBES, MAX_SUCCESSES_TO_CLOSE,
};
pub use state::State;
pub use totals::Totals;
pub use window::WindowCounts;

use crate::classify::Outcome;
use crate::clock::Clock;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use arc_swap::ArcSwap;
use state::{newer, pack_count, pack_stamp, unpack_count, unpack_stamp, Word};
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64 as AtomicU64Std};
use std::sync::Arc;
use std::time::Duration;
use striped::StripedTimeWindow;
use totals::{Counter, Striped};
use window::{GenWindow, Sample, Window};

/// What all breakers built from one [`BreakerBuilder`] share: the policy (swappable at run
/// time), the clock, the name and the listeners.
struct Shared {
    policy: ArcSwap<BreakerPolicy>,
    hot: Hot,
    clock: Clock,
    /// Interned, so a rejection can name its breaker without touching a shared refcount.
    name: &'static str,
    listeners: Vec<Listener>,
    totals: bool,
}

/// The policy values that the success and admission paths read, mirrored from `policy` so those
/// paths never load the `ArcSwap` (a few nanoseconds and a shared debt list each time).
struct Hot {
    /// `consecutive_failures`, or 0 when that rule is off.
    consecutive: AtomicU32,
    min_calls: AtomicU32,
    /// The slow-call duration in nanoseconds, or 0 when that rule is off (then admission does
    /// not read the clock).
    slow_nanos: AtomicU64Std,
}

impl Hot {
    fn new(p: &BreakerPolicy) -> Hot {
        let hot = Hot {
            consecutive: AtomicU32::new(0),
            min_calls: AtomicU32::new(0),
            slow_nanos: AtomicU64Std::new(0),
        };
        hot.set(p);
        hot
    }

    fn set(&self, p: &BreakerPolicy) {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        self.consecutive
            .store(p.consecutive_failures.unwrap_or(0), relaxed);
        self.min_calls.store(p.min_calls, relaxed);
        let slow = p.slow_call.map_or(0, |s| {
            u64::try_from(s.duration.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1)
        });
        self.slow_nanos.store(slow, relaxed);
    }

    #[inline]
    fn slow_nanos(&self) -> u64 {
        self.slow_nanos.load(std::sync::atomic::Ordering::Relaxed)
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

struct Heavy {
    /// The sliding window.
    window: Option<WindowStore>,
    totals: Option<Striped>,
    /// The key of a keyed breaker (`BreakerFactory::create_keyed`), for its events and
    /// rejections (shared, so a rejection names it without allocating).
    key: Option<Arc<str>>,
}

/// Where a breaker keeps its sliding window.
enum WindowStore {
    /// A count window: the last `n` calls have one global order, so they are kept behind a
    /// short lock, tagged with the closed-state generation their data belongs to.
    Count(Mutex<GenWindow>),
    /// A time window: lock-free, striped per thread (see `striped.rs`).
    Time(StripedTimeWindow),
}

struct Inner {
    /// The state word; see `state.rs`.
    state: AtomicU64,
    /// Open: when the cooldown ends. Half-open: when the newest probe was admitted.
    /// Packed with the generation's low bits (`pack_stamp`).
    at: AtomicU64,
    /// When the current state was entered (`pack_stamp`).
    since: AtomicU64,
    /// Consecutive failures while closed (`pack_count`).
    consecutive: AtomicU64,
    shared: Arc<Shared>,
    heavy: Option<Box<Heavy>>,
}

/// A circuit breaker. Cloning is cheap and clones share one state: a probe limit or a failure
/// count applies across all of them (case BR-03). See the [module docs](self).
#[derive(Clone)]
pub struct CircuitBreaker {
    inner: triomphe::Arc<Inner>,
}

/// Builds [`CircuitBreaker`]s that share one policy, clock, name and listener set.
///
/// ```
/// use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
/// let breaker = CircuitBreaker::builder(BreakerPolicy::default()).name("inventory").build()?;
/// # Ok::<(), breaker_core::breaker::ValidationError>(())
/// ```
pub struct BreakerBuilder {
    policy: BreakerPolicy,
    clock: Option<Clock>,
    name: Arc<str>,
    listeners: Vec<Listener>,
    totals: bool,
}

impl BreakerBuilder {
    /// Uses `clock` instead of [`Clock::system`].
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Names the breaker (shown in events, errors and metrics).
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a state-change listener; see [`Listener`].
    pub fn on_transition(mut self, f: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.listeners.push(Arc::new(f));
        self
    }

    /// Whether to keep lifetime [`Totals`] (default `true`). Totals are striped per thread
    /// (64 bytes per stripe, one stripe per CPU rounded up to a power of two, at most 64), so
    /// counting never contends; turning them off saves that memory and one uncontended atomic
    /// add per call.
    pub fn totals(mut self, on: bool) -> Self {
        self.totals = on;
        self
    }

    /// Validates the policy and builds the breaker.
    ///
    /// # Errors
    /// The policy's [`ValidationError`] if it is invalid.
    pub fn build(self) -> Result<CircuitBreaker, ValidationError> {
        Ok(self.build_factory()?.create())
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
                name: intern(&self.name),
                listeners: self.listeners,
                totals: self.totals,
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
        let policy = self.shared.policy.load();
        let window = policy.uses_window().then(|| match policy.window {
            SlidingWindow::Count(_) => WindowStore::Count(Mutex::new(GenWindow {
                generation: 0,
                window: Window::new(policy.window),
            })),
            SlidingWindow::Time { length, buckets } => {
                let buckets = buckets.max(1);
                WindowStore::Time(StripedTimeWindow::new(
                    (length.as_nanos() / u128::from(buckets)) as u64,
                    buckets,
                    totals::stripe_count(),
                ))
            }
        });
        let totals = totals.then(Striped::new);
        let heavy = (window.is_some() || totals.is_some() || key.is_some()).then(|| {
            Box::new(Heavy {
                window,
                totals,
                key,
            })
        });
        CircuitBreaker {
            inner: triomphe::Arc::new(Inner {
                state: AtomicU64::new(Word::INITIAL),
                at: AtomicU64::new(0),
                since: AtomicU64::new(0),
                consecutive: AtomicU64::new(0),
                shared: Arc::clone(&self.shared),
                heavy,
            }),
        }
    }

    /// Replaces the policy of every breaker made by this factory, keeping their state: an open
    /// breaker stays open, counts are kept. If the window's shape changed, each breaker's window
    /// is emptied at its next recorded outcome. A rate rule added to a policy that had none
    /// applies to breakers created afterwards.
    ///
    /// # Errors
    /// The new policy's [`ValidationError`]; the old policy stays in force.
    pub fn set_policy(&self, policy: BreakerPolicy) -> Result<(), ValidationError> {
        policy.validate()?;
        self.shared.hot.set(&policy);
        self.shared.policy.store(Arc::new(policy));
        Ok(())
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<BreakerPolicy> {
        self.shared.policy.load_full()
    }

    /// The clock every breaker of this factory reads (a keyed registry measures idle time
    /// with it).
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// The name of this factory's breakers.
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// Whether this factory's breakers keep lifetime totals.
    pub(crate) fn totals(&self) -> bool {
        self.shared.totals
    }
}

/// Why a call was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The breaker is open and its cooldown has not ended.
    Open,
    /// The breaker is half-open and every probe slot is taken.
    HalfOpenFull,
    /// The breaker was forced open.
    ForcedOpen,
}

impl RejectReason {
    /// A lowercase, snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::HalfOpenFull => "half_open_full",
            RejectReason::ForcedOpen => "forced_open",
        }
    }
}

/// A call rejected locally by a breaker: the dependency was not called.
///
/// This is never a failure of the dependency: it is not recorded by any breaker, it is never
/// retried, and it is a distinct variant of the pipeline's error so callers can pick a
/// fallback and metrics can tell it apart.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Rejected {
    reason: RejectReason,
    retry_after: Option<Duration>,
    name: &'static str,
    key: Option<Arc<str>>,
}

impl Rejected {
    /// Why.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The state that rejected the call.
    pub fn state(&self) -> State {
        match self.reason {
            RejectReason::Open => State::Open,
            RejectReason::HalfOpenFull => State::HalfOpen,
            RejectReason::ForcedOpen => State::ForcedOpen,
        }
    }

    /// How long until a probe may be admitted: the rest of the cooldown when open, `None` when
    /// half-open (a slot frees when a probe completes) or forced open.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The breaker's name (empty if it has none).
    pub fn name(&self) -> &str {
        self.name
    }

    /// The key of the breaker that refused, for a breaker of a keyed set
    /// ([`BreakerFactory::create_keyed`], a tagged [`Registry`](crate::registry::Registry)).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    fn describe(&self) -> String {
        let mut who = if self.name.is_empty() {
            "circuit breaker".to_string()
        } else {
            format!("circuit breaker `{}`", self.name)
        };
        if let Some(key) = &self.key {
            who.push_str(&format!(" for key `{key}`"));
        }
        match (self.reason, self.retry_after) {
            (RejectReason::Open, Some(d)) => {
                format!("{who} is open; a probe may be admitted in {d:?}")
            }
            (RejectReason::Open, None) => format!("{who} is open"),
            (RejectReason::HalfOpenFull, _) => {
                format!("{who} is half-open and every probe slot is taken")
            }
            (RejectReason::ForcedOpen, _) => format!("{who} was forced open"),
        }
    }
}

/// A point-in-time view of a breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The state (open is reported as open even if its cooldown has ended and no call has yet
    /// promoted it to half-open).
    pub state: State,
    /// The generation (transitions so far, wrapping at 2^24).
    pub generation: u32,
    /// How long the breaker has been in this state.
    pub time_in_state: Duration,
    /// When open: how long until a probe may be admitted.
    pub retry_after: Option<Duration>,
    /// Consecutive failures in the current closed period.
    pub consecutive_failures: u32,
    /// The window of the current closed period (zero if the policy has no rate rule).
    pub window: WindowCounts,
    /// Half-open: probes in flight.
    pub probes_in_flight: u32,
    /// Half-open: successful probes so far.
    pub probe_successes: u32,
    /// Lifetime totals, if kept.
    pub totals: Option<Totals>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Closed = 0,
    Probe = 1,
    Unrecorded = 2,
}

/// Permission to make one call, from [`CircuitBreaker::try_acquire`].
///
/// Record the call's outcome with [`success`](Permit::success), [`failure`](Permit::failure),
/// [`ignored`](Permit::ignored) or [`record`](Permit::record). Dropping the permit without
/// recording is a *cancellation*: neutral, the half-open slot (if any) is released and nothing
/// is counted but [`Totals::cancelled`]. Dropping it while the thread is panicking records a
/// failure. Either way the slot is released exactly once.
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct Permit<'a> {
    inner: &'a Inner,
    ticket: Ticket,
}

/// Like [`Permit`], but owns a handle to its breaker, so it is `'static` (for spawned tasks and
/// tower services).
#[must_use = "a permit should be given the call's outcome; dropping it records a cancellation"]
pub struct OwnedPermit {
    inner: triomphe::Arc<Inner>,
    ticket: Ticket,
}

/// What a permit carries: the generation it was admitted in, its kind, whether its outcome has
/// been recorded, and when it started (only under a slow-call rule).
///
/// Packed in two words, each written with one store: a permit is moved and read right after it
/// is made, and a value written in pieces and then read whole stalls the CPU's store
/// forwarding, which cost more than the rest of the closed path.
#[derive(Clone, Copy)]
struct Ticket {
    /// Bits 0..32 the generation, 32..34 the kind, bit 34 done, bit 35 whether `start` is set.
    bits: u64,
    start: u64,
}

impl Ticket {
    const DONE: u64 = 1 << 34;
    const TIMED: u64 = 1 << 35;

    #[inline(always)]
    fn new(generation: u32, kind: Kind, start: Option<u64>) -> Ticket {
        let timed = if start.is_some() { Ticket::TIMED } else { 0 };
        Ticket {
            bits: u64::from(generation) | (kind as u64) << 32 | timed,
            start: start.unwrap_or(0),
        }
    }

    #[inline(always)]
    fn generation(&self) -> u32 {
        self.bits as u32
    }

    #[inline(always)]
    fn kind(&self) -> Kind {
        match (self.bits >> 32) & 0b11 {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Unrecorded,
        }
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.bits & Ticket::DONE != 0
    }

    #[inline(always)]
    fn set_done(&mut self) {
        self.bits |= Ticket::DONE;
    }

    #[inline(always)]
    fn start(&self) -> Option<u64> {
        (self.bits & Ticket::TIMED != 0).then_some(self.start)
    }
}

macro_rules! permit_methods {
    () => {
        /// Records a success.
        #[inline(always)]
        pub fn success(self) {
            self.record(Outcome::Success)
        }

        /// Records a failure.
        pub fn failure(self) {
            self.record(Outcome::Failure)
        }

        /// Records an ignored outcome: neither success nor failure (for example a 404 for a
        /// resource that does not exist). A half-open slot is released.
        pub fn ignored(self) {
            self.record(Outcome::Ignored)
        }

        /// Records `outcome`.
        #[inline(always)]
        pub fn record(mut self, outcome: Outcome) {
            self.ticket.set_done();
            self.inner.finish(self.ticket, Some(outcome));
        }

        /// Whether this call is a half-open probe.
        pub fn is_probe(&self) -> bool {
            self.ticket.kind() == Kind::Probe
        }
    };
}

impl Permit<'_> {
    permit_methods!();

    /// Records `outcome` without moving the permit, which is inert afterwards (dropping it
    /// records nothing). For the pipeline, whose permit lives in its call's future: moving it
    /// out to consume it would copy it.
    /// Returns whether it recorded (`false` if an outcome was recorded before).
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub(crate) fn record_in_place(&mut self, outcome: Outcome) -> bool {
        if self.ticket.done() {
            return false;
        }
        self.ticket.set_done();
        self.inner.finish(self.ticket, Some(outcome));
        true
    }

    /// Whether an outcome has been recorded.
    #[cfg(all(feature = "tokio", feature = "metrics"))]
    pub(crate) fn is_done(&self) -> bool {
        self.ticket.done()
    }
}

impl OwnedPermit {
    permit_methods!();
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.ticket.done() {
            self.inner.finish(self.ticket, drop_outcome());
        }
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if !self.ticket.done() {
            self.inner.finish(self.ticket, drop_outcome());
        }
    }
}

fn drop_outcome() -> Option<Outcome> {
    std::thread::panicking().then_some(Outcome::Failure)
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("generation", &self.ticket.generation())
            .field("probe", &self.is_probe())
            .finish()
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("generation", &self.ticket.generation())
            .field("probe", &self.is_probe())
            .finish()
    }
}

impl CircuitBreaker {
    /// Starts building a breaker with `policy`.
    pub fn builder(policy: BreakerPolicy) -> BreakerBuilder {
        BreakerBuilder {
            policy,
            clock: None,
            name: Arc::from(""),
            listeners: Vec::new(),
            totals: true,
        }
    }

    /// A breaker with `policy`, the system clock, no name and no listeners.
    ///
    /// # Errors
    /// The policy's [`ValidationError`] if it is invalid.
    pub fn new(policy: BreakerPolicy) -> Result<CircuitBreaker, ValidationError> {
        Self::builder(policy).build()
    }

    /// Asks to make a call. Never blocks and never waits.
    ///
    /// # Errors
    /// [`Rejected`] if the breaker is open (cooldown not over), half-open with every probe slot
    /// taken, or forced open.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        let ticket = self.inner.acquire()?;
        Ok(Permit {
            inner: &self.inner,
            ticket,
        })
    }

    /// Like [`try_acquire`](Self::try_acquire), but the permit owns a handle to the breaker.
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        let ticket = self.inner.acquire()?;
        Ok(OwnedPermit {
            inner: triomphe::Arc::clone(&self.inner),
            ticket,
        })
    }

    /// The current state. An open breaker whose cooldown has ended still reads open until a
    /// call promotes it (recovery is lazy).
    pub fn state(&self) -> State {
        Word::decode(self.inner.state.load(Ordering::Acquire)).state
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.inner.shared.name
    }

    /// The key of a breaker made by [`BreakerFactory::create_keyed`], else `""`.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<BreakerPolicy> {
        self.inner.shared.policy.load_full()
    }

    /// Isolates the dependency: rejects every call until [`reset`](Self::reset) or
    /// [`force_closed`](Self::force_closed). Fires a [`TransitionReason::Manual`] event.
    pub fn force_open(&self) {
        self.inner.manual(State::ForcedOpen);
    }

    /// Disables the breaker: admits every call and records nothing until
    /// [`reset`](Self::reset) or [`force_open`](Self::force_open).
    pub fn force_closed(&self) {
        self.inner.manual(State::ForcedClosed);
    }

    /// Returns to a fresh closed state: every count is cleared (case BR-25), the open streak
    /// too. Calls in flight become late.
    pub fn reset(&self) {
        self.inner.manual(State::Closed);
    }

    /// How many handles share this breaker's state: this one, its clones and the
    /// [`OwnedPermit`]s in flight. A keyed registry never evicts a breaker whose count shows a
    /// handle outside the registry. The value may be stale by the time it is read.
    pub fn handle_count(&self) -> usize {
        triomphe::Arc::strong_count(&self.inner)
    }

    /// A point-in-time view of the state and counts.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// Bytes used by this breaker, heap included, not counting the shared policy: the handle,
    /// the state block, the window, the totals stripes and the key. 64 for a breaker with the
    /// consecutive-failure rule and totals off.
    pub fn memory_bytes(&self) -> usize {
        // The handle (one pointer) + the shared block: a reference count (triomphe's `Arc`
        // keeps no weak count) and `Inner`.
        let mut n = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Inner>();
        if let Some(h) = &self.inner.heavy {
            n += std::mem::size_of::<Heavy>();
            // A shared key: its two reference counts and its bytes.
            n += h
                .key
                .as_ref()
                .map_or(0, |k| 2 * std::mem::size_of::<usize>() + k.len());
            if let Some(t) = &h.totals {
                n += t.heap_bytes();
            }
            match &h.window {
                Some(WindowStore::Count(w)) => {
                    n += match &lock(w).window {
                        Window::Count { ring, .. } => ring.len(),
                        Window::Time { buckets, .. } => std::mem::size_of_val(&**buckets),
                    };
                }
                Some(WindowStore::Time(w)) => n += w.heap_bytes(),
                None => {}
            }
        }
        n
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name())
            .field("state", &self.state())
            .finish()
    }
}

#[inline]
fn micros(nanos: u64) -> u64 {
    nanos / 1_000
}

/// A deterministic draw in `[0, 1)` from the generation and the time, for cooldown jitter
/// (SplitMix64 finaliser). Deterministic under a manual clock, which keeps tests exact.
fn unit_draw(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Inner {
    fn key(&self) -> &str {
        self.heavy
            .as_ref()
            .and_then(|h| h.key.as_deref())
            .unwrap_or("")
    }

    #[inline(always)]
    fn count(&self, c: Counter) {
        if let Some(h) = &self.heavy {
            if let Some(t) = &h.totals {
                t.add(c);
            }
        }
    }

    #[inline(always)]
    fn acquire(&self) -> Result<Ticket, Rejected> {
        let w = self.state.load(Ordering::Acquire);
        if Word::raw_is_closed(w) {
            let start = if self.shared.hot.slow_nanos() != 0 {
                Some(self.shared.clock.now_nanos())
            } else {
                None
            };
            return Ok(Ticket::new(Word::raw_generation(w), Kind::Closed, start));
        }
        self.acquire_slow(w)
    }

    fn reject(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        self.count(Counter::Rejected);
        tracing::debug!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            reason = reason.as_str(),
            retry_after = ?retry_after,
            "call rejected"
        );
        Rejected {
            reason,
            retry_after,
            name: self.shared.name,
            key: self.heavy.as_ref().and_then(|h| h.key.clone()),
        }
    }

    #[cold]
    fn acquire_slow(&self, mut raw: u64) -> Result<Ticket, Rejected> {
        loop {
            let w = Word::decode(raw);
            match w.state {
                State::Closed => return self.acquire(),
                State::ForcedClosed => {
                    return Ok(Ticket::new(w.generation, Kind::Unrecorded, None));
                }
                State::ForcedOpen => return Err(self.reject(RejectReason::ForcedOpen, None)),
                State::Open => {
                    let now = self.shared.clock.now_nanos();
                    let until = match unpack_stamp(self.at.load(Ordering::Acquire), w.generation) {
                        Some(until) => until,
                        // The transition into this state has not stamped its deadline yet:
                        // the breaker has just opened.
                        None => {
                            let cd = self.shared.policy.load().cooldown_for(w.streak);
                            return Err(self.reject(RejectReason::Open, Some(cd)));
                        }
                    };
                    let now_us = micros(now);
                    if now_us < until {
                        let left = Duration::from_micros(until - now_us);
                        return Err(self.reject(RejectReason::Open, Some(left)));
                    }
                    let mut next = w.transition(State::HalfOpen, w.streak);
                    next.in_flight = 1;
                    match self.cas(raw, next) {
                        Ok(()) => {
                            self.stamp_entry(next.generation, now);
                            self.at
                                .store(pack_stamp(now_us, next.generation), Ordering::Release);
                            self.emit(
                                w.state,
                                next,
                                TransitionReason::CooldownElapsed,
                                now,
                                None,
                                WindowCounts::default(),
                                0,
                            );
                            return Ok(self.probe_ticket(next.generation));
                        }
                        Err(actual) => raw = actual,
                    }
                }
                State::HalfOpen => {
                    let policy = self.shared.policy.load();
                    if w.in_flight < policy.half_open_probes {
                        let next = Word {
                            in_flight: w.in_flight + 1,
                            ..w
                        };
                        match self.cas(raw, next) {
                            Ok(()) => {
                                let now = self.shared.clock.now_nanos();
                                self.at.store(
                                    pack_stamp(micros(now), w.generation),
                                    Ordering::Release,
                                );
                                return Ok(self.probe_ticket(w.generation));
                            }
                            Err(actual) => {
                                raw = actual;
                                continue;
                            }
                        }
                    }
                    // Every slot is taken. A probe hung past `max_probe_wait` must not wedge
                    // the breaker: start a new half-open period (BR-04's design point).
                    let wait = policy
                        .max_probe_wait
                        .unwrap_or_else(|| policy.cooldown_for(w.streak));
                    let now = self.shared.clock.now_nanos();
                    let newest = unpack_stamp(self.at.load(Ordering::Acquire), w.generation);
                    let expired = newest.is_some_and(|t| {
                        micros(now).saturating_sub(t)
                            >= u64::try_from(wait.as_micros()).unwrap_or(u64::MAX)
                    });
                    if !expired {
                        return Err(self.reject(RejectReason::HalfOpenFull, None));
                    }
                    let mut next = w.transition(State::HalfOpen, w.streak);
                    next.in_flight = 1;
                    match self.cas(raw, next) {
                        Ok(()) => {
                            self.stamp_entry(next.generation, now);
                            self.at
                                .store(pack_stamp(micros(now), next.generation), Ordering::Release);
                            self.emit(
                                w.state,
                                next,
                                TransitionReason::ProbeExpired,
                                now,
                                None,
                                WindowCounts::default(),
                                0,
                            );
                            return Ok(self.probe_ticket(next.generation));
                        }
                        Err(actual) => raw = actual,
                    }
                }
            }
        }
    }

    fn probe_ticket(&self, generation: u32) -> Ticket {
        let start = (self.shared.hot.slow_nanos() != 0).then(|| self.shared.clock.now_nanos());
        Ticket::new(generation, Kind::Probe, start)
    }

    #[inline]
    fn cas(&self, current: u64, next: Word) -> Result<(), u64> {
        self.state
            .compare_exchange(current, next.encode(), Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }

    fn stamp_entry(&self, generation: u32, now: u64) {
        self.since
            .store(pack_stamp(micros(now), generation), Ordering::Release);
    }

    /// Fires the listeners for a transition this thread won.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        from: State,
        to: Word,
        reason: TransitionReason,
        now: u64,
        cooldown: Option<Duration>,
        window: WindowCounts,
        consecutive_failures: u32,
    ) {
        if to.state == State::Open {
            self.count(Counter::Opened);
        }
        tracing::info!(
            target: "breaker",
            breaker = self.shared.name,
            key = self.key(),
            from = from.as_str(),
            to = to.state.as_str(),
            reason = reason.as_str(),
            generation = to.generation,
            consecutive_failures,
            window_calls = window.calls,
            window_failures = window.failures,
            window_slow = window.slow,
            cooldown = ?cooldown,
            "circuit breaker state transition"
        );
        if self.shared.listeners.is_empty() {
            return;
        }
        let event = Transition {
            name: Arc::from(self.shared.name),
            from,
            to: to.state,
            reason,
            at: Duration::from_nanos(now),
            generation: to.generation,
            window,
            consecutive_failures,
            cooldown,
        };
        for l in &self.shared.listeners {
            l(&event);
        }
    }

    /// Moves from `raw` (a word of state `from`) to open with a fresh cooldown. Returns whether
    /// this thread won the transition.
    fn open(
        &self,
        raw: u64,
        reason: TransitionReason,
        window: WindowCounts,
        consecutive: u32,
    ) -> Result<(), u64> {
        let w = Word::decode(raw);
        let streak = if w.state == State::Closed {
            1
        } else {
            w.streak.saturating_add(1).min(0xff)
        };
        let next = w.transition(State::Open, streak);
        self.cas(raw, next)?;
        let now = self.shared.clock.now_nanos();
        let policy = self.shared.policy.load();
        let base = policy.cooldown_for(streak);
        let cooldown = if policy.cooldown_jitter > 0.0 {
            let u = unit_draw(now ^ (u64::from(next.generation) << 40));
            base.mul_f64(1.0 - policy.cooldown_jitter * u)
        } else {
            base
        };
        let until =
            micros(now).saturating_add(u64::try_from(cooldown.as_micros()).unwrap_or(u64::MAX));
        self.at
            .store(pack_stamp(until, next.generation), Ordering::Release);
        self.stamp_entry(next.generation, now);
        self.emit(
            w.state,
            next,
            reason,
            now,
            Some(cooldown),
            window,
            consecutive,
        );
        Ok(())
    }

    fn manual(&self, to: State) {
        let mut raw = self.state.load(Ordering::Acquire);
        loop {
            let w = Word::decode(raw);
            let next = w.transition(to, 0);
            match self.cas(raw, next) {
                Ok(()) => {
                    let now = self.shared.clock.now_nanos();
                    self.stamp_entry(next.generation, now);
                    self.emit(
                        w.state,
                        next,
                        TransitionReason::Manual,
                        now,
                        None,
                        WindowCounts::default(),
                        0,
                    );
                    return;
                }
                Err(actual) => raw = actual,
            }
        }
    }

    /// Applies a permit's end: `None` is a cancellation.
    #[inline(always)]
    fn finish(&self, t: Ticket, outcome: Option<Outcome>) {
        self.count(match outcome {
            Some(Outcome::Success) => Counter::Succeeded,
            Some(Outcome::Failure) => Counter::Failed,
            Some(Outcome::Ignored) => Counter::Ignored,
            None => Counter::Cancelled,
        });
        match t.kind() {
            Kind::Unrecorded => {}
            Kind::Closed => self.finish_closed(t, outcome),
            Kind::Probe => self.finish_probe(t, outcome),
        }
    }

    #[inline(always)]
    fn finish_closed(&self, t: Ticket, outcome: Option<Outcome>) {
        let failure = match outcome {
            Some(Outcome::Success) => false,
            Some(Outcome::Failure) => true,
            // Ignored and cancelled calls are neutral in closed state.
            _ => return,
        };
        let raw = self.state.load(Ordering::Acquire);
        if !Word::raw_is_closed(raw) || Word::raw_generation(raw) != t.generation() {
            self.count(Counter::Late);
            return;
        }
        let threshold = self
            .shared
            .hot
            .consecutive
            .load(std::sync::atomic::Ordering::Relaxed);
        if threshold != 0 {
            if let Some(count) = self.bump_consecutive(t.generation(), failure) {
                if count >= threshold
                    && self
                        .open(
                            raw,
                            TransitionReason::ConsecutiveFailures,
                            WindowCounts::default(),
                            count,
                        )
                        .is_ok()
                {
                    return;
                }
            }
        }
        if let Some(window) = self.heavy.as_ref().and_then(|h| h.window.as_ref()) {
            self.record_window(window, t, failure, raw);
        }
    }

    /// Updates the consecutive-failure count of `generation`; returns the count after a
    /// failure, `None` after a success or if the count belongs to a newer generation.
    #[inline]
    fn bump_consecutive(&self, generation: u32, failure: bool) -> Option<u32> {
        let mut cur = self.consecutive.load(Ordering::Acquire);
        loop {
            let (g, n) = unpack_count(cur);
            let n = if g == generation {
                n
            } else if newer(generation, g) {
                0 // first touch in this closed period: the count starts over (BR-25)
            } else {
                return None; // a newer period owns the counter
            };
            let next = if failure {
                pack_count(generation, n.saturating_add(1))
            } else if n == 0 {
                return None; // the common success path: nothing to write
            } else {
                pack_count(generation, 0)
            };
            match self.consecutive.compare_exchange_weak(
                cur,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return failure.then_some(n + 1),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Whether the call of `t`, ending at `now`, was slow under the slow-call rule in force.
    fn is_slow(&self, t: &Ticket, now: u64) -> bool {
        let limit = self.shared.hot.slow_nanos();
        limit != 0
            && t.start()
                .is_some_and(|start| now.saturating_sub(start) >= limit)
    }

    fn record_window(&self, store: &WindowStore, t: Ticket, failure: bool, raw: u64) {
        let now = self.shared.clock.now_nanos();
        let slow = self.is_slow(&t, now);
        let window = match store {
            WindowStore::Count(window) => window,
            WindowStore::Time(w) => {
                let min_calls = self
                    .shared
                    .hot
                    .min_calls
                    .load(std::sync::atomic::Ordering::Relaxed);
                if let Some(counts) = w.record(t.generation(), now, failure, slow, min_calls) {
                    self.evaluate(&self.shared.policy.load(), counts, raw);
                }
                return;
            }
        };
        let policy = self.shared.policy.load();
        let counts = {
            let mut g = lock(window);
            if g.generation != t.generation() {
                if !newer(t.generation(), g.generation) {
                    drop(g);
                    self.count(Counter::Late);
                    return;
                }
                g.generation = t.generation();
                g.window.clear();
            }
            if !g.window.has_shape(policy.window) {
                g.window = Window::new(policy.window);
            }
            g.window.record(Sample { failure, slow }, now)
        };
        self.evaluate(&policy, counts, raw);
    }

    /// Checks the rate rules against `counts`, after an outcome recorded in the closed state
    /// `raw`, and trips if one fires.
    fn evaluate(&self, policy: &BreakerPolicy, counts: WindowCounts, raw: u64) {
        if counts.calls < policy.min_calls {
            return;
        }
        // One fixed comparison, `>=`, after every recorded outcome (BR-14, BR-17).
        let reason = if policy
            .failure_rate_percent
            .is_some_and(|p| counts.failure_rate() >= p)
        {
            TransitionReason::FailureRate
        } else if policy
            .slow_call
            .is_some_and(|s| counts.slow_rate() >= s.rate_percent)
        {
            TransitionReason::SlowCallRate
        } else {
            return;
        };
        let _ = self.open(raw, reason, counts, 0);
    }

    fn finish_probe(&self, t: Ticket, outcome: Option<Outcome>) {
        let policy = self.shared.policy.load();
        let outcome = match outcome {
            Some(Outcome::Ignored) if policy.neutral_probe == NeutralProbe::CountAsSuccess => {
                Some(Outcome::Success)
            }
            o => o,
        };
        // A ticket has a start only if a slow-call rule was set when it was admitted.
        let slow = t.start().is_some() && self.is_slow(&t, self.shared.clock.now_nanos());
        let mut raw = self.state.load(Ordering::Acquire);
        loop {
            let w = Word::decode(raw);
            if w.state != State::HalfOpen || w.generation != t.generation() {
                // A probe of an earlier half-open period: it holds no slot of this one
                // (BR-12). Cancellations of stale probes are not "late results".
                if outcome.is_some() {
                    self.count(Counter::Late);
                }
                return;
            }
            let result = match outcome {
                // A slow probe counts as a failed probe when a slow-call rule is set.
                Some(Outcome::Failure) => self.open(
                    raw,
                    TransitionReason::ProbeFailed,
                    WindowCounts::default(),
                    0,
                ),
                Some(Outcome::Success) if slow => self.open(
                    raw,
                    TransitionReason::SlowCallRate,
                    WindowCounts::default(),
                    0,
                ),
                Some(Outcome::Success) => {
                    let successes = w.successes + 1;
                    if successes >= policy.successes_to_close {
                        let next = w.transition(State::Closed, 0);
                        self.cas(raw, next).map(|()| {
                            let now = self.shared.clock.now_nanos();
                            self.stamp_entry(next.generation, now);
                            self.emit(
                                w.state,
                                next,
                                TransitionReason::ProbesSucceeded,
                                now,
                                None,
                                WindowCounts::default(),
                                0,
                            );
                        })
                    } else {
                        self.cas(
                            raw,
                            Word {
                                successes,
                                in_flight: w.in_flight.saturating_sub(1),
                                ..w
                            },
                        )
                    }
                }
                // Ignored or cancelled: release the slot, no verdict (BR-01, BR-03, BR-08).
                _ => self.cas(
                    raw,
                    Word {
                        in_flight: w.in_flight.saturating_sub(1),
                        ..w
                    },
                ),
            };
            match result {
                Ok(()) => return,
                Err(actual) => raw = actual,
            }
        }
    }

    fn snapshot(&self) -> Snapshot {
        let raw = self.state.load(Ordering::Acquire);
        let w = Word::decode(raw);
        let now = self.shared.clock.now_nanos();
        let now_us = micros(now);
        let time_in_state = unpack_stamp(self.since.load(Ordering::Acquire), w.generation)
            .map(|t| Duration::from_micros(now_us.saturating_sub(t)))
            .unwrap_or_default();
        let retry_after = (w.state == State::Open).then(|| {
            unpack_stamp(self.at.load(Ordering::Acquire), w.generation)
                .map(|until| Duration::from_micros(until.saturating_sub(now_us)))
                .unwrap_or_else(|| self.shared.policy.load().cooldown_for(w.streak))
        });
        let (consecutive_failures, window) = if w.state == State::Closed {
            let (g, n) = unpack_count(self.consecutive.load(Ordering::Acquire));
            let window = match self.heavy.as_ref().and_then(|h| h.window.as_ref()) {
                Some(WindowStore::Count(m)) => {
                    let mut g = lock(m);
                    if g.generation == w.generation {
                        g.window.counts(now)
                    } else {
                        WindowCounts::default()
                    }
                }
                Some(WindowStore::Time(s)) => s.counts(w.generation, now),
                None => WindowCounts::default(),
            };
            (if g == w.generation { n } else { 0 }, window)
        } else {
            (0, WindowCounts::default())
        };
        Snapshot {
            state: w.state,
            generation: w.generation,
            time_in_state,
            retry_after,
            consecutive_failures,
            window,
            probes_in_flight: if w.state == State::HalfOpen {
                w.in_flight
            } else {
                0
            },
            probe_successes: if w.state == State::HalfOpen {
                w.successes
            } else {
                0
            },
            totals: self
                .heavy
                .as_ref()
                .and_then(|h| h.totals.as_ref())
                .map(Striped::sum),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
