//! From a breaker to its fleet handle: the [`SharedCircuitBreaker`]s a [`Store`] holds,
//! whoever shared them. A breaker made shared by the library itself (a
//! `#[circuit_breaker(scope = "shared")]` function, a config policy of a shared scope, a keyed
//! registry's keys) has no handle in the program's hands; status pages and admin tools find
//! it here, to show the fleet's view beside the local state and to act on it fleet-wide.

use super::*;

impl Store {
    /// Every breaker registered with this store now (shared by [`Store::share`], a scope, the
    /// attribute or a keyed registry), sorted by id. A breaker let go (nothing else held it)
    /// is not listed.
    ///
    /// Each handle holds its breaker, as any [`SharedCircuitBreaker`] does: drop them when
    /// done, or a keyed registry's evicted breakers stay registered until they are.
    pub fn shared_breakers(&self) -> Vec<SharedCircuitBreaker> {
        let mut all: Vec<_> = self
            .registered()
            .into_iter()
            .filter_map(|(_, b)| b.handle(self))
            .collect();
        all.sort_by(|a, b| a.id().as_str().cmp(b.id().as_str()));
        all
    }

    /// The fleet handle of `breaker` if it is shared with this store: the breaker registered
    /// under its name (and key), with a fleet hook installed. `None` for a local breaker, a
    /// breaker shared with another store, and a name that is not a valid id.
    pub fn shared_of(&self, breaker: &CircuitBreaker) -> Option<SharedCircuitBreaker> {
        if !breaker.has_fleet_hook() {
            return None;
        }
        let id = if breaker.key().is_empty() {
            BreakerId::new(breaker.name())
        } else {
            BreakerId::keyed(breaker.name(), breaker.key())
        }
        .ok()?;
        self.registered_as(&id)?.handle(self)
    }
}

impl SharedCircuitBreaker {
    /// The store it is shared through (its [`clock`](Store::clock) reads
    /// [`FleetView::deadline`]).
    pub fn store(&self) -> &Store {
        &self.h.store
    }
}

/// The handle of `core`'s breaker with `store`, unless it has been let go or is not shared yet.
pub(super) fn handle(core: Arc<Core>, store: &Store) -> Option<SharedCircuitBreaker> {
    // Registered but not linked yet: `share` is between the two on another thread, and a
    // handle (whose `id` reads the link) exists only once it is shared.
    core.link.get()?;
    let breaker = core.breaker()?;
    Some(SharedCircuitBreaker {
        h: Arc::new(Handle {
            core,
            breaker,
            store: store.clone(),
        }),
    })
}
