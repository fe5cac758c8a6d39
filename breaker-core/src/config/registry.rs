//! Named policies installed at start-up, looked up by name, reloaded atomically, with the
//! pipelines that follow reloads and the annotated functions that use them.

use super::error::{ConfigError, ConfigErrors};
use super::load::{Loader, Policies};
use crate::breaker::{BreakerFactory, CircuitBreaker};
use crate::clock::Clock;
use crate::policy::Policy;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The name of the counter of reloads, by `result` (`"ok"` or `"error"`), with the `metrics`
/// feature: `breaker_config_reloads_total{result}`.
pub const RELOADS_TOTAL: &str = "breaker_config_reloads_total";

/// One named policy with its breaker.
struct Entry {
    policy: Arc<Policy>,
    keys: super::KeyBounds,
    /// Where its breaker state lives (`scope = ".."`).
    scope: crate::scope::Scope,
    /// The factory of this name's breakers (when the policy has a breaker); a reload swaps its
    /// policy, so every breaker made from it keeps its state and gets the new thresholds.
    breaker: Option<PolicyBreaker>,
}

/// A policy's breaker, kept by every reload that keeps a breaker in the policy.
#[derive(Clone)]
struct PolicyBreaker {
    factory: BreakerFactory,
    breaker: CircuitBreaker,
    /// Set by the first warning that this breaker, of a shared scope, is not shared: one
    /// warning per breaker, not one per pipeline taken (a service may take one per request).
    /// Only pipelines (feature `tokio`) read it.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    warned: Arc<AtomicBool>,
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
/// - [`PolicyRegistry::pipeline`] returns a pipeline of a name that follows reloads: each call
///   runs under the policy's retry, timeout, deadline and bulkhead current when it starts.
///   `#[circuit_breaker(policy = "..")]` functions run through one each.
/// - [`PolicyRegistry::reload`] reads the source again; [`PolicyRegistry::watch`] (feature
///   `watch`) does so whenever the file changes. A reload is atomic: if anything is wrong
///   nothing changes and the errors are returned. If it succeeds, the new policies are swapped
///   in at once, every existing breaker gets its new thresholds through
///   [`BreakerFactory::set_policy`], keeping its state (an open breaker stays open, counts are
///   kept), and every pipeline handed out gets its policy's new layers for its next calls.
/// - A reload that drops a policy still in use (by a pipeline handed out, or by an annotated
///   function when this is the [installed](super::install) registry) is an error naming the
///   policy and its users: the policy keeps its last good version, and nothing panics later.
/// - Every reload, good or failed, is a `tracing` event (target `breaker::config`; `info` with
///   what changed, `warn` with the errors) and, with the `metrics` feature, a count in
///   [`RELOADS_TOTAL`] by `result`.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::config::{Format, Loader, PolicyRegistry};
/// use breaker::State;
/// let registry = PolicyRegistry::load(Loader::text(
///     "[policies.inventory]\nbreaker = \"2 consecutive, open 30s\"\n",
///     Format::Toml,
/// ))?;
/// let breaker = registry.breaker("inventory").unwrap();
/// breaker.try_acquire().unwrap().failure();
/// breaker.try_acquire().unwrap().failure();
/// assert_eq!(breaker.state(), State::Open);
/// assert!(registry.get("inventory").unwrap().breaker.is_some());
/// # Ok::<(), breaker::config::ConfigErrors>(())
/// ```
///
/// Cloning is cheap: clones are handles to the same registry (the same policies, breakers and
/// reloads).
#[derive(Clone)]
pub struct PolicyRegistry {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    loader: Option<Loader>,
    clock: Option<Clock>,
    entries: ArcSwap<BTreeMap<String, Arc<Entry>>>,
    /// Successful reloads since the registry was made (see [`PolicyRegistry::generation`]).
    generation: AtomicU64,
    /// Serialises reloads, so that two reloads never interleave their `set_policy` calls, and
    /// guards the users of the policies.
    users: Mutex<Users>,
}

/// Who uses which policy: checked by every reload.
#[derive(Default)]
struct Users {
    /// The pipelines handed out, by policy name.
    #[cfg(feature = "tokio")]
    live: Vec<(String, std::sync::Weak<super::live::Slot>)>,
    /// Annotated functions that read their policy from this registry: (policy, function,
    /// whether it has `key = ..`).
    functions: Vec<(String, String, bool)>,
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

