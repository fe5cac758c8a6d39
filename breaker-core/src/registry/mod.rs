//! Keyed breakers: one [`CircuitBreaker`] per downstream host, endpoint or tenant.
//!
//! # Why
//! One breaker for a whole service hides which of its dependencies is down: a single bad host
//! trips the breaker for all of them. One breaker per key isolates them, but keys often come
//! from clients (a host name, a tenant id), so the set of keys is open-ended. A registry that
//! never forgets a key grows without bound (case BR-24: a service with 5,000 per-key breakers
//! used 1.5 GB), and one that forgets keys carelessly resets protection: evicting an *open*
//! breaker lets traffic through to a dependency that is still down.
//!
//! # How
//! - **Created on first use** from one [`BreakerFactory`], so every key shares one policy,
//!   clock, name and listener set; a key costs only its own state (see *Memory* below).
//! - **Sharded.** Keys are spread over a power-of-two number of shards (64 by default), each a
//!   [`RwLock`](std::sync::RwLock) over a `hashbrown` table. A lookup of an existing key takes one shard's read
//!   lock and clones one `Arc`; two threads contend only when they hit the same shard. The key
//!   is hashed once (with `S`, by default std's DoS-resistant [`RandomState`], because keys may
//!   come from clients).
//! - **Bounded.** At most [`RegistryBuilder::max_keys`] breakers. Creating one more first
//!   evicts idle breakers; if none is evictable, [`Registry::get_or_create`] returns
//!   [`RegistryFull`] (fail loudly rather than grow or forget protection).
//! - **Idle eviction, no background work.** With an idle TTL set, a breaker is *idle* once no
//!   lookup has returned it for the TTL, measured by the factory's [`Clock`](crate::clock::Clock)
//!   (so tests drive it by hand). Idle breakers are dropped on the request path: a shard is swept
//!   when a key is inserted into it and its last sweep is more than half a TTL old, the whole
//!   registry is swept (at most once per TTL/16) when it is full, and
//!   [`Registry::evict_idle`] sweeps on demand. No task, no thread, no timer.
//! - **Eviction never resets protection** (BR-24 caveat). Only a breaker that is
//!   [`State::Closed`], idle for the TTL, and not held anywhere outside the registry (no clone,
//!   no owned permit in flight: only the registry holds a handle) is evicted. Open,
//!   half-open and forced breakers are kept however long they are idle; an open one whose
//!   cooldown has ended reads open until a call promotes it, so it is kept too.
//!   [`Registry::remove`] is the explicit exception: it removes whatever it is asked to.
//!
//! # Memory
//! Per key: the table slot (`size_of::<K>() + 16` bytes plus one control byte, at a load
//! factor between 7/16 and 7/8), the key's own heap data, and the breaker's
//! [`memory_bytes`](CircuitBreaker::memory_bytes) (72 bytes with a consecutive-failure rule and
//! the default, lifetime totals off; a count window adds about its length in bytes). **Totals
//! cost memory per key**: a factory built with
//! [`BreakerBuilder::totals(true)`](crate::breaker::BreakerBuilder::totals) keeps a table of
//! stripe pointers and a 64-byte stripe per calling thread for every breaker, so a registry of
//! many keys should leave them off, or turn them off for its keys alone with
//! [`RegistryBuilder::totals(false)`](RegistryBuilder::totals). Measured: 116 bytes per `u64`
//! key with totals off, 1,000,000 keys (the `registry_scale` test; allocator overhead not
//! counted).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::{BreakerPolicy, CircuitBreaker, State};
//! use breaker::clock::{Clock, ManualClock};
//! use breaker::registry::Registry;
//! use std::time::Duration;
//!
//! let time = ManualClock::new();
//! let factory = CircuitBreaker::builder(BreakerPolicy {
//!     consecutive_failures: Some(1),
//!     ..BreakerPolicy::default()
//! })
//! .name("hosts")
//! .clock(Clock::manual(&time))
//! .totals(false)
//! .build_factory()?;
//! let hosts: Registry<String> = Registry::builder(factory)
//!     .max_keys(10_000)
//!     .idle_ttl(Duration::from_secs(600))
//!     .build();
//!
//! hosts.get_or_create("a.example")?.try_acquire().unwrap().failure();
//! hosts.get_or_create("b.example")?.try_acquire().unwrap().success();
//! assert_eq!(hosts.get("a.example").unwrap().state(), State::Open);
//!
//! time.advance(Duration::from_secs(3600));
//! assert_eq!(hosts.evict_idle(), 1); // b: closed and idle; a stays, it is open
//! assert_eq!(hosts.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::breaker::{BreakerFactory, CircuitBreaker, State};
use crate::layer::Layer;
use crate::observe;
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

