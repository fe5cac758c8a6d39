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
//!   their memory (72 bytes each with the consecutive-failure rule and the defaults, lifetime
//!   totals off: [`CircuitBreaker::memory_bytes`]).
//! - **One state word, pure decisions.** The state, the generation, the open streak and the
//!   half-open probe counts live in one `AtomicU64`. Every decision (admit a call, end a probe,
//!   trip, a manual change) is a pure function of that word, `now` and the policy's limits
//!   (`rules.rs`), applied by one compare-and-swap loop, so exactly one thread wins each
//!   transition. Admitting a probe is one compare-and-swap that reserves the slot.
//! - **One transition path.** The thread that won a transition does what every transition does
//!   in one function (`entered` in `machine/entered.rs`): the entry stamp and the deadline, the totals
//!   (if kept), the `tracing` event, the [`Listener`]s and the process-wide
//!   watchers ([`watch_transitions`]).
//! - **Generations.** Every [`Permit`] remembers the generation that admitted it. An outcome
//!   recorded after the state has moved on is *late*: it is counted in [`Totals::late`] (if
//!   the breaker keeps totals) and changes nothing (cases BR-10, BR-12). The same generation
//!   fences the stamps written after a transition: a writer that was delayed never overwrites
//!   a newer generation's deadline.
//! - **RAII permits.** [`CircuitBreaker::try_acquire`] returns a [`Permit`]; recording consumes
//!   it. A permit dropped without an outcome is a cancellation (neutral, slot released); a
//!   permit dropped while the thread panics is a failure.
//! - **Injected clock.** All timing goes through a monotonic [`Clock`](crate::clock::Clock);
//!   tests drive it by hand or with tokio's paused clock (case BR-23). Stamps are microseconds
//!   on a 48-bit circle compared in serial arithmetic, so any clock origin works; cooldowns are
//!   bounded by [`MAX_COOLDOWN`] (365 days) to stay well inside what that arithmetic tells
//!   apart.
//! - **An open breaker's rejections read the coarse clock.** With the system clock, a call to
//!   an open breaker whose cooldown has more than the coarse clock's resolution (a kernel tick,
//!   4 ms with `HZ=250`) plus 0.1 % of the rest to go is rejected after one read of the
//!   operating system's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`, a memory read) and a
//!   compare with a hint the opening left in the consecutive-failure counter; nearer the
//!   deadline, the precise clock decides as before. The hint is computed from a coarse reading
//!   taken *before* the precise one and lowered by that margin, so a coarse "not yet" is
//!   always a precise "not yet": recovery is never later than with the precise clock alone, and
//!   the rejection's `retry_after` may read up to the margin early. The first call after the
//!   deadline moves the breaker on and retires the hint with its generation; the hint is 40
//!   bits of ~1 ms units, so even a breaker no call reaches for years never reads an expired
//!   hint as a live one (`an_expired_hint_is_never_read_as_a_live_one`). No task or timer is
//!   involved. Proved by `tests/breaker_open_coarse.rs` (two manual sources: lags of up to the
//!   resolution and rate errors of 0.05 % either way, the first probe exactly at the precise
//!   deadline). The tokio, manual and custom clocks have no coarse source
//!   ([`Clock::custom_with_coarse`](crate::clock::Clock::custom_with_coarse) gives one).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
//! use breaker::clock::{Clock, ManualClock};
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
//!
//! # Invariants, and the tests that prove them
//! - **Probe bound.** At most `half_open_probes` probes admitted within any probe wait are in
//!   flight, across all clones: the slot is reserved by the compare-and-swap that checks it,
//!   and a probe held past `max_probe_wait` (the cooldown when unset) lets one more in, in the
//!   same half-open period, so its late result still counts (a slow probe is not a lost one).
//!   Without hung probes that is at most `half_open_probes` in flight. Each admission decides
//!   with a clock reading taken after the word it decides on, so the newest probe's stamp is
//!   never older than a probe that admission sees, and a takeover keeps its slot only if the
//!   stamp it decided on is still the newest after its swap. Proved by the loom models
//!   `never_more_than_k_probes_in_flight`,
//!   `a_stale_reading_never_dates_the_first_probe_of_a_period` and
//!   `a_takeover_never_rides_on_a_restored_word` (`tests/loom.rs`), the
//!   property test against a sequential model (`tests/breaker_model.rs`), the stress test
//!   `stress_rounds_keep_the_invariants` (`stress.rs`) and cases BR-03, BR-04, BR-12.
//! - **Exactly-once release.** Every admitted call ends once (recorded, cancelled by drop, or
//!   failed by a panic), and a probe's slot is released only by the decision of its own
//!   generation. Proved by the loom models `never_more_than_k_probes_in_flight` and
//!   `racing_probe_outcomes_leave_no_slot_held`, the property test's permit conservation, the
//!   stress test, and cases BR-01, BR-03, BR-13.
//! - **No dead end.** Whatever the interleaving, once no call is in flight and the longest
//!   cooldown (`cooldown_max` with growth; jitter only shortens it) plus the probe wait has
//!   passed, the next call is admitted, as a probe or closed. Stamps written after a swap are
//!   fenced by the generation, and a reader that finds the generation in force unstamped stamps
//!   it itself, so "just opened" lasts at most one cooldown. Proved by the deterministic
//!   interleavings, one per transition that writes after its swap
//!   (`tests/breaker_interleavings.rs`), the loom models `no_dead_end_*` whose clock read is a
//!   yield point, the stress test, and the property test.
//! - **Stale results ignored.** An outcome from an earlier generation never causes a
//!   transition, never emits an event and never touches the current generation's counts; it is
//!   counted as [`Totals::late`] where totals are kept. Proved by cases BR-10, BR-12, the unit
//!   test `permits_from_before_a_manual_change_are_late`, and the loom
//!   model `concurrent_failures_trip_once`.
//!
//! # Where the word lives: the seam for shared state
//! Nothing in the decisions knows that the word is an `AtomicU64`: `rules.rs` takes a word, the
//! stamp it needs, `now` and [`BreakerPolicy`]-derived limits, and returns the next word and
//! what happened. A fleet-wide breaker keeps the same word (and its stamps) in a shared store
//! such as Redis, runs the same decisions over it with the store's compare-and-set, and mirrors
//! each transition into every process's local breaker with the hidden, unstable
//! `CircuitBreaker::apply_remote` (`remote.rs`): a remote trip, close or forced state, with an
//! open deadline given as an instant of the local clock. It takes the local path: the same
//! update loop and the same `entered`, so stamps, totals, `tracing` and listeners behave as for
//! a local transition, and the event names who decided it ([`Transition::origin`]).
//!
//! The backend reaches every caller of a breaker through a fleet hook the breaker holds (set
//! once, hidden and unstable: `CircuitBreaker::install_fleet_hook`, `remote.rs`): closed
//! outcomes are counted in the breaker (a relaxed add and a relaxed load), and only a granted
//! probe slot, a probe's end and a local trip call the hook. So a `Pipeline`, the tower layers,
//! a keyed registry and `#[circuit_breaker(scope = "shared")]` run a shared breaker without
//! knowing it; a breaker without a hook pays one load of an empty cell per closed outcome.
//!
//! # Policy reloads
//! [`BreakerFactory::set_policy`] swaps the policy of every breaker a factory made, keeping
//! their state. A new window shape (another count, length or bucket count, or the other kind of
//! window) gives each breaker a new, empty window of that shape at its next recorded outcome
//! (`store.rs`).
//!
//! # Files
//! - The word and the rules: `state.rs` (the word, the stamps, the counters), `rules.rs` (every
//!   decision, pure; `decide.rs` makes them public to a fleet backend).
//! - The machine that applies them to the word in this process: `machine/` (admission, the
//!   ends of calls, the closed state's rules, the open hint, what every transition does).
//! - What a breaker keeps: `store.rs` (the window in force across reloads), `ring.rs` and
//!   `striped.rs` (the count and time windows), `window.rs` (their totals), `totals.rs`.
//! - Building: `policy.rs` and `defaults.rs`, `builder.rs`, `factory.rs`, `shared.rs` (what the
//!   breakers of one configuration share).
//! - What a caller holds: this file (`CircuitBreaker`), `permit.rs`, `rejected.rs`,
//!   `snapshot.rs`, `event.rs`; `remote.rs` (the fleet hook and remote transitions).

