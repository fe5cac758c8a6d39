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
//!   [`RwLock`] over a `hashbrown` table. A lookup of an existing key takes one shard's read
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
use crate::observe;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use hashbrown::HashTable;
use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

mod builder;
#[cfg(test)]
mod tests;

pub use builder::RegistryBuilder;

/// The default number of shards.
pub const DEFAULT_SHARDS: usize = 64;
/// The most shards a registry may have.
pub const MAX_SHARDS: usize = 256;

/// [`Registry::get_or_create`] could not add a key: the registry holds
/// [`max_keys`](RegistryBuilder::max_keys) breakers and none of them could be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("breaker registry is full: {max_keys} keys, none of them idle and closed")]
pub struct RegistryFull {
    max_keys: usize,
    name: &'static str,
}

impl RegistryFull {
    /// The registry's bound.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The name of the registry's breakers (their factory's name; empty if none): for
    /// `#[circuit_breaker(key = ..)]`, the function's.
    pub fn name(&self) -> &str {
        self.name
    }
}

/// One breaker per key. Cloning is cheap and clones share the same keys. See the
/// [module docs](self).
pub struct Registry<K, S = RandomState> {
    inner: Arc<Inner<K, S>>,
}

impl<K, S> Clone for Registry<K, S> {
    fn clone(&self) -> Self {
        Registry {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K, S> {
    shards: Box<[Padded<RwLock<Shard<K>>>]>,
    /// `shard = (hash >> SHARD_SHIFT) & mask`: bits that hashbrown uses neither for the
    /// bucket index (low bits) nor for the control byte (top 7 bits).
    mask: usize,
    hasher: S,
    factory: BreakerFactory,
    max_keys: usize,
    /// Idle TTL in nanoseconds of the factory's clock; `None`: never idle.
    ttl: Option<u64>,
    /// Breakers held, across shards (reserved before an insert, so it never exceeds max_keys).
    len: AtomicUsize,
    /// The earliest clock reading at which a full registry may sweep every shard again.
    next_full_sweep: AtomicU64,
    state_gauge: bool,
    /// Lifetime totals of new breakers: `None` as the factory says.
    totals: Option<bool>,
    /// Renders a key for the breaker's tracing events; see [`RegistryBuilder::build_tagged`].
    tag: Option<fn(&K) -> String>,
}

const SHARD_SHIFT: u32 = 40;

#[repr(align(64))]
struct Padded<T>(T);

struct Shard<K> {
    table: HashTable<(K, Entry)>,
    /// Clock reading of this shard's last sweep.
    last_sweep: u64,
}

struct Entry {
    breaker: CircuitBreaker,
    /// Clock reading (nanoseconds) of the last lookup that returned this breaker, written at
    /// most once per TTL/16 so hot keys do not bounce a cache line between threads.
    last_used: AtomicU64,
}

impl Registry<()> {
    /// Starts configuring a registry whose breakers `factory` creates.
    pub fn builder(factory: BreakerFactory) -> RegistryBuilder {
        RegistryBuilder {
            factory,
            max_keys: usize::MAX,
            ttl: None,
            shards: DEFAULT_SHARDS,
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

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
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
        let hash = self.inner.hasher.hash_one(key);
        let shard = self.shard(hash);
        let now = self.now();
        {
            let guard = read(shard);
            if let Some((_, entry)) = guard.table.find(hash, |(k, _)| k.borrow() == key) {
                return Ok(self.touch(entry, now));
            }
        }
        self.insert_slow(hash, key, now)
    }

    /// The breaker of `key` if it has one; creates nothing. Counts as a use for idle eviction.
    pub fn get<Q>(&self, key: &Q) -> Option<CircuitBreaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.inner.hasher.hash_one(key);
        let now = self.now();
        let guard = read(self.shard(hash));
        guard
            .table
            .find(hash, |(k, _)| k.borrow() == key)
            .map(|(_, e)| self.touch(e, now))
    }

    /// Removes `key`'s breaker whatever its state and returns it. Handles to it that callers
    /// still hold keep working but are no longer the key's breaker: the next
    /// [`get_or_create`](Self::get_or_create) creates a fresh, closed one.
    pub fn remove<Q>(&self, key: &Q) -> Option<CircuitBreaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.inner.hasher.hash_one(key);
        let mut guard = write(self.shard(hash));
        let entry = guard
            .table
            .find_entry(hash, |(k, _)| k.borrow() == key)
            .ok()?;
        let ((_, e), _) = entry.remove();
        drop(guard);
        self.inner.len.fetch_sub(1, Ordering::AcqRel);
        self.untrack(&e.breaker);
        Some(e.breaker)
    }

    /// Removes every evictable breaker: closed, idle for the TTL, not held outside the
    /// registry. Returns how many were removed; always 0 without an idle TTL. Takes each
    /// shard's write lock in turn; O(keys).
    pub fn evict_idle(&self) -> usize {
        if self.inner.ttl.is_none() {
            return 0;
        }
        let now = self.now();
        self.inner
            .shards
            .iter()
            .map(|s| {
                let mut guard = write(&s.0);
                self.sweep(&mut guard, now)
            })
            .sum()
    }

    /// How many breakers the registry holds.
    pub fn len(&self) -> usize {
        self.inner.len.load(Ordering::Acquire)
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound set by [`RegistryBuilder::max_keys`] (`usize::MAX` if unbounded).
    pub fn max_keys(&self) -> usize {
        self.inner.max_keys
    }

    /// The factory that creates this registry's breakers (use it to change the policy of every
    /// key at once with [`BreakerFactory::set_policy`]).
    pub fn factory(&self) -> &BreakerFactory {
        &self.inner.factory
    }

    /// Calls `f` with every key and its breaker, one shard at a time under its read lock
    /// (do not call back into the registry from `f`). Does not count as a use.
    pub fn for_each(&self, mut f: impl FnMut(&K, &CircuitBreaker)) {
        for s in self.inner.shards.iter() {
            let guard = read(&s.0);
            for (k, e) in guard.table.iter() {
                f(k, &e.breaker);
            }
        }
    }

    /// Bytes used by the tables and the breakers (each breaker's
    /// [`memory_bytes`](CircuitBreaker::memory_bytes)), not counting heap data owned by the keys
    /// themselves or the shared policy. O(keys).
    pub fn memory_bytes(&self) -> usize {
        let mut n = std::mem::size_of::<Inner<K, S>>()
            + self.inner.shards.len() * std::mem::size_of::<Padded<RwLock<Shard<K>>>>();
        for s in self.inner.shards.iter() {
            let guard = read(&s.0);
            n += guard.table.allocation_size();
            n += guard
                .table
                .iter()
                .map(|(_, e)| e.breaker.memory_bytes())
                .sum::<usize>();
        }
        n
    }

    #[inline]
    fn shard(&self, hash: u64) -> &RwLock<Shard<K>> {
        &self.inner.shards[(hash >> SHARD_SHIFT) as usize & self.inner.mask].0
    }

    /// The factory clock's reading, or 0 when there is no TTL (then time is never needed).
    #[inline]
    fn now(&self) -> u64 {
        if self.inner.ttl.is_some() {
            self.inner.factory.clock().now_nanos()
        } else {
            0
        }
    }

    #[inline]
    fn touch(&self, entry: &Entry, now: u64) -> CircuitBreaker {
        if let Some(ttl) = self.inner.ttl {
            let last = entry.last_used.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= ttl / 16 && now > last {
                entry.last_used.store(now, Ordering::Relaxed);
            }
        }
        entry.breaker.clone()
    }

    #[cold]
    fn insert_slow<Q>(&self, hash: u64, key: &Q, now: u64) -> Result<CircuitBreaker, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shard = self.shard(hash);
        let mut guard = write(shard);
        if let Some((_, entry)) = guard.table.find(hash, |(k, _)| k.borrow() == key) {
            return Ok(self.touch(entry, now));
        }
        if let Some(ttl) = self.inner.ttl {
            // Amortised sweep: each shard at most once per half TTL, on the insert path.
            if now.saturating_sub(guard.last_sweep) >= ttl / 2 {
                self.sweep(&mut guard, now);
            }
        }
        if !self.reserve() {
            // Full: free what this shard can, then (rate-limited) what the others can.
            if self.sweep(&mut guard, now) == 0 || !self.reserve() {
                drop(guard);
                let may_sweep_all = self.inner.ttl.is_some_and(|ttl| {
                    let next = self.inner.next_full_sweep.load(Ordering::Acquire);
                    now >= next
                        && self
                            .inner
                            .next_full_sweep
                            .compare_exchange(
                                next,
                                now.saturating_add(ttl / 16),
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                });
                if may_sweep_all {
                    self.evict_idle();
                }
                guard = write(shard);
                if let Some((_, entry)) = guard.table.find(hash, |(k, _)| k.borrow() == key) {
                    return Ok(self.touch(entry, now));
                }
                if !self.reserve() {
                    return Err(RegistryFull {
                        max_keys: self.inner.max_keys,
                        name: self.inner.factory.name(),
                    });
                }
            }
        }
        let owned = key.to_owned();
        let key = self.inner.tag.map(|render| render(&owned).into());
        let factory = &self.inner.factory;
        let breaker = factory.create_with(key, self.inner.totals.unwrap_or(factory.totals()));
        if self.inner.state_gauge {
            observe::track(&breaker);
        }
        let entry = Entry {
            breaker: breaker.clone(),
            last_used: AtomicU64::new(now),
        };
        let hasher = &self.inner.hasher;
        guard
            .table
            .insert_unique(hash, (owned, entry), |(k, _)| hasher.hash_one(k));
        Ok(breaker)
    }

    /// Reserves room for one more breaker; `false` if the registry is full.
    fn reserve(&self) -> bool {
        let max = self.inner.max_keys;
        self.inner
            .len
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Drops the evictable breakers of one shard; returns how many.
    fn sweep(&self, shard: &mut Shard<K>, now: u64) -> usize {
        shard.last_sweep = now;
        let Some(ttl) = self.inner.ttl else {
            return 0;
        };
        let idle_after = ttl.saturating_add(ttl / 16);
        let before = shard.table.len();
        shard.table.retain(|(_, e)| {
            let idle = now.saturating_sub(e.last_used.load(Ordering::Relaxed)) >= idle_after;
            // `handle_count() == 1`: only the registry holds it (we hold the shard's write lock,
            // so no lookup can clone it meanwhile).
            let evict = idle && e.breaker.state() == State::Closed && e.breaker.handle_count() == 1;
            if evict {
                self.untrack(&e.breaker);
            }
            !evict
        });
        let removed = before - shard.table.len();
        if removed > 0 {
            self.inner.len.fetch_sub(removed, Ordering::AcqRel);
        }
        removed
    }

    fn untrack(&self, breaker: &CircuitBreaker) {
        if self.inner.state_gauge {
            observe::untrack(breaker);
        }
    }
}

impl<K, S> fmt::Debug for Registry<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.inner.len.load(Ordering::Relaxed))
            .field("max_keys", &self.inner.max_keys)
            .field("shards", &self.inner.shards.len())
            .finish()
    }
}
