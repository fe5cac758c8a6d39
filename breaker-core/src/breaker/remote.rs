//! Applying a transition decided elsewhere: the seam for a fleet-wide (shared-state) breaker.
//!
//! A breaker shared by several processes keeps its state word in a shared store and decides
//! over it with the pure functions of `rules.rs`. Each process then mirrors the shared
//! decision into its local breaker with [`CircuitBreaker::apply_remote`], which goes through the
//! local machine's one path: the update loop (the local generation is bumped, so local calls in
//! flight become late) and `entered` (stamps, totals, `tracing`, listeners), with the deciding
//! replica named in [`Transition::origin`](super::Transition::origin) and in the `tracing`
//! event's `origin` field.
//!
//! # The fleet hook
//! A breaker can also carry a [`FleetHook`] ([`CircuitBreaker::install_fleet_hook`], set once),
//! so that *every* caller of the breaker (the plain API, a `Pipeline`, the tower layers,
//! `#[circuit_breaker]`, a keyed registry) runs it as a fleet-wide breaker. The breaker consults
//! it only where it must:
//!
//! - **Closed path**: a success or failure adds one to a [`FleetCounts`] counter (a relaxed
//!   add) and reads its `active` flag (a relaxed load); the hook is called only when the flag
//!   is clear (the first outcome since the hook last took the counts) and when the failures
//!   reach the hook's early-flush bound. No virtual call otherwise.
//! - **Half-open probes**: when the local machine grants a probe slot, the hook decides
//!   ([`FleetHook::admit_probe`]): a fleet lease (a token kept in the permit), a local probe
//!   (store degraded), or a rejection (the local slot is released as a cancellation first).
//! - **Probe ends**: a leased probe's end (success, failure, ignored, cancelled by drop, failed
//!   by a panic) returns its lease through [`FleetHook::end_probe`], once.
//! - **Local trips**: a closed -> open transition decided here is reported
//!   ([`FleetHook::local_trip`]), with its exact reason.
//!
//! A breaker without a hook pays one load of an empty cell per recorded closed outcome.
//!
//! Hidden and unstable: an entry point for the shared-state backend, not for applications.

use super::event::TransitionReason;
use super::machine::Cause;
use super::permit::{OwnedPermit, Permit};
use super::rejected::{RejectReason, Rejected};
use super::state::{State, Word};
use super::CircuitBreaker;
use crate::scope::Scope;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a [`FleetHook`] decides for a probe slot the local machine granted.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetProbe {
    /// The probe runs with a fleet lease; `token` (below [`FleetProbe::MAX_TOKEN`]) comes back
    /// with its end ([`FleetHook::end_probe`]).
    Leased(u32),
    /// The probe runs by the local rules alone (the store is degraded).
    Local,
    /// The call is rejected with this reason (the local slot is released first).
    Reject(RejectReason),
}

impl FleetProbe {
    /// The largest token a permit can carry (27 bits).
    pub const MAX_TOKEN: u32 = (1 << 27) - 1;
}

/// How a leased probe ended, as the fleet counts it: a slow success is a failure (as the local
/// machine counts it); an ignored outcome is a success under
/// [`NeutralProbe::CountAsSuccess`](super::NeutralProbe::CountAsSuccess), else neutral; a
/// cancellation is neutral; a panic is a failure.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetProbeEnd {
    /// Succeeded.
    Success,
    /// Failed (or slow, or panicked).
    Failure,
    /// Neither (ignored, or cancelled).
    Neutral,
}

/// The closed-path counts of a hooked breaker, written by the breaker with relaxed atomics and
/// taken by the hook ([`CircuitBreaker::take_fleet_counts`]).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct FleetCounts {
    pub(crate) successes: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) slow: AtomicU64,
    /// Set by [`FleetHook::activated`]'s caller once per take: while set, recording an outcome
    /// calls nothing.
    pub(crate) active: AtomicBool,
    /// [`FleetHook::failures_reached`] is called when the failures since the last take reach
    /// this (0: never).
    pub(crate) early: u64,
}

/// Outcome counts taken from a [`FleetCounts`].
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetTaken {
    /// Successful closed calls.
    pub successes: u64,
    /// Failed closed calls.
    pub failures: u64,
    /// Slow closed calls (also counted as successes or failures).
    pub slow: u64,
}

/// What a fleet-wide backend hooks into a breaker; see the [module docs](self). Every method is
/// called on a caller's thread, from inside a call to the breaker (never while the breaker holds
/// a lock): keep them short and non-blocking.
#[doc(hidden)]
pub trait FleetHook: Send + Sync + 'static {
    /// The first closed outcome since the counts were last taken was recorded.
    fn activated(&self);
    /// The failures since the last take reached the early bound (`n`).
    fn failures_reached(&self, n: u64);
    /// The local machine granted a probe slot in local generation `generation`.
    fn admit_probe(&self, generation: u32) -> FleetProbe;
    /// A probe admitted with [`FleetProbe::Leased`]`(token)` ended.
    fn end_probe(&self, token: u32, end: FleetProbeEnd);
    /// The breaker tripped here (closed -> open, decided by this process's rules) into local
    /// generation `generation`.
    fn local_trip(&self, generation: u32, reason: TransitionReason);
}

