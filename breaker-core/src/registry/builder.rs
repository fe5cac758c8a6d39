//! [`RegistryBuilder`]: a registry's bounds, shards, hasher and metrics.

use super::*;
use std::time::Duration;

/// Configures a [`Registry`]; from [`Registry::builder`].
pub struct RegistryBuilder<S = RandomState> {
    pub(super) factory: BreakerFactory,
    pub(super) bounds: Bounds,
    pub(super) hasher: S,
    pub(super) state_gauge: bool,
    pub(super) totals: Option<bool>,
}

impl<S> RegistryBuilder<S> {
    /// At most this many breakers (default `usize::MAX`: unbounded). Range `1..`.
    ///
    /// # Panics
    /// If `max_keys` is zero.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.bounds.set_max_keys(max_keys);
        self
    }

    /// Breakers not returned by a lookup for `ttl` (by the factory's clock) become evictable if
    /// they are closed and not held outside the registry. Eviction happens between `ttl` and
    /// `ttl * 17 / 16` after the last lookup (last-use times are written at a granularity of
    /// `ttl / 16`). Default: none, breakers are only removed by [`Registry::remove`].
    ///
    /// # Panics
    /// If `ttl` is zero.
    pub fn idle_ttl(mut self, ttl: Duration) -> Self {
        self.bounds.set_idle_ttl(ttl);
        self
    }

    /// The number of shards, rounded up to a power of two, range `1..=256` (default 64). More
    /// shards, less contention between threads that look up different keys.
    ///
    /// # Panics
    /// If `shards` is zero or above [`MAX_SHARDS`].
    pub fn shards(mut self, shards: usize) -> Self {
        self.bounds.set_shards(shards);
        self
    }

    /// Uses `hasher` for keys instead of std's [`RandomState`]. A faster hasher (`foldhash`,
    /// `ahash`) speeds up lookups; keep a DoS-resistant one if clients choose the keys.
    pub fn hasher<S2>(self, hasher: S2) -> RegistryBuilder<S2> {
        RegistryBuilder {
            factory: self.factory,
            bounds: self.bounds,
            hasher,
            state_gauge: self.state_gauge,
            totals: self.totals,
        }
    }

    /// Whether to keep the [`observe::STATE`] gauge of the factory's name up to date as
    /// breakers are created, removed and evicted (default `false`). Turn it on when the
    /// factory's builder went through [`observe::instrument`], which moves the gauge on
    /// transitions. Does nothing without the `metrics` feature.
    pub fn state_gauge(mut self, on: bool) -> Self {
        self.state_gauge = on;
        self
    }

    /// Whether the registry's breakers keep lifetime
    /// [`Totals`](crate::breaker::Totals), whatever the factory says (default: as the
    /// factory was built, see [`BreakerBuilder::totals`](crate::breaker::BreakerBuilder::totals),
    /// which is off unless asked for). Totals cost a stripe table and a 64-byte stripe per
    /// calling thread for every key (see *Memory* in the [module docs](super)); `totals(false)`
    /// keeps a registry of many keys small while the factory's other breakers (a named policy's
    /// own breaker) keep theirs, and `totals(true)` gives the keys totals from a factory
    /// without them.
    pub fn totals(mut self, on: bool) -> Self {
        self.totals = Some(on);
        self
    }

    /// Builds the registry.
    pub fn build<K>(self) -> Registry<K, S> {
        self.build_with(None)
    }

    /// Builds a registry whose breakers carry their key (rendered with `Display`), so their
    /// `tracing` events on transitions and rejections name it (`key = "host-a"`). Costs one
    /// small heap block per breaker holding the key; metric labels stay per name (see
    /// [`observe`]).
    pub fn build_tagged<K: std::fmt::Display>(self) -> Registry<K, S> {
        fn render<K: std::fmt::Display>(k: &K) -> String {
            k.to_string()
        }
        self.build_with(Some(render::<K>))
    }

    fn build_with<K>(self, tag: Option<fn(&K) -> String>) -> Registry<K, S> {
        let breakers = Breakers {
            factory: self.factory,
            state_gauge: self.state_gauge,
            totals: self.totals,
            tag,
        };
        Registry {
            inner: Arc::new(Table::new(breakers, self.hasher, self.bounds)),
        }
    }
}

impl<S> std::fmt::Debug for RegistryBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("max_keys", &self.bounds.max_keys)
            .field("ttl", &self.bounds.ttl)
            .field("shards", &self.bounds.shards)
            .finish_non_exhaustive()
    }
}