    /// As [`PolicyRegistry::load`], with breakers on `clock` (tests use a manual clock, or
    /// [`Clock::tokio`] on a paused runtime).
    ///
    /// # Errors
    /// The config's [`ConfigErrors`].
    pub fn load_with_clock(
        loader: Loader,
        clock: Option<Clock>,
    ) -> Result<PolicyRegistry, ConfigErrors> {
        let policies = loader.load()?;
        let registry = PolicyRegistry::new(Some(loader), clock);
        registry.inner.install(policies);
        Ok(registry)
    }

    /// Installs policies that did not come from a source; [`PolicyRegistry::reload`] then
    /// only accepts [`PolicyRegistry::reload_from`].
    pub fn from_policies(policies: Policies) -> PolicyRegistry {
        PolicyRegistry::from_policies_with_clock(policies, None)
    }

    /// As [`PolicyRegistry::from_policies`], with breakers on `clock`.
    pub fn from_policies_with_clock(policies: Policies, clock: Option<Clock>) -> PolicyRegistry {
        let registry = PolicyRegistry::new(None, clock);
        registry.inner.install(policies);
        registry
    }

    fn new(loader: Option<Loader>, clock: Option<Clock>) -> PolicyRegistry {
        PolicyRegistry {
            inner: Arc::new(Inner {
                loader,
                clock,
                entries: ArcSwap::from_pointee(BTreeMap::new()),
                generation: AtomicU64::new(0),
                users: Mutex::new(Users::default()),
            }),
        }
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.inner
            .entries
            .load()
            .get(name)
            .map(|e| Arc::clone(&e.policy))
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.inner.entries.load().keys().cloned().collect()
    }

    /// The circuit breaker of `name`, if that policy has one. Every call returns a clone of
    /// the same breaker, so they share state.
    pub fn breaker(&self, name: &str) -> Option<CircuitBreaker> {
        self.inner
            .entries
            .load()
            .get(name)
            .and_then(|e| e.breaker.as_ref().map(|b| b.breaker.clone()))
    }

    /// Where policy `name`'s breaker state lives (its `scope = ".."`, as loaded; `local` when
    /// it sets none or there is no such policy). A `policy = ".."` function of a shared scope
    /// shares its breaker at its first call with the store `breaker_redis::install` installed;
    /// a reload that changes a policy's scope changes no breaker already made.
    pub fn scope(&self, name: &str) -> crate::scope::Scope {
        self.inner
            .entries
            .load()
            .get(name)
            .map(|e| e.scope)
            .unwrap_or_default()
    }

    /// The bounds on the breakers of keys that policy `name` sets (`max_keys`, `key_idle`),
    /// as loaded; a `key = ..` function reads them when it makes its first keyed breaker.
    pub fn key_bounds(&self, name: &str) -> super::KeyBounds {
        self.inner
            .entries
            .load()
            .get(name)
            .map(|e| e.keys)
            .unwrap_or_default()
    }

    /// The breaker factory of `name`, to make more breakers (for example one per key) that
    /// follow the same reloadable policy.
    pub fn factory(&self, name: &str) -> Option<BreakerFactory> {
        self.inner
            .entries
            .load()
            .get(name)
            .and_then(|e| e.breaker.as_ref().map(|b| b.factory.clone()))
    }

    /// A pipeline of the policy `name` that follows reloads (see [`super::LivePipeline`]),
    /// with the registry's breaker of that policy; `None` if there is no such policy. Each
    /// pipeline taken has its own bulkhead and jitter source, as a pipeline built from the
    /// policy would. While it is alive, a reload that drops `name` is refused.
    #[cfg(feature = "tokio")]
    pub fn pipeline(&self, name: &str) -> Option<super::LivePipeline> {
        self.inner.pipeline(name, None)
    }