mod builder;
pub(crate) mod table;
#[cfg(test)]
mod tests;

pub use builder::RegistryBuilder;
use table::{Bounds, Kind, Table};

/// The default number of shards.
pub const DEFAULT_SHARDS: usize = 64;
/// The most shards a registry may have.
pub const MAX_SHARDS: usize = 256;

/// A keyed registry could not add a key: it holds its
/// [`max_keys`](RegistryBuilder::max_keys) and none of them could be evicted. From
/// [`Registry::get_or_create`] (breakers: none idle and closed) and
/// [`RateLimiters::get_or_create`](crate::ratelimit::RateLimiters::get_or_create) (rate
/// limiters: none idle with its whole burst back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} registry is full: {max_keys} {}, none of them {}",
    what(*.layer),
    if *.max_keys == 1 { "key" } else { "keys" },
    evictable(*.layer)
)]
pub struct RegistryFull {
    max_keys: usize,
    name: &'static str,
    layer: Layer,
}

fn what(layer: Layer) -> &'static str {
    match layer {
        Layer::RateLimit => "rate limiter",
        _ => "breaker",
    }
}

fn evictable(layer: Layer) -> &'static str {
    match layer {
        Layer::RateLimit => "idle with its whole burst back",
        _ => "idle and closed",
    }
}

impl RegistryFull {
    /// The registry's refusal: `max_keys` of its bound, `name` of its breakers or limiters,
    /// `layer` the layer whose registry it is ([`Layer::Breaker`] or [`Layer::RateLimit`]).
    pub(crate) fn new(max_keys: usize, name: &'static str, layer: Layer) -> Self {
        RegistryFull {
            max_keys,
            name,
            layer,
        }
    }

    /// The registry's bound.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The name of the registry's breakers (their factory's name; empty if none) or rate
    /// limiters: for `#[circuit_breaker(key = ..)]`, the function's.
    pub fn name(&self) -> &str {
        self.name
    }

    /// The layer whose keyed registry is full: [`Layer::Breaker`] for a [`Registry`],
    /// [`Layer::RateLimit`] for [`RateLimiters`](crate::ratelimit::RateLimiters).
    pub fn layer(&self) -> Layer {
        self.layer
    }
}

/// One breaker per key. Cloning is cheap and clones share the same keys. See the
/// [module docs](self).
pub struct Registry<K, S = RandomState> {
    inner: Arc<Table<K, Breakers<K>, S>>,
}