/// A breaker's installed hook and its counts.
pub(crate) struct FleetSlot {
    pub(crate) counts: FleetCounts,
    pub(crate) hook: Arc<dyn FleetHook>,
}

/// Why [`CircuitBreaker::install_fleet_hook`] refused.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The breaker has a hook already (it is shared already).
    Installed,
    /// The breaker was made without room for a hook: by a [`BreakerFactory`](super::BreakerFactory)
    /// or [`CircuitBreaker::new`] with lifetime totals off (the default), no sliding window and
    /// no key (the 64-byte breaker).
    NoRoom,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Installed => f.write_str("the breaker is shared already"),
            HookError::NoRoom => f.write_str(
                "the breaker has no room for sharing: it was made without lifetime totals, \
                 a sliding window or a key, by a factory or `CircuitBreaker::new`; build it \
                 named with `BreakerBuilder::build`, or turn totals on \
                 (`BreakerBuilder::totals(true)`)",
            ),
        }
    }
}

impl std::error::Error for HookError {}

/// A transition decided elsewhere, to apply to a local breaker.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteTransition {
    /// The state to enter.
    pub to: State,
    /// Why the deciding replica made the transition.
    pub reason: TransitionReason,
    /// For `to == State::Open`: when the cooldown ends, as a reading of this breaker's clock
    /// (nanoseconds, [`Clock::now_nanos`](crate::clock::Clock::now_nanos)); at most
    /// [`MAX_COOLDOWN`](super::MAX_COOLDOWN) ahead is honoured. `None`: the local policy's
    /// cooldown.
    pub open_until: Option<u64>,
    /// The open streak entered (consecutive openings since the breaker last closed, as the
    /// deciding replica counts them; it picks the grown cooldown and the default probe wait).
    /// `None`: the local rule (one more than the local streak when opening, else 0).
    pub streak: Option<u32>,
    /// Who decided it (a replica id).
    pub origin: Arc<str>,
}

impl CircuitBreaker {
    /// Enters `t.to` whatever the local state, as decided by `t.origin`; see the
    /// [module docs](super#where-the-word-lives-the-seam-for-shared-state). Returns the local
    /// generation entered.
    #[doc(hidden)]
    pub fn apply_remote(&self, t: RemoteTransition) -> u32 {
        let cause = Cause {
            open_until: t.open_until.filter(|_| t.to == State::Open),
            origin: Some(t.origin),
            ..Cause::default()
        };
        self.inner.force(t.to, t.reason, t.streak, cause).generation
    }

    /// The state and the local generation in force, from one read of the state word (for a
    /// shared-state backend telling a local trip from one it applied). One atomic load.
    #[doc(hidden)]
    #[inline]
    pub fn state_and_generation(&self) -> (State, u32) {
        let w = Word::decode(self.inner.state.load(Ordering::Acquire));
        (w.state, w.generation)
    }

    /// A rejection decided outside this breaker (a shared-state backend's: no fleet probe
    /// lease, or the store unreachable in a rejecting mode), counted, traced and named as one
    /// of this breaker's own.
    #[doc(hidden)]
    pub fn rejection(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        self.inner.reject(reason, retry_after)
    }
}

// --- The process's sharer ------------------------------------------------------------------------

/// Gives a breaker of a shared scope its fleet hook; see [`install_sharer`].
#[doc(hidden)]
pub type Sharer = Box<dyn Fn(&CircuitBreaker, Scope) -> Result<(), String> + Send + Sync>;

static SHARER: std::sync::OnceLock<Sharer> = std::sync::OnceLock::new();

/// Installs the process's sharer, once: what breakers of scope `shared` or `quorum(k)` made
/// by this crate's own code (`#[circuit_breaker(scope = "..")]`, keyed breakers of such a
/// function) are shared with. A fleet backend installs it with its store
/// (`breaker_redis::install`), so this crate never depends on one. Returns whether it was
/// installed (`false`: one was already).
#[doc(hidden)]
pub fn install_sharer(sharer: Sharer) -> bool {
    SHARER.set(sharer).is_ok()
}

/// Why [`share_in_scope`] could not share a breaker.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeError {
    /// No sharer is installed: no store to share with.
    NoStore {
        /// The breaker's name.
        breaker: String,
        /// Its scope.
        scope: Scope,
    },
    /// The sharer refused (its message).
    Refused(String),
}

