//! Named policies installed at start-up, looked up by name, reloaded atomically.

use super::error::ConfigErrors;
use super::load::{Loader, Policies};
use crate::breaker::{BreakerFactory, CircuitBreaker};
use crate::clock::Clock;
use crate::policy::Policy;
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One named policy with its breaker.
struct Entry {
    policy: Arc<Policy>,
    /// The factory of this name's breakers (when the policy has a breaker); a reload swaps its
    /// policy, so every breaker made from it keeps its state and gets the new thresholds.
    breaker: Option<(BreakerFactory, CircuitBreaker)>,
}

/// What a successful reload changed, by policy name (sorted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// Names that are new.
    pub added: Vec<String>,
    /// Names that are gone. Breakers handed out earlier keep working with their last policy.
    pub removed: Vec<String>,
    /// Names whose policy changed.
    pub changed: Vec<String>,
}

/// The named policies of a config, installed at start-up and reloadable.
///
/// - [`PolicyRegistry::get`] returns the policy of a name as an `Arc<Policy>`; lookups are
///   lock-free and always see one whole generation of the config.
/// - [`PolicyRegistry::breaker`] returns the circuit breaker of a name (one per name, shared by
///   every caller; clones share its state).
/// - [`PolicyRegistry::reload`] reads the source again. If anything is wrong nothing changes
///   and the errors are returned. If it succeeds, the new policies are swapped in atomically
///   and every existing breaker gets its new thresholds through
///   [`BreakerFactory::set_policy`], keeping its state (an open breaker stays open, counts are
///   kept).
///
/// ```
/// use breaker_core::config::{Format, Loader, PolicyRegistry};
/// use breaker_core::State;
/// let registry = PolicyRegistry::load(Loader::text(
///     "[policies.inventory]\nbreaker = \"2 consecutive, open 30s\"\n",
///     Format::Toml,
/// ))?;
/// let breaker = registry.breaker("inventory").unwrap();
/// breaker.try_acquire().unwrap().failure();
/// breaker.try_acquire().unwrap().failure();
/// assert_eq!(breaker.state(), State::Open);
/// assert!(registry.get("inventory").unwrap().breaker.is_some());
/// # Ok::<(), breaker_core::config::ConfigErrors>(())
/// ```
pub struct PolicyRegistry {
    loader: Option<Loader>,
    clock: Option<Clock>,
    entries: ArcSwap<BTreeMap<String, Arc<Entry>>>,
    /// Serialises reloads, so that two reloads never interleave their `set_policy` calls.
    reloading: Mutex<()>,
}

impl PolicyRegistry {
    /// Loads the config and installs its policies; [`PolicyRegistry::reload`] reads the same
    /// source again.
    ///
    /// # Errors
    /// The config's [`ConfigErrors`].
    pub fn load(loader: Loader) -> Result<PolicyRegistry, ConfigErrors> {
        PolicyRegistry::load_with_clock(loader, None)
    }

    /// As [`PolicyRegistry::load`], with breakers on `clock` (tests use a manual clock).
    ///
    /// # Errors
    /// The config's [`ConfigErrors`].
    pub fn load_with_clock(
        loader: Loader,
        clock: Option<Clock>,
    ) -> Result<PolicyRegistry, ConfigErrors> {
        let policies = loader.load()?;
        let registry = PolicyRegistry {
            loader: Some(loader),
            clock,
            entries: ArcSwap::from_pointee(BTreeMap::new()),
            reloading: Mutex::new(()),
        };
        registry.install(policies);
        Ok(registry)
    }

    /// Installs policies that did not come from a source; [`PolicyRegistry::reload`] then
    /// only accepts [`PolicyRegistry::reload_from`].
    pub fn from_policies(policies: Policies) -> PolicyRegistry {
        let registry = PolicyRegistry {
            loader: None,
            clock: None,
            entries: ArcSwap::from_pointee(BTreeMap::new()),
            reloading: Mutex::new(()),
        };
        registry.install(policies);
        registry
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.entries.load().get(name).map(|e| Arc::clone(&e.policy))
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.load().keys().cloned().collect()
    }