    /// The pipeline of an annotated function: as [`PolicyRegistry::pipeline`], with the
    /// function named in the error of a reload that would drop its policy.
    #[cfg(feature = "tokio")]
    pub(crate) fn pipeline_for(&self, name: &str, function: &str) -> Option<super::LivePipeline> {
        self.inner.pipeline(name, Some(function.to_owned()))
    }

    /// Records that the annotated functions `uses` (policy, function) read their policy from
    /// this registry, so a reload that drops one of those policies is refused.
    pub(crate) fn require(&self, uses: impl IntoIterator<Item = (String, String, bool)>) {
        self.inner.lock_users().functions.extend(uses);
    }

    /// Reads the source again and applies it; see the [type docs](Self).
    ///
    /// # Errors
    /// The new config's [`ConfigErrors`], or the policies in use it drops; the previous
    /// policies stay in force. A registry made by [`PolicyRegistry::from_policies`] has no
    /// source and always returns an error.
    pub fn reload(&self) -> Result<ReloadReport, ConfigErrors> {
        self.inner.reload()
    }

    /// Applies already loaded (and so validated) policies; see the [type docs](Self).
    ///
    /// # Errors
    /// The policies in use that `policies` drops; then nothing changes.
    pub fn reload_from(&self, policies: Policies) -> Result<ReloadReport, ConfigErrors> {
        let result = self.inner.apply(policies, true);
        record(&result);
        result
    }

    /// How many reloads have succeeded since the registry was made: 0 for the policies it was
    /// made with, then one more for every [`reload`](Self::reload) or
    /// [`reload_from`](Self::reload_from) that returned `Ok` (a failed reload, which changes
    /// nothing, does not count). Tells an operator which version of the file is in force.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// The file this registry was loaded from and [`reload`](Self::reload)s from; `None` for a
    /// registry made from text ([`Loader::text`](super::Loader::text)) or from policies.
    pub fn source_file(&self) -> Option<&std::path::Path> {
        self.inner.loader.as_ref().and_then(Loader::path)
    }

    /// The file this registry reloads from, if any.
    pub(super) fn file(&self) -> Option<std::path::PathBuf> {
        self.inner
            .loader
            .as_ref()
            .and_then(Loader::path)
            .map(Into::into)
    }

    /// The loader this registry reloads from, if any.
    #[cfg(feature = "watch")]
    pub(super) fn loader(&self) -> Option<&Loader> {
        self.inner.loader.as_ref()
    }
}

impl Inner {
    fn lock_users(&self) -> std::sync::MutexGuard<'_, Users> {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn reload(&self) -> Result<ReloadReport, ConfigErrors> {
        let result = match &self.loader {
            None => Err(ConfigError {
                file: None,
                env: None,
                line: None,
                column: None,
                key_path: ".".into(),
                message: "this registry has no source to reload from; use `reload_from`".into(),
            }
            .into()),
            Some(loader) => loader
                .load()
                .and_then(|policies| self.apply(policies, true)),
        };
        record(&result);
        result
    }

    fn install(&self, policies: Policies) {
        let _ = self.apply(policies, false);
    }