impl std::fmt::Display for ScopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeError::NoStore { breaker, scope } => write!(
                f,
                "breaker `{breaker}` has scope `{scope}` but no store is installed: connect one \
                 (`breaker_redis::Store::connect`) and install it (`breaker_redis::install`) \
                 before its first call, or give it scope `local`"
            ),
            ScopeError::Refused(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ScopeError {}

/// Shares `breaker` in `scope` with the installed [`Sharer`]: nothing for `local` or for a
/// breaker that has a fleet hook already.
///
/// # Errors
/// [`ScopeError::NoStore`] for a shared scope with no sharer installed (never a silent local
/// breaker); the sharer's refusal.
#[doc(hidden)]
pub fn share_in_scope(breaker: &CircuitBreaker, scope: Scope) -> Result<(), ScopeError> {
    if !scope.is_shared() || breaker.has_fleet_hook() {
        return Ok(());
    }
    let Some(sharer) = SHARER.get() else {
        return Err(ScopeError::NoStore {
            breaker: breaker.name().to_owned(),
            scope,
        });
    };
    sharer(breaker, scope).map_err(ScopeError::Refused)
}

impl CircuitBreaker {
    /// Installs `hook`, once: from now on every call of this breaker (every clone, every
    /// caller) runs under it; see the [module docs](self). `early` is the failure count since
    /// the last [`take_fleet_counts`](Self::take_fleet_counts) at which
    /// [`FleetHook::failures_reached`] is called (0: never).
    ///
    /// The hook may hold one handle of this breaker (to apply the fleet's transitions):
    /// handle counts that decide a keyed registry's eviction do not count it.
    ///
    /// # Errors
    /// [`HookError`]: a hook is installed already, or the breaker has no room for one.
    #[doc(hidden)]
    pub fn install_fleet_hook(
        &self,
        hook: Arc<dyn FleetHook>,
        early: u64,
    ) -> Result<(), HookError> {
        let Some(heavy) = &self.inner.heavy else {
            return Err(HookError::NoRoom);
        };
        let slot = Box::new(FleetSlot {
            counts: FleetCounts {
                early,
                ..FleetCounts::default()
            },
            hook,
        });
        heavy.fleet.set(slot).map_err(|_| HookError::Installed)
    }

    /// Whether [`install_fleet_hook`](Self::install_fleet_hook) would succeed now.
    ///
    /// # Errors
    /// As [`install_fleet_hook`](Self::install_fleet_hook).
    #[doc(hidden)]
    pub fn fleet_hook_room(&self) -> Result<(), HookError> {
        match &self.inner.heavy {
            None => Err(HookError::NoRoom),
            Some(h) if h.fleet.get().is_some() => Err(HookError::Installed),
            Some(_) => Ok(()),
        }
    }

    /// A reading of this breaker's clock (nanoseconds), as
    /// [`RemoteTransition::open_until`] is given on.
    #[doc(hidden)]
    pub fn now_nanos(&self) -> u64 {
        self.inner.shared.clock.now_nanos()
    }

    /// Whether a fleet hook is installed.
    #[doc(hidden)]
    pub fn has_fleet_hook(&self) -> bool {
        self.inner.fleet().is_some()
    }

    /// Takes the closed-path counts recorded since the last take, and clears the `active` flag
    /// first (so the next outcome calls [`FleetHook::activated`] again). Zero without a hook.
    #[doc(hidden)]
    pub fn take_fleet_counts(&self) -> FleetTaken {
        let Some(slot) = self.inner.fleet() else {
            return FleetTaken::default();
        };
        let c = &slot.counts;
        c.active.store(false, Ordering::Release);
        FleetTaken {
            successes: c.successes.swap(0, Ordering::AcqRel),
            failures: c.failures.swap(0, Ordering::AcqRel),
            slow: c.slow.swap(0, Ordering::AcqRel),
        }
    }

    /// Clears the counts recorded so far (a new shared generation starts empty).
    #[doc(hidden)]
    pub fn clear_fleet_counts(&self) {
        if let Some(slot) = self.inner.fleet() {
            let c = &slot.counts;
            c.successes.store(0, Ordering::Release);
            c.failures.store(0, Ordering::Release);
            c.slow.store(0, Ordering::Release);
        }
    }

    /// Every handle of this breaker, its hook's included (see
    /// [`install_fleet_hook`](Self::install_fleet_hook)): a hook holding the only one may let
    /// it go.
    #[doc(hidden)]
    pub fn all_handles(&self) -> usize {
        triomphe::Arc::strong_count(&self.inner)
    }
}

impl Permit<'_> {
    /// The token of the fleet lease this probe holds ([`FleetProbe::Leased`]), if any.
    #[doc(hidden)]
    pub fn fleet_token(&self) -> Option<u32> {
        self.ticket.fleet_token()
    }
}

impl OwnedPermit {
    /// The token of the fleet lease this probe holds ([`FleetProbe::Leased`]), if any.
    #[doc(hidden)]
    pub fn fleet_token(&self) -> Option<u32> {
        self.ticket.fleet_token()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
mod hook_tests;
