//! [`BreakerFactory`]: many breakers of one configuration (a keyed registry), with run-time
//! policy reloads.

use super::machine::create;
use super::policy::{BreakerPolicy, ValidationError};
use super::shared::Shared;
use super::CircuitBreaker;
use crate::clock::Clock;
use crate::sync::Ordering;
use std::sync::Arc;

/// Creates breakers that share one policy, clock, name and listener set; see
/// [`BreakerBuilder::build_factory`](super::BreakerBuilder::build_factory). Cloning is cheap.
#[derive(Clone)]
pub struct BreakerFactory {
    pub(super) shared: Arc<Shared>,
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
            None => create(Arc::clone(&self.shared), key, totals, epoch, &policy),
            Some(f) => {
                let breaker = create(Arc::clone(&self.shared), key, totals, epoch, &policy);
                f(&breaker);
                breaker
            }
        }
    }

    /// Runs `f` with every breaker this factory (and its clones) creates from now on, before
    /// it is handed out (any breaker can take a fleet hook). Set once: returns
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

    /// Whether this factory's breakers keep lifetime totals.
    pub(crate) fn totals(&self) -> bool {
        self.shared.totals
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