    /// Swaps in `policies` unless it drops a policy in use (checked when `check`).
    fn apply(&self, policies: Policies, check: bool) -> Result<ReloadReport, ConfigErrors> {
        let mut users = self.lock_users();
        if check {
            self.check_users(&mut users, &policies)?;
        }
        let old = self.entries.load_full();
        let mut report = ReloadReport::default();
        let mut next = BTreeMap::new();
        for (name, policy) in policies.iter() {
            let previous = old.get(name);
            match previous {
                None => report.added.push(name.to_owned()),
                Some(e) if *e.policy != **policy || e.keys != policies.key_bounds(name) => {
                    report.changed.push(name.to_owned())
                }
                Some(_) => {}
            }
            let breaker = match (&policy.breaker, previous.and_then(|e| e.breaker.as_ref())) {
                (Some(bp), Some(kept)) => {
                    kept.factory
                        .set_policy(bp.clone())
                        .expect("loaded policies are validated");
                    Some(kept.clone())
                }
                (Some(bp), None) => Some(self.new_breaker(name, bp)),
                (None, _) => None,
            };
            next.insert(
                name.to_owned(),
                Arc::new(Entry {
                    policy: Arc::clone(policy),
                    keys: policies.key_bounds(name),
                    scope: policies.scope(name),
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
            if let (Some(b), false) = (&entry.breaker, kept) {
                crate::observe::untrack(&b.breaker);
            }
        }
        #[cfg(feature = "tokio")]
        for (name, slot) in &users.live {
            let (Some(slot), Some(entry)) = (slot.upgrade(), next.get(name)) else {
                continue;
            };
            if old.get(name).is_some_and(|e| e.policy == entry.policy) {
                continue;
            }
            let previous = slot.current.load();
            let breaker = entry.breaker.as_ref().map(|b| b.breaker.clone());
            let recorder = slot
                .recorder
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let pipeline = super::live::build(
                &entry.policy,
                name,
                breaker,
                Some(&previous),
                recorder,
                self.clock.as_ref(),
            );
            slot.current.store(Arc::new(pipeline));
        }
        self.entries.store(Arc::new(next));
        if check {
            // Under the users' lock, which serialises reloads.
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(report)
    }

    /// Refuses `policies` if it drops a policy in use: one error per policy, naming its users.
    fn check_users(&self, users: &mut Users, policies: &Policies) -> Result<(), ConfigErrors> {
        let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        #[cfg(feature = "tokio")]
        {
            users.live.retain(|(_, slot)| slot.strong_count() > 0);
            for (name, slot) in &users.live {
                if policies.get(name).is_none() {
                    let user = slot.upgrade().and_then(|s| s.user.clone()).map_or_else(
                        || "a pipeline from `PolicyRegistry::pipeline`".to_owned(),
                        |f| format!("`{f}`"),
                    );
                    missing.entry(name).or_default().push(user);
                }
            }
        }
        // A function keeps its keys (or has none) across reloads: a new policy must still fit.
        let mut unfit = Vec::new();
        for (name, function, keyed) in &users.functions {
            match policies.get(name) {
                None => missing
                    .entry(name)
                    .or_default()
                    .push(format!("`{function}`")),
                Some(policy) => {
                    if let Some(why) = super::key_mismatch(name, &policy, *keyed) {
                        unfit.push((name.clone(), format!("`{function}` {why}")));
                    }
                }
            }
        }
        if missing.is_empty() && unfit.is_empty() {
            return Ok(());
        }
        unfit.sort();
        let file: Option<std::path::PathBuf> =
            self.loader.as_ref().and_then(Loader::path).map(Into::into);
        let unfit = unfit.into_iter().map(|(name, message)| ConfigError {
            file: file.clone(),
            env: None,
            line: None,
            column: None,
            key_path: format!("policies.{name}"),
            message: format!("{message}; the previous policies stay in force"),
        });
        Err(ConfigErrors(
            missing
                .into_iter()
                .map(|(name, mut users)| {
                    users.sort();
                    users.dedup();
                    ConfigError {
                        file: file.clone(),
                        env: None,
                        line: None,
                        column: None,
                        key_path: format!("policies.{name}"),
                        message: format!(
                            "policy `{name}` is used by {} and the new config does not have it; \
                             the previous policies stay in force",
                            users.join(", ")
                        ),
                    }
                })
                .chain(unfit)
                .collect(),
        ))
    }

    #[cfg(feature = "tokio")]
    fn pipeline(&self, name: &str, user: Option<String>) -> Option<super::LivePipeline> {
        // Under the lock, so that a reload either sees the slot or stores after it is filled.
        let mut users = self.lock_users();
        let entries = self.entries.load();
        let entry = entries.get(name)?;
        if let Some(b) = &entry.breaker {
            share_as_configured(name, entry.scope, b);
        }
        let breaker = entry.breaker.as_ref().map(|b| b.breaker.clone());
        let slot = Arc::new(super::live::Slot {
            current: ArcSwap::from_pointee(super::live::build(
                &entry.policy,
                name,
                breaker,
                None,
                None,
                self.clock.as_ref(),
            )),
            recorder: std::sync::Mutex::new(None),
            user,
        });
        users.live.push((name.to_owned(), Arc::downgrade(&slot)));
        Some(super::LivePipeline { slot })
    }

    fn new_breaker(&self, name: &str, policy: &crate::breaker::BreakerPolicy) -> PolicyBreaker {
        // Lifetime totals on: a named policy's one breaker is reached through the registry,
        // with no builder to ask for them (its keys' registry turns them off).
        let mut builder = CircuitBreaker::builder(policy.clone())
            .name(name)
            .totals(true);
        if let Some(clock) = &self.clock {
            builder = builder.clock(clock.clone());
        }
        let builder = crate::annotated::attach(crate::observe::instrument(builder), name);
        let factory = builder
            .build_factory()
            .expect("loaded policies are validated");
        let breaker = factory.create();
        crate::observe::track(&breaker);
        PolicyBreaker {
            factory,
            breaker,
            warned: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// Every reload, good or failed: one `tracing` event and one count.
fn record(result: &Result<ReloadReport, ConfigErrors>) {
    match result {
        Ok(r) => tracing::info!(
            target: "breaker::config",
            added = ?r.added,
            changed = ?r.changed,
            removed = ?r.removed,
            "config reloaded"
        ),
        Err(e) => tracing::warn!(
            target: "breaker::config",
            errors = e.errors().len(),
            error = %e,
            "config reload failed; the previous policies stay in force"
        ),
    }
    #[cfg(feature = "metrics")]
    metrics::counter!(RELOADS_TOTAL, "result" => if result.is_ok() { "ok" } else { "error" })
        .increment(1);
}

impl std::fmt::Debug for PolicyRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyRegistry")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

/// A registry pipeline of a policy whose scope is shared: shared at once with the store a
/// fleet backend installed (`breaker_redis::install`), if its breaker is not shared already
/// (`share_policies`); with neither, a warning names the policy and the two ways to share it,
/// rather than a breaker that runs local without a word. The warning comes once per breaker
/// (the first pipeline taken that cannot share it); every take still tries to share it, so a
/// store installed later is picked up.
#[cfg(feature = "tokio")]
fn share_as_configured(name: &str, scope: crate::scope::Scope, policy_breaker: &PolicyBreaker) {
    let breaker = &policy_breaker.breaker;
    if !scope.is_shared() || breaker.has_fleet_hook() {
        return;
    }
    if let Err(e) = crate::breaker::share_in_scope(breaker, scope) {
        if policy_breaker
            .warned
            .swap(true, crate::sync::Ordering::Relaxed)
        {
            return;
        }
        tracing::warn!(
            target: "breaker",
            policy = name,
            scope = %scope,
            "policy `{name}` has scope `{scope}` but its breaker is not shared ({e}); call \
             `breaker_redis::share_policies` with this registry, or `breaker_redis::install` a \
             store before taking its pipeline: until then it runs local"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Format;

    #[test]
    fn generation_counts_the_reloads_that_succeed_and_source_file_names_the_file() {
        let dir = std::env::temp_dir().join(format!("breaker-registry-gen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policies.toml");
        std::fs::write(&path, "[policies.a]\nbreaker = \"3 consecutive\"\n").unwrap();
        let registry = PolicyRegistry::load(Loader::file(&path)).unwrap();
        assert_eq!(registry.generation(), 0);
        assert_eq!(registry.source_file(), Some(path.as_path()));
        registry.reload().unwrap();
        assert_eq!(
            registry.generation(),
            1,
            "a reload that changes nothing still counts"
        );
        std::fs::write(&path, "[policies.a]\nbreaker = \"3 parsecs\"\n").unwrap();
        assert!(registry.reload().is_err());
        assert_eq!(registry.generation(), 1, "a failed reload changes nothing");
        // A clone is the same registry.
        let clone = registry.clone();
        std::fs::write(&path, "[policies.a]\nbreaker = \"4 consecutive\"\n").unwrap();
        clone.reload().unwrap();
        assert_eq!(registry.generation(), 2);
        assert_eq!(
            registry
                .get("a")
                .unwrap()
                .breaker
                .as_ref()
                .unwrap()
                .consecutive_failures,
            Some(4)
        );
        let text = PolicyRegistry::load(Loader::text("[policies.a]\n", Format::Toml)).unwrap();
        assert_eq!(text.source_file(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
