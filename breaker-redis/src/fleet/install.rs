//! The process's installed store, the typed fleet backend, and the scopes of policies:
//! [`install`], [`share_scoped`] and, with `config`, `share_policies`.

use super::*;
#[cfg(feature = "config")]
use crate::config::StoreConfig;
#[cfg(feature = "config")]
use crate::names::ReplicaId;
use breaker_core::breaker::{FleetBackend, ShareError};

// --- Scopes ------------------------------------------------------------------------------------

impl From<StoreErrorMode> for OnStoreError {
    fn from(m: StoreErrorMode) -> OnStoreError {
        match m {
            StoreErrorMode::Local => OnStoreError::Local,
            StoreErrorMode::Open => OnStoreError::Open,
            StoreErrorMode::Closed { grace } => OnStoreError::Closed { grace },
        }
    }
}

#[cfg(feature = "config")]
impl StoreConfig {
    /// The configuration of a config file's `[store]` table
    /// ([`Policies::store`](breaker_core::config::Policies::store)), environment overrides
    /// (`BREAKER__STORE__URL`, ..) applied.
    ///
    /// # Errors
    /// As [`StoreConfig::new`], and [`StoreError::Config`] for an invalid replica id.
    pub fn from_settings(s: &StoreSettings) -> Result<StoreConfig, StoreError> {
        let mut c = StoreConfig::new(&s.url, &s.namespace)?.on_error(s.on_error.into());
        if let Some(r) = &s.replica {
            let r = ReplicaId::new(r).map_err(|e| StoreError::Config {
                message: format!("store replica: {e}"),
            })?;
            c = c.replica(r);
        }
        if let Some(d) = s.flush_interval {
            c = c.flush_interval(d);
        }
        Ok(c)
    }
}

/// A store is the process's fleet backend: what `breaker-core` shares a breaker of a shared
/// scope with (the attribute's, its keys', a registry pipeline's). Its refusal keeps the
/// [`RegisterError`] typed, as the [`ShareError::Refused`] source.
impl FleetBackend for Store {
    fn share(&self, breaker: &CircuitBreaker, scope: Scope) -> Result<(), ShareError> {
        self.share_scoped(breaker, scope)
            .map(drop)
            .map_err(|e| ShareError::Refused {
                breaker: breaker.name().to_owned(),
                scope,
                source: Box::new(e),
            })
    }
}

static INSTALLED: std::sync::OnceLock<Store> = std::sync::OnceLock::new();

/// Installs `store` as the process's store for breakers of scope `shared` or `quorum(k)`:
/// [`share_scoped`], and the breakers `breaker-core` makes in such a scope itself:
/// `#[circuit_breaker(scope = "shared")]` functions (shared at their first call, their keys'
/// breakers as they are made) and `policy = ".."` functions whose embedded config gives the
/// policy a shared scope. Once per process; install it before the first call of such a
/// function (that call panics, naming the fix, if no store is installed).
///
/// # Errors
/// [`AlreadyInstalled`], holding `store`, if a store is installed already.
pub fn install(store: Store) -> Result<(), AlreadyInstalled> {
    INSTALLED.set(store.clone()).map_err(AlreadyInstalled)?;
    breaker_core::breaker::install_backend(Arc::new(store));
    Ok(())
}

/// A second [`install`]: a process has one store for its shared breakers. Holds the store
/// that was not installed.
#[derive(Debug, thiserror::Error)]
#[error("a store is installed already (`breaker_redis::install` is called once per process)")]
pub struct AlreadyInstalled(pub Store);

/// The installed store, if any.
pub fn installed() -> Option<&'static Store> {
    INSTALLED.get()
}

impl Store {
    /// Gives `breaker` its scope: `local` leaves it alone (`None`), `shared` shares it
    /// ([`share`](Self::share)), `quorum(k)` shares it with the fleet opening when `k`
    /// distinct replicas tripped locally within the window.
    ///
    /// # Errors
    /// As [`share`](Self::share).
    pub fn share_scoped(
        &self,
        breaker: &CircuitBreaker,
        scope: Scope,
    ) -> Result<Option<SharedCircuitBreaker>, RegisterError> {
        if !scope.is_shared() {
            return Ok(None);
        }
        self.share_in(breaker, scope).map(Some)
    }
}

/// Gives `breaker` its scope with the [installed](install) store: `local` is `Ok(None)`.
///
/// # Errors
/// [`ShareError::NoStore`] for a shared scope with no store installed; the store's
/// [`RegisterError`] as the source of [`ShareError::Refused`].
pub fn share_scoped(
    breaker: &CircuitBreaker,
    scope: Scope,
) -> Result<Option<SharedCircuitBreaker>, ShareError> {
    scoped(installed(), breaker, scope)
}

fn scoped(
    store: Option<&Store>,
    breaker: &CircuitBreaker,
    scope: Scope,
) -> Result<Option<SharedCircuitBreaker>, ShareError> {
    if !scope.is_shared() {
        return Ok(None);
    }
    let store = store.ok_or_else(|| ShareError::NoStore {
        breaker: breaker.name().to_owned(),
        scope,
    })?;
    store
        .share_scoped(breaker, scope)
        .map_err(|e| ShareError::Refused {
            breaker: breaker.name().to_owned(),
            scope,
            source: Box::new(e),
        })
}

/// Shares the breaker of every policy of `policies` whose scope is `shared` or `quorum(k)`
/// (`scope = ".."` in a config file), from `registry` (loaded from the same policies), with
/// `store` (`None`: the [installed](install) one). The map is by policy name; policies of
/// scope `local` are not in it.
///
/// # Errors
/// [`ShareError::NoStore`] if a policy's scope is shared and there is no store; the store's
/// refusal ([`ShareError::Refused`], its [`RegisterError`] the source).
#[cfg(feature = "config")]
pub fn share_policies(
    store: Option<&Store>,
    policies: &Policies,
    registry: &PolicyRegistry,
) -> Result<std::collections::BTreeMap<String, SharedCircuitBreaker>, ShareError> {
    let store = match store {
        Some(s) => Some(s),
        None => installed(),
    };
    let mut out = std::collections::BTreeMap::new();
    for (name, _) in policies.iter() {
        let scope = policies.scope(name);
        let Some(breaker) = registry.breaker(name) else {
            continue;
        };
        if let Some(shared) = scoped(store, &breaker, scope)? {
            // Keyed breakers of the policy (a registry over its factory, a `key = ..`
            // function naming it) are shared as they are made: the core's one function for
            // it, with this store as the backend.
            if let (Some(factory), Some(store)) = (registry.factory(name), store) {
                let backend: Arc<dyn FleetBackend> = Arc::new(store.clone());
                breaker_core::breaker::share_created(&factory, scope, Some(backend));
            }
            out.insert(name.to_owned(), shared);
        }
    }
    Ok(out)
}