    /// The circuit breaker of `name`, if that policy has one. Every call returns a clone of
    /// the same breaker, so they share state.
    pub fn breaker(&self, name: &str) -> Option<CircuitBreaker> {
        self.entries
            .load()
            .get(name)
            .and_then(|e| e.breaker.as_ref().map(|(_, b)| b.clone()))
    }

    /// The breaker factory of `name`, to make more breakers (for example one per key) that
    /// follow the same reloadable policy.
    pub fn factory(&self, name: &str) -> Option<BreakerFactory> {
        self.entries
            .load()
            .get(name)
            .and_then(|e| e.breaker.as_ref().map(|(f, _)| f.clone()))
    }

    /// Reads the source again and applies it; see the [type docs](Self).
    ///
    /// # Errors
    /// The new config's [`ConfigErrors`]; the previous policies stay in force. A registry made
    /// by [`PolicyRegistry::from_policies`] has no source and always returns an error.
    pub fn reload(&self) -> Result<ReloadReport, ConfigErrors> {
        let Some(loader) = &self.loader else {
            return Err(super::error::ConfigError {
                file: None,
                env: None,
                line: None,
                column: None,
                key_path: ".".into(),
                message: "this registry has no source to reload from; use `reload_from`".into(),
            }
            .into());
        };
        let policies = loader.load()?;
        Ok(self.reload_from(policies))
    }

    /// Applies already loaded (and so validated) policies; see the [type docs](Self).
    pub fn reload_from(&self, policies: Policies) -> ReloadReport {
        let _guard = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.entries.load_full();
        let mut report = ReloadReport::default();
        let mut next = BTreeMap::new();
        for (name, policy) in policies.iter() {
            let previous = old.get(name);
            match previous {
                None => report.added.push(name.to_owned()),
                Some(e) if *e.policy != **policy => report.changed.push(name.to_owned()),
                Some(_) => {}
            }
            let breaker = match (&policy.breaker, previous.and_then(|e| e.breaker.as_ref())) {
                (Some(bp), Some((factory, breaker))) => {
                    factory
                        .set_policy(bp.clone())
                        .expect("loaded policies are validated");
                    Some((factory.clone(), breaker.clone()))
                }
                (Some(bp), None) => Some(self.new_breaker(name, bp)),
                (None, _) => None,
            };
            next.insert(
                name.to_owned(),
                Arc::new(Entry {
                    policy: Arc::clone(policy),
                    breaker,
                }),
            );
        }
        report.removed = old
            .keys()
            .filter(|k| !next.contains_key(*k))
            .cloned()
            .collect();
        // A breaker no entry keeps any more leaves the state gauge.
        for (name, entry) in old.iter() {
            let kept = next.get(name).is_some_and(|e| e.breaker.is_some());
            if let (Some((_, breaker)), false) = (&entry.breaker, kept) {
                crate::observe::untrack(breaker);
            }
        }
        self.entries.store(Arc::new(next));
        report
    }

    fn install(&self, policies: Policies) {
        let _ = self.reload_from(policies);
    }

    fn new_breaker(
        &self,
        name: &str,
        policy: &crate::breaker::BreakerPolicy,
    ) -> (BreakerFactory, CircuitBreaker) {
        let mut builder = CircuitBreaker::builder(policy.clone()).name(name);
        if let Some(clock) = &self.clock {
            builder = builder.clock(clock.clone());
        }
        let builder = crate::annotated::attach(crate::observe::instrument(builder), name);
        let factory = builder
            .build_factory()
            .expect("loaded policies are validated");
        let breaker = factory.create();
        crate::observe::track(&breaker);
        (factory, breaker)
    }
}

impl std::fmt::Debug for PolicyRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyRegistry")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}