mod builder;
#[doc(hidden)]
pub mod decide;
pub(crate) mod defaults;
mod event;
mod factory;
mod machine;
mod permit;
mod policy;
mod rejected;
mod remote;
mod ring;
mod rules;
mod shared;
mod snapshot;
mod state;
mod store;
mod striped;
mod totals;
mod watch;
mod window;

pub use builder::BreakerBuilder;
pub use event::{Listener, Transition, TransitionReason};
pub use factory::BreakerFactory;
pub use permit::{OwnedPermit, Permit};
pub use policy::{
    BreakerPolicy, FieldError, NeutralProbe, SlidingWindow, SlowCall, ValidationError,
    MAX_COOLDOWN, MAX_COUNT_WINDOW, MAX_HALF_OPEN_PROBES, MAX_SUCCESSES_TO_CLOSE,
};
pub use rejected::{RejectReason, Rejected};
#[doc(hidden)]
pub use remote::{
    install_backend, installed_backend, share_created, share_in_scope, share_with, FleetBackend,
    FleetCounts, FleetHook, FleetProbe, FleetProbeEnd, FleetTaken, HookError, RemoteTransition,
    ShareError,
};
pub use snapshot::Snapshot;
pub use state::State;
pub use totals::Totals;
pub use watch::{watch_transitions, BreakerId, Watch};
pub use window::WindowCounts;

