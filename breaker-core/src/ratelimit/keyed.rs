//! [`RateLimiters`]: one rate limit per key, in a bounded registry.

use super::{InvalidRateLimit, RateLimitPolicy, RateLimiter};
use crate::clock::Clock;
use crate::layer::Layer;
use crate::registry::table::{Bounds, Kind, Table};
use crate::registry::RegistryFull;
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::Duration;

/// One [`RateLimiter`] per key (a tenant, a host, an API key), made on first use from one
/// policy and dropped when idle, in a bounded registry: the rate limiter's counterpart of the
/// breakers' [`Registry`](crate::registry::Registry), on the same sharded table (see its
/// module docs for lookups, shards and the bound).
///
/// - **Bounded.** At most [`max_keys`](RateLimitersBuilder::max_keys) limiters. A new key of
///   a full registry first evicts idle limiters; if none is evictable,
///   [`get_or_create`](Self::get_or_create) returns [`RegistryFull`]: a caller that cannot be
///   limited is refused, not let through unlimited.
/// - **Eviction never resets a limit.** A limiter is evicted only when no lookup has returned
///   it for the [idle TTL](RateLimitersBuilder::idle_ttl) *and* for its policy's
///   [`refill`](RateLimitPolicy::refill) time (`(burst + 1) × per / rate`), so its whole burst
///   is back and a new limiter for the key admits exactly what it would have; and only when
///   no one holds it (no clone, no call waiting for a permit). A key cannot get a fresh burst
///   by being evicted. No task, no thread, no timer: idle limiters are dropped on the request
///   path, as the breakers' registry drops idle breakers.
/// - **Memory**: the table slot, the key's own heap data, and the limiter's
///   [`memory_bytes`](RateLimiter::memory_bytes) (measured by the `rate_limiters_scale` test).
///
/// `#[circuit_breaker(key = .., rate = "100/s per key")]` and a config policy whose `rate`
/// says `per key` keep one of these per annotated function, bounded by its `max_keys` and
/// `key_idle`.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::clock::{Clock, ManualClock};
/// use breaker::ratelimit::{RateLimitPolicy, RateLimiters};
/// use std::time::Duration;
///
/// let time = ManualClock::new();
/// let tenants: RateLimiters<String> = RateLimiters::builder(RateLimitPolicy::per_second(10).burst(1))
///     .clock(Clock::manual(&time))
///     .max_keys(10_000)
///     .idle_ttl(Duration::from_secs(600))
///     .build()?;
/// assert!(tenants.get_or_create("a")?.try_acquire().is_ok());
/// assert!(tenants.get_or_create("a")?.try_acquire().is_err()); // a's permit is spent
/// assert!(tenants.get_or_create("b")?.try_acquire().is_ok()); // b has its own
///
/// time.advance(Duration::from_secs(3600));
/// assert_eq!(tenants.evict_idle(), 2); // both idle, their bursts back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimiters<K, S = RandomState> {
    inner: Arc<Table<K, Limiters, S>>,
}

impl<K, S> Clone for RateLimiters<K, S> {
    fn clone(&self) -> Self {
        RateLimiters {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// The limiters of a [`RateLimiters`]: one policy and clock, and when one may be evicted.
struct Limiters {
    policy: RateLimitPolicy,
    clock: Clock,
    name: &'static str,
    /// The policy's refill time in nanoseconds.
    refill: u64,
}

impl<K> Kind<K> for Limiters {
    type Item = RateLimiter;

    fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    fn make(&self, _key: &K) -> RateLimiter {
        RateLimiter::validated(self.policy, self.clock.clone())
    }

    /// Idle for its refill time (its whole burst back: a new one admits the same) and held by
    /// no one but the registry.
    fn evictable(&self, limiter: &RateLimiter, idle: u64) -> bool {
        idle >= self.refill && limiter.handle_count() == 1
    }

    fn bytes(limiter: &RateLimiter) -> usize {
        limiter.memory_bytes()
    }

    fn full(&self, max_keys: usize) -> RegistryFull {
        RegistryFull::new(max_keys, self.name, Layer::RateLimit)
    }
}

impl RateLimiters<()> {
    /// Starts configuring a registry whose limiters all have `policy` (its `per_key` flag is
    /// not read: every key has its own limit here).
    pub fn builder(policy: RateLimitPolicy) -> RateLimitersBuilder {
        RateLimitersBuilder {
            policy,
            clock: Clock::system(),
            name: "",
            bounds: Bounds::DEFAULT,
            hasher: RandomState::new(),
        }
    }
}

impl<K, S> RateLimiters<K, S>
where
    K: Hash + Eq + Clone + Send + Sync,
    S: BuildHasher,
{
    /// The limiter of `key`, made (with its whole burst) if the key has none. Accepts any
    /// borrowed form of the key (`&str` for `String` keys).
    ///
    /// # Errors
    /// [`RegistryFull`] (its [`layer`](RegistryFull::layer) [`Layer::RateLimit`]) if `key` is
    /// new, the registry holds `max_keys` limiters and none of them is evictable.
    #[inline]
    pub fn get_or_create<Q>(&self, key: &Q) -> Result<RateLimiter, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.inner.get_or_create(key)
    }

    /// Takes a permit of `key`'s limiter now (made, with its whole burst, if the key has
    /// none), or says why not. The fast way to limit by key when nothing else needs the
    /// limiter: the key's limiter is read in place under its shard's read lock, where
    /// [`get_or_create`](Self::get_or_create) hands out a handle (two reference-count
    /// updates more).
    ///
    /// # Errors
    /// [`Rejection::RateLimited`](crate::error::Rejection::RateLimited) with the time until
    /// the key's next permit, or [`Rejection::Keys`](crate::error::Rejection::Keys) if the key
    /// is new and the registry is full.
    #[inline]
    pub fn try_acquire<Q>(&self, key: &Q) -> Result<(), crate::error::Rejection>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.inner.with(key, RateLimiter::try_acquire) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(limited)) => Err(limited.into()),
            Err(full) => Err(full.into()),
        }
    }

    /// The limiter of `key` if it has one; makes nothing. Counts as a use.
    pub fn get<Q>(&self, key: &Q) -> Option<RateLimiter>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.get(key)
    }

    /// Removes `key`'s limiter whatever its state and returns it: the key's next call gets a
    /// new limiter, with its whole burst.
    pub fn remove<Q>(&self, key: &Q) -> Option<RateLimiter>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.remove(key)
    }

    /// Removes every evictable limiter (see the type's docs); returns how many. Always 0
    /// without an idle TTL. Takes each shard's write lock in turn; O(keys).
    pub fn evict_idle(&self) -> usize {
        self.inner.evict_idle()
    }
}

