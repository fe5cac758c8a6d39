//! Breakers shared by a fleet: the fleet's view beside the local one, and admin actions that
//! reach every replica.
//!
//! A fleet-wide breaker has two states worth showing: the local breaker's (what this
//! process's calls see) and the shared store's (what the fleet decided, and who decided it).
//! They differ for a moment after every fleet transition, and for longer when the store is
//! unreachable. An admin action on such a breaker must go to the store, or the next fleet
//! update would undo it here and it would never reach the other replicas. [`Shared`] is what
//! the admin needs of a fleet backend for that; `breaker-redis`'s `SharedCircuitBreaker` is
//! the one this project ships (the `redis` feature).
//!
//! # With `breaker-redis` (the `redis` feature)
//! Nothing to add for a breaker shared through the
//! [installed](https://docs.rs/breaker-redis/latest/breaker_redis/fn.installed.html) store:
//! every row whose breaker is shared there (a `#[circuit_breaker(scope = "shared")]`
//! function's, a config policy of a shared scope, one shared with `Store::share`) gets the
//! fleet's view beside its local state, whoever shared it, and a breaker shared there that no
//! other source shows gets a row of its own (kind `shared`). Another store is searched once
//! added with `AdminBuilder::store`; a `SharedCircuitBreaker` may also be given by hand with
//! [`AdminBuilder::shared`](crate::AdminBuilder::shared). A key of a shared keyed group is
//! acted on fleet-wide too.
//!
//! The fleet view (`fleet` in the JSON) of such a breaker:
//!
//! | field | what |
//! |---|---|
//! | `id` | the shared id (the name, and the escaped key of a keyed breaker) |
//! | `state` | the fleet's state: `closed`, `open`, `half-open`, `forced-open`, `forced-closed` |
//! | `generation` | the fleet's transitions so far (24 bits, wrapping); not the local breaker's |
//! | `streak` | consecutive openings since the fleet's breaker last closed |
//! | `probe_successes` | half-open: successful probes so far in this period |
//! | `probes_in_flight` | half-open: unexpired probe leases across the fleet, as of the last answer |
//! | `retry_after_ms` | open: milliseconds until the fleet's deadline, rounded up (`null` otherwise) |
//! | `caused_by` | the replica whose write made the last transition (`null`: unknown) |
//! | `reason` | why (`consecutive_failures`, `failure_rate`, `manual`, ...) |
//! | `known` | whether the store has been seen holding it (`false`: nothing written yet) |
//! | `store` | this replica's store: `healthy`, `degraded-local`, `degraded-ignore-shared`, `degraded-reject-all` |
//! | `replica` | this replica's id |
//!
//! It is the view as last told to this replica (pushed at once, or read at the next flush),
//! so it may lag the store by that much, and more while the store is unreachable (`store`
//! says so). Admin actions are carried out by the store (`SharedCircuitBreaker::force_open`,
//! `force_closed` for `force-closed` and `disable`, `reset`), guarded and audited as any
//! action (the audit line has `fleet=true`): every replica follows, at once by push or at its
//! next flush. A store that fails the action answers `502` naming the error, and nothing
//! changed anywhere.

use crate::admin::Action;
use breaker_core::breaker::CircuitBreaker;
use futures_util::future::BoxFuture;
use std::sync::Arc;

/// A breaker shared by a fleet, as the admin shows and steers it: add one with
/// [`AdminBuilder::shared`](crate::AdminBuilder::shared).
pub trait Shared: Send + Sync + 'static {
    /// The local breaker (its state, counts and policy are shown as any breaker's).
    fn local(&self) -> &CircuitBreaker;

    /// The fleet's view as last known here, as JSON (shown as the row's `fleet`): at least
    /// its `state`; the backend documents the rest.
    fn fleet_view(&self) -> serde_json::Value;

    /// Carries out `action` fleet-wide, through the shared store; resolves to the fleet's
    /// view after it.
    ///
    /// # Errors
    /// The store's error, as text naming what failed; the action then changed nothing,
    /// here or elsewhere.
    fn act(&self, action: Action) -> BoxFuture<'static, Result<serde_json::Value, String>>;
}