#[cfg(test)]
use crate::clock::Clock;
use crate::sync::Ordering;
use machine::{Heavy, Inner};
use permit::Ticket;
use state::Word;
use std::fmt;
use std::sync::Arc;
#[cfg(test)]
use std::time::Duration;

/// A circuit breaker. Cloning is cheap and clones share one state: a probe limit or a failure
/// count applies across all of them (case BR-03). See the [module docs](self).
#[derive(Clone)]
pub struct CircuitBreaker {
    inner: triomphe::Arc<Inner>,
}

impl CircuitBreaker {
    /// Starts building a breaker with `policy`.
    pub fn builder(policy: BreakerPolicy) -> BreakerBuilder {
        BreakerBuilder::new(policy)
    }

    /// A breaker with `policy`, the system clock, no name, no listeners and no lifetime
    /// totals: `CircuitBreaker::builder(policy).build()`.
    ///
    /// Breakers made this way on one thread in a row with equal policies share one
    /// configuration block (see [`BreakerBuilder::build`]), so each costs one heap block: 72
    /// bytes with its handle for the consecutive-failure rule (see
    /// [`memory_bytes`](Self::memory_bytes); a sliding window adds its own).
    ///
    /// # Errors
    /// The policy's [`ValidationError`] if it is invalid.
    // Not `#[inline]`: inlined, the by-value policy is copied into the caller's frame before
    // the cache reads it (152 bytes, a `memcpy` per breaker); called, it is read in place.
    pub fn new(policy: BreakerPolicy) -> Result<CircuitBreaker, ValidationError> {
        #[cfg(not(loom))]
        return builder::default_breaker(&policy, false);
        #[cfg(loom)]
        Self::builder(policy).build()
    }

    /// Asks to make a call. Never blocks and never waits.
    ///
    /// # Errors
    /// [`Rejected`] if the breaker is open (cooldown not over), half-open with every probe slot
    /// taken, or forced open.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        // The closed path inline (two loads). An open breaker's rejection by its hint is
        // decided out of line, with its event and its count, and its answer in registers
        // (`Inner::reject_by_hint`: no pointer to this result is kept across the coarse
        // clock's call); its `Rejected` (a plain value) is written here, so a caller that
        // drops it unread writes none of it. Every other admission goes through the update
        // loop, out of line.
        let raw = self.inner.state.load(Ordering::Acquire);
        if Word::raw_is_closed(raw) {
            return Ok(Permit {
                inner: &self.inner,
                ticket: self.inner.closed_ticket(raw),
            });
        }
        match self.inner.reject_by_hint(raw) {
            Some(left) => Err(self.inner.reject_open(left)),
            None => self.try_acquire_slow().map(|ticket| Permit {
                inner: &self.inner,
                ticket,
            }),
        }
    }

    /// The update loop's admission, from a fresh reading of the word (any reading will do:
    /// the loop decides on the word it swaps against).
    #[cold]
    #[inline(never)]
    fn try_acquire_slow(&self) -> Result<Ticket, Rejected> {
        let raw = self.inner.state.load(Ordering::Acquire);
        self.inner.acquire_slow(raw)
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
    pub(crate) fn handle_count(&self) -> usize {
        // A fleet hook holds one handle (to apply the fleet's transitions); it is not a
        // handle outside the registry.
        triomphe::Arc::strong_count(&self.inner) - usize::from(self.inner.fleet().is_some())
    }

    /// A point-in-time view of the state and counts.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// Bytes used by this breaker, heap included, not counting the shared policy or a fleet
    /// hook: the handle, the state block, the block of optional parts (made for a window,
    /// totals, a key or a fleet hook), the window, the totals stripes and the key. 72
    /// on a 64-bit target for a breaker with the consecutive-failure rule, totals off, no key
    /// and no fleet hook, named or not.
    pub fn memory_bytes(&self) -> usize {
        // The handle (one pointer) + the shared block: a reference count (triomphe's `Arc`
        // keeps no weak count) and `Inner`.
        let mut n = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Inner>();
        if let Some(h) = self.inner.heavy() {
            n += std::mem::size_of::<Heavy>();
            // A shared key: its two reference counts and its bytes.
            n += h
                .key
                .as_ref()
                .map_or(0, |k| 2 * std::mem::size_of::<usize>() + k.len());
            n += h.totals.as_ref().map_or(0, |t| t.heap_bytes());
            n += h.window.as_ref().map_or(0, |w| {
                std::mem::size_of::<store::WindowSlot>() + w.heap_bytes()
            });
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

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
mod stress;