impl<K, S> RateLimiters<K, S> {
    /// The policy of every key's limiter.
    pub fn policy(&self) -> RateLimitPolicy {
        self.inner.kind.policy
    }

    /// How many limiters the registry holds.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the registry holds no limiter.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound set by [`RateLimitersBuilder::max_keys`] (`usize::MAX` if unbounded).
    pub fn max_keys(&self) -> usize {
        self.inner.max_keys()
    }

    /// Calls `f` with every key and its limiter, one shard at a time under its read lock (do
    /// not call back into the registry from `f`). Does not count as a use.
    pub fn for_each(&self, f: impl FnMut(&K, &RateLimiter)) {
        self.inner.for_each(f)
    }

    /// Bytes used by the tables and the limiters, not counting heap data owned by the keys.
    /// O(keys).
    pub fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

impl<K, S> fmt::Debug for RateLimiters<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiters")
            .field("policy", &self.inner.kind.policy)
            .field("len", &self.inner.len())
            .field("max_keys", &self.inner.max_keys())
            .field("shards", &self.inner.shard_count())
            .finish()
    }
}

/// Configures a [`RateLimiters`]; from [`RateLimiters::builder`].
pub struct RateLimitersBuilder<S = RandomState> {
    policy: RateLimitPolicy,
    clock: Clock,
    name: &'static str,
    bounds: Bounds,
    hasher: S,
}

impl<S> RateLimitersBuilder<S> {
    /// The clock of every key's limiter, which idle times are measured on too (default: the
    /// system clock; [`Clock::tokio`] on a paused test runtime, [`Clock::manual`] in a test
    /// that moves time by hand).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The name [`RegistryFull::name`] reports (default empty): `#[circuit_breaker]` gives the
    /// function's.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// At most this many limiters (default `usize::MAX`: unbounded). Range `1..`.
    ///
    /// # Panics
    /// If `max_keys` is zero.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.bounds.set_max_keys(max_keys);
        self
    }

    /// Limiters not returned by a lookup for `ttl` (and for their policy's refill time)
    /// become evictable if no one holds them. Eviction happens between `ttl` and
    /// `ttl * 17 / 16` after the last lookup, as in the breakers' registry. Default: none,
    /// limiters are only removed by [`RateLimiters::remove`].
    ///
    /// # Panics
    /// If `ttl` is zero.
    pub fn idle_ttl(mut self, ttl: Duration) -> Self {
        self.bounds.set_idle_ttl(ttl);
        self
    }

    /// The number of shards, rounded up to a power of two, range `1..=256` (default 64).
    ///
    /// # Panics
    /// If `shards` is zero or above [`MAX_SHARDS`](crate::registry::MAX_SHARDS).
    pub fn shards(mut self, shards: usize) -> Self {
        self.bounds.set_shards(shards);
        self
    }

    /// Uses `hasher` for keys instead of std's [`RandomState`]; keep a DoS-resistant one if
    /// clients choose the keys.
    pub fn hasher<S2>(self, hasher: S2) -> RateLimitersBuilder<S2> {
        RateLimitersBuilder {
            policy: self.policy,
            clock: self.clock,
            name: self.name,
            bounds: self.bounds,
            hasher,
        }
    }

    /// Builds the registry.
    ///
    /// # Errors
    /// [`InvalidRateLimit`] naming every value of the policy out of range.
    pub fn build<K>(self) -> Result<RateLimiters<K, S>, InvalidRateLimit> {
        self.policy.validate()?;
        let refill = self.policy.refill().map_or(u64::MAX, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
        });
        let limiters = Limiters {
            policy: self.policy,
            clock: self.clock,
            name: self.name,
            refill,
        };
        Ok(RateLimiters {
            inner: Arc::new(Table::new(limiters, self.hasher, self.bounds)),
        })
    }
}

impl<S> fmt::Debug for RateLimitersBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitersBuilder")
            .field("policy", &self.policy)
            .field("max_keys", &self.bounds.max_keys)
            .field("ttl", &self.bounds.ttl)
            .field("shards", &self.bounds.shards)
            .finish_non_exhaustive()
    }
}
