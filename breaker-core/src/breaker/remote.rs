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

use super::event::Cause;
use super::event::TransitionReason;
use super::machine::Heavy;
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
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Installed => f.write_str("the breaker is shared already"),
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

    /// The state word now, decoded (one atomic load): what a fleet backend reconciles the
    /// store with after a store fault (the local state, open streak and generation).
    #[doc(hidden)]
    pub fn word(&self) -> super::decide::Word {
        Word::decode(self.inner.state.load(Ordering::Acquire))
    }

    /// A rejection decided outside this breaker (a shared-state backend's: no fleet probe
    /// lease, or the store unreachable in a rejecting mode), counted, traced and named as one
    /// of this breaker's own.
    #[doc(hidden)]
    pub fn rejection(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        self.inner.reject(reason, retry_after)
    }
}

// --- The process's fleet backend ---------------------------------------------------------------

/// A fleet-wide backend (`breaker_redis::Store`), registered once per process
/// ([`install_backend`]): what breakers of a shared scope made by this crate's own code
/// (`#[circuit_breaker(scope = "..")]` and its keys' breakers, registry pipelines of a policy
/// whose config file gives it a shared scope) are shared with. This crate never depends on a
/// backend.
#[doc(hidden)]
pub trait FleetBackend: Send + Sync + 'static {
    /// Shares `breaker` in `scope` (never `local`): installs its fleet hook.
    ///
    /// # Errors
    /// [`ShareError::Refused`] with the backend's own error as its source.
    fn share(&self, breaker: &CircuitBreaker, scope: Scope) -> Result<(), ShareError>;
}

static BACKEND: std::sync::OnceLock<Arc<dyn FleetBackend>> = std::sync::OnceLock::new();

/// Installs the process's fleet backend, once. Returns whether it was installed (`false`: one
/// was already).
#[doc(hidden)]
pub fn install_backend(backend: Arc<dyn FleetBackend>) -> bool {
    BACKEND.set(backend).is_ok()
}

/// The installed fleet backend, if any.
#[doc(hidden)]
pub fn installed_backend() -> Option<Arc<dyn FleetBackend>> {
    BACKEND.get().cloned()
}

/// Why a breaker of a shared scope could not be shared: the one error of every path that
/// shares one (the attribute, registry pipelines, a fleet backend's own calls).
#[doc(hidden)]
#[derive(Debug)]
#[non_exhaustive]
pub enum ShareError {
    /// The scope is shared but no store is installed (or given): never a silent fall-back to
    /// a local breaker.
    NoStore {
        /// The breaker's name.
        breaker: String,
        /// Its scope.
        scope: Scope,
    },
    /// The backend refused the breaker; `source` is its own error (downcast it to the
    /// backend's type, `breaker_redis::RegisterError`).
    Refused {
        /// The breaker's name.
        breaker: String,
        /// Its scope.
        scope: Scope,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl std::fmt::Display for ShareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShareError::NoStore { breaker, scope } => write!(
                f,
                "breaker `{}` has scope `{scope}` but no store is installed: connect one \
                 (`breaker_redis::Store::connect`) and install it (`breaker_redis::install`) \
                 before its first call, or give it scope `local`",
                breaker.escape_debug()
            ),
            ShareError::Refused { source, .. } => std::fmt::Display::fmt(source, f),
        }
    }
}

impl std::error::Error for ShareError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShareError::NoStore { .. } => None,
            ShareError::Refused { source, .. } => Some(&**source),
        }
    }
}

/// Shares `breaker` in `scope` with the installed [`FleetBackend`]: nothing for `local` or for
/// a breaker that has a fleet hook already.
///
/// # Errors
/// [`ShareError::NoStore`] for a shared scope with no backend installed (never a silent local
/// breaker); the backend's refusal.
#[doc(hidden)]
pub fn share_in_scope(breaker: &CircuitBreaker, scope: Scope) -> Result<(), ShareError> {
    share_with(BACKEND.get().map(|b| &**b), breaker, scope)
}

/// Shares `breaker` in `scope` with `backend`: nothing for `local` or for a breaker that has
/// a fleet hook already.
///
/// # Errors
/// As [`share_in_scope`].
#[doc(hidden)]
pub fn share_with(
    backend: Option<&dyn FleetBackend>,
    breaker: &CircuitBreaker,
    scope: Scope,
) -> Result<(), ShareError> {
    if !scope.is_shared() || breaker.has_fleet_hook() {
        return Ok(());
    }
    let Some(backend) = backend else {
        return Err(ShareError::NoStore {
            breaker: breaker.name().to_owned(),
            scope,
        });
    };
    backend.share(breaker, scope)
}

/// Shares every breaker `factory` makes from now on in `scope` (the keys of a shared policy or
/// function), with `backend` (`None`: the installed one, as each is made). A key's breaker that
/// cannot be shared is logged as an error and runs locally: the one place that says so.
#[doc(hidden)]
pub fn share_created(
    factory: &super::BreakerFactory,
    scope: Scope,
    backend: Option<Arc<dyn FleetBackend>>,
) {
    if !scope.is_shared() {
        return;
    }
    factory.on_create(move |breaker| {
        let backend = backend.clone().or_else(installed_backend);
        if let Err(e) = share_with(backend.as_deref(), breaker, scope) {
            tracing::error!(
                target: "breaker",
                breaker = %breaker.name().escape_debug(),
                key = %breaker.key().escape_debug(),
                error = %e,
                "a key's breaker of a shared scope could not be shared; it runs locally"
            );
        }
    });
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
    /// [`HookError`]: a hook is installed already. Any breaker can take one: a breaker that
    /// keeps nothing beyond its state (no window, totals or key) gets the block that holds the
    /// hook when the hook is installed, not before.
    #[doc(hidden)]
    pub fn install_fleet_hook(
        &self,
        hook: Arc<dyn FleetHook>,
        early: u64,
    ) -> Result<(), HookError> {
        let heavy = self.inner.heavy.get_or_init(|| {
            Box::new(Heavy {
                window: None,
                totals: None,
                key: None,
                fleet: std::sync::OnceLock::new(),
            })
        });
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
        match self.inner.fleet() {
            Some(_) => Err(HookError::Installed),
            None => Ok(()),
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

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
mod hook_tests;