impl<K, S> Clone for Registry<K, S> {
    fn clone(&self) -> Self {
        Registry {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// The breakers of a [`Registry`]: how a key's is made, and when one may be evicted.
struct Breakers<K> {
    factory: BreakerFactory,
    state_gauge: bool,
    /// Lifetime totals of new breakers: `None` as the factory says.
    totals: Option<bool>,
    /// Renders a key for the breaker's tracing events; see [`RegistryBuilder::build_tagged`].
    tag: Option<fn(&K) -> String>,
}

impl<K> Kind<K> for Breakers<K> {
    type Item = CircuitBreaker;

    fn now(&self) -> u64 {
        self.factory.clock().now_nanos()
    }

    fn make(&self, key: &K) -> CircuitBreaker {
        let key = self.tag.map(|render| render(key).into());
        let totals = self.totals.unwrap_or(self.factory.totals());
        let breaker = self.factory.create_with(key, totals);
        if self.state_gauge {
            observe::track(&breaker);
        }
        breaker
    }

    /// Closed and held only by the registry (no clone, no owned permit in flight). BR-24:
    /// an open, half-open or forced breaker is kept however long it is idle.
    fn evictable(&self, breaker: &CircuitBreaker, _idle: u64) -> bool {
        breaker.state() == State::Closed && breaker.handle_count() == 1
    }

    fn forget(&self, breaker: &CircuitBreaker) {
        if self.state_gauge {
            observe::untrack(breaker);
        }
    }

    fn bytes(breaker: &CircuitBreaker) -> usize {
        breaker.memory_bytes()
    }

    fn full(&self, max_keys: usize) -> RegistryFull {
        RegistryFull::new(max_keys, self.factory.name(), Layer::Breaker)
    }
}

impl Registry<()> {
    /// Starts configuring a registry whose breakers `factory` creates.
    pub fn builder(factory: BreakerFactory) -> RegistryBuilder {
        RegistryBuilder {
            factory,
            bounds: Bounds::DEFAULT,
            hasher: RandomState::new(),
            state_gauge: false,
            totals: None,
        }
    }
}

impl<K> Registry<K>
where
    K: Hash + Eq + Clone + Send + Sync,
{
    /// An unbounded registry with no idle eviction, 64 shards and std's hasher.
    pub fn new(factory: BreakerFactory) -> Self {
        Registry::builder(factory).build()
    }
}

impl<K, S> Registry<K, S>
where
    K: Hash + Eq + Clone + Send + Sync,
    S: BuildHasher,
{
    /// The breaker of `key`, created (closed) if the key has none.
    ///
    /// Accepts any borrowed form of the key (`&str` for `String` keys).
    ///
    /// # Errors
    /// [`RegistryFull`] if `key` is new, the registry holds `max_keys` breakers and none of them
    /// is evictable (closed, idle for the TTL, not held elsewhere). Nothing is created then: the
    /// caller decides whether to call the dependency unprotected or refuse.
    #[inline]
    pub fn get_or_create<Q>(&self, key: &Q) -> Result<CircuitBreaker, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.inner.get_or_create(key)
    }

    /// The breaker of `key` if it has one; creates nothing. Counts as a use for idle eviction.
    pub fn get<Q>(&self, key: &Q) -> Option<CircuitBreaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.get(key)
    }

    /// Removes `key`'s breaker whatever its state and returns it. Handles to it that callers
    /// still hold keep working but are no longer the key's breaker: the next
    /// [`get_or_create`](Self::get_or_create) creates a fresh, closed one.
    pub fn remove<Q>(&self, key: &Q) -> Option<CircuitBreaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.remove(key)
    }

    /// Removes every evictable breaker: closed, idle for the TTL, not held outside the
    /// registry. Returns how many were removed; always 0 without an idle TTL. Takes each
    /// shard's write lock in turn; O(keys).
    pub fn evict_idle(&self) -> usize {
        self.inner.evict_idle()
    }
}

impl<K, S> Registry<K, S> {
    /// How many breakers the registry holds.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound set by [`RegistryBuilder::max_keys`] (`usize::MAX` if unbounded).
    pub fn max_keys(&self) -> usize {
        self.inner.max_keys()
    }

    /// The factory that creates this registry's breakers (use it to change the policy of every
    /// key at once with [`BreakerFactory::set_policy`]).
    pub fn factory(&self) -> &BreakerFactory {
        &self.inner.kind.factory
    }

    /// Calls `f` with every key and its breaker, one shard at a time under its read lock
    /// (do not call back into the registry from `f`). Does not count as a use.
    pub fn for_each(&self, f: impl FnMut(&K, &CircuitBreaker)) {
        self.inner.for_each(f)
    }

    /// Bytes used by the tables and the breakers (each breaker's
    /// [`memory_bytes`](CircuitBreaker::memory_bytes)), not counting heap data owned by the keys
    /// themselves or the shared policy. O(keys).
    pub fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

impl<K, S> fmt::Debug for Registry<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.inner.len())
            .field("max_keys", &self.inner.max_keys())
            .field("shards", &self.inner.shard_count())
            .finish()
    }
}
