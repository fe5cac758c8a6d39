//! Breakers shared by a fleet: the fleet's view beside the local one, and admin actions that
//! reach every replica.
//!
//! A fleet-wide breaker has two states worth showing: the local breaker's (what this
//! process's calls see) and the shared store's (what the fleet decided, and who decided it).
//! They differ for a moment after every fleet transition, and for longer when the store is
//! unreachable. An admin action on such a breaker must go to the store, or the next fleet
//! update would undo it here and it would never reach the other replicas. [`Shared`] is what
//! the admin needs of a fleet backend for that; `breaker-redis`'s `SharedCircuitBreaker` is
//! the one this project ships.

use crate::admin::Action;
use breaker_core::breaker::CircuitBreaker;
use futures_util::future::BoxFuture;

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