/// Where an admin finds the breakers shared through a fleet backend: the library's own
/// (an attribute's, a config scope's, a keyed registry's keys) as well as those the program
/// shared itself. With the `redis` feature, the
/// [installed](https://docs.rs/breaker-redis/latest/breaker_redis/fn.installed.html) store and
/// those added with `AdminBuilder::store` are searched.
pub(crate) trait Index: Send + Sync {
    /// Every breaker without a key shared through it now.
    fn all(&self) -> Vec<Arc<dyn Shared>>;

    /// The fleet side of `breaker`, if it is shared through it.
    fn of(&self, breaker: &CircuitBreaker) -> Option<Arc<dyn Shared>>;
}

/// The indexes an admin searches: the installed store's (with the `redis` feature), then
/// those added.
pub(crate) fn indexes(added: &[Arc<dyn Index>]) -> Vec<Arc<dyn Index>> {
    #[allow(unused_mut)]
    let mut all: Vec<Arc<dyn Index>> = Vec::new();
    #[cfg(feature = "redis")]
    if let Some(store) = breaker_redis::installed() {
        all.push(Arc::new(store.clone()));
    }
    all.extend(added.iter().cloned());
    all
}

/// Sharing through `breaker-redis`: see the [module docs](self).
#[cfg(feature = "redis")]
mod redis {
    use super::{Index, Shared};
    use crate::admin::Action;
    use breaker_core::breaker::CircuitBreaker;
    use breaker_redis::{FleetView, SharedCircuitBreaker, Store, StoreStatus};
    use futures_util::future::BoxFuture;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn store_status(s: StoreStatus) -> &'static str {
        match s {
            StoreStatus::Healthy => "healthy",
            StoreStatus::DegradedLocal => "degraded-local",
            StoreStatus::DegradedIgnoreShared => "degraded-ignore-shared",
            StoreStatus::DegradedRejectAll => "degraded-reject-all",
        }
    }

    fn view_json(shared: &SharedCircuitBreaker, view: &FleetView) -> Value {
        let store = shared.store();
        let now = store.clock().now_nanos();
        let retry_after_ms = view
            .deadline
            .map(|d| d.saturating_sub(now).div_ceil(1_000_000));
        json!({
            "id": shared.id().as_str(),
            "state": view.state.as_str(),
            "generation": view.generation,
            "streak": view.streak,
            "probe_successes": view.probe_successes,
            "probes_in_flight": view.probes_in_flight,
            "retry_after_ms": retry_after_ms,
            "caused_by": view.caused_by.as_ref().map(|r| r.as_str()),
            "reason": view.reason.as_str(),
            "known": view.known,
            "store": store_status(store.status()),
            "replica": store.replica().as_str(),
        })
    }

    impl Shared for SharedCircuitBreaker {
        fn local(&self) -> &CircuitBreaker {
            self.breaker()
        }

        fn fleet_view(&self) -> Value {
            view_json(self, &SharedCircuitBreaker::fleet_view(self))
        }

        fn act(&self, action: Action) -> BoxFuture<'static, Result<Value, String>> {
            let shared = self.clone();
            Box::pin(async move {
                let view = match action {
                    Action::ForceOpen => shared.force_open().await,
                    Action::ForceClosed | Action::Disable => shared.force_closed().await,
                    Action::Reset => shared.reset().await,
                }
                .map_err(|e| e.to_string())?;
                Ok(view_json(&shared, &view))
            })
        }
    }

    impl Index for Store {
        fn all(&self) -> Vec<Arc<dyn Shared>> {
            self.shared_breakers()
                .into_iter()
                .filter(|s| s.breaker().key().is_empty())
                .map(|s| Arc::new(s) as Arc<dyn Shared>)
                .collect()
        }

        fn of(&self, breaker: &CircuitBreaker) -> Option<Arc<dyn Shared>> {
            self.shared_of(breaker)
                .map(|s| Arc::new(s) as Arc<dyn Shared>)
        }
    }
}
