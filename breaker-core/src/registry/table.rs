//! The bounded, sharded table of keyed values behind [`Registry`](super::Registry) (a breaker
//! per key) and [`RateLimiters`](crate::ratelimit::RateLimiters) (a rate limiter per key):
//! one implementation of lookup, creation on first use, the bound, and idle eviction on the
//! request path. What a table holds, how it makes one and when one may be dropped is its
//! [`Kind`]. The module docs of [`registry`](super) say how it works and why.

use super::RegistryFull;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use hashbrown::HashTable;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// What a [`Table`] holds per key: how it is made, read, judged evictable and forgotten.
pub(crate) trait Kind<K> {
    /// The value per key; cloning it is how a lookup hands it out (a handle, an `Arc`).
    type Item: Clone;

    /// The clock reading, in nanoseconds, that idle times are measured on.
    fn now(&self) -> u64;

    /// A new value for `key`.
    fn make(&self, key: &K) -> Self::Item;

    /// Whether `item`, that no lookup has returned for at least `idle` nanoseconds (and at
    /// least the table's idle TTL), may be dropped: making it again on the key's next use must
    /// change nothing a caller can see (no protection lost, no limit reset), and no one may
    /// hold it outside the table. Called under its shard's write lock, so no lookup can hand
    /// it out meanwhile.
    fn evictable(&self, item: &Self::Item, idle: u64) -> bool;

    /// `item` left the table (removed or evicted).
    fn forget(&self, _item: &Self::Item) {}

    /// Bytes `item` uses, for [`Table::memory_bytes`].
    fn bytes(item: &Self::Item) -> usize;

    /// The table's refusal when it is full.
    fn full(&self, max_keys: usize) -> RegistryFull;
}

/// A table's bound, idle TTL and shard count, as its builder sets them (each setter checks
/// its range, for both registries' builders).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) max_keys: usize,
    pub(crate) ttl: Option<Duration>,
    pub(crate) shards: usize,
}

impl Bounds {
    /// Unbounded, never idle, [`DEFAULT_SHARDS`](super::DEFAULT_SHARDS) shards.
    pub(crate) const DEFAULT: Bounds = Bounds {
        max_keys: usize::MAX,
        ttl: None,
        shards: super::DEFAULT_SHARDS,
    };

    /// # Panics
    /// If `max_keys` is zero.
    pub(crate) fn set_max_keys(&mut self, max_keys: usize) {
        assert!(max_keys > 0, "max_keys must be at least 1");
        self.max_keys = max_keys;
    }

    /// # Panics
    /// If `ttl` is zero.
    pub(crate) fn set_idle_ttl(&mut self, ttl: Duration) {
        assert!(!ttl.is_zero(), "idle_ttl must be non-zero");
        self.ttl = Some(ttl);
    }

    /// # Panics
    /// If `shards` is zero or above [`MAX_SHARDS`](super::MAX_SHARDS).
    pub(crate) fn set_shards(&mut self, shards: usize) {
        assert!(
            (1..=super::MAX_SHARDS).contains(&shards),
            "shards must be in 1..={}, got {shards}",
            super::MAX_SHARDS
        );
        self.shards = shards.next_power_of_two();
    }
}

const SHARD_SHIFT: u32 = 40;

#[repr(align(64))]
struct Padded<T>(T);

struct Shard<K, V> {
    table: HashTable<(K, Entry<V>)>,
    /// Clock reading of this shard's last sweep.
    last_sweep: u64,
}

struct Entry<V> {
    item: V,
    /// Clock reading (nanoseconds) of the last lookup that returned this item, written at
    /// most once per TTL/16 so hot keys do not bounce a cache line between threads.
    last_used: AtomicU64,
}

/// One shard: its lock, on a cache line of its own.
type ShardOf<K, V> = Padded<RwLock<Shard<K, V>>>;

/// A bounded, sharded map from keys to the items of `D`, made on first use and dropped when
/// idle and evictable. See the [module docs](self).
pub(crate) struct Table<K, D: Kind<K>, S> {
    shards: Box<[ShardOf<K, D::Item>]>,
    /// `shard = (hash >> SHARD_SHIFT) & mask`: bits that hashbrown uses neither for the
    /// bucket index (low bits) nor for the control byte (top 7 bits).
    mask: usize,
    hasher: S,
    pub(crate) kind: D,
    max_keys: usize,
    /// Idle TTL in nanoseconds of the kind's clock; `None`: never idle.
    ttl: Option<u64>,
    /// Items held, across shards (reserved before an insert, so it never exceeds max_keys).
    len: AtomicUsize,
    /// The earliest clock reading at which a full table may sweep every shard again.
    next_full_sweep: AtomicU64,
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl<K, D: Kind<K>, S> Table<K, D, S> {
    /// An empty table within `bounds`.
    pub(crate) fn new(kind: D, hasher: S, bounds: Bounds) -> Self {
        let Bounds {
            max_keys,
            ttl,
            shards,
        } = bounds;
        debug_assert!(shards.is_power_of_two());
        Table {
            shards: (0..shards)
                .map(|_| {
                    Padded(RwLock::new(Shard {
                        table: HashTable::new(),
                        last_sweep: 0,
                    }))
                })
                .collect(),
            mask: shards - 1,
            hasher,
            kind,
            max_keys,
            ttl: ttl.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            len: AtomicUsize::new(0),
            next_full_sweep: AtomicU64::new(0),
        }
    }

    /// How many items the table holds.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The bound on items.
    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The number of shards.
    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Calls `f` with every key and its item, one shard at a time under its read lock. Does
    /// not count as a use.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&K, &D::Item)) {
        for s in self.shards.iter() {
            let guard = read(&s.0);
            for (k, e) in guard.table.iter() {
                f(k, &e.item);
            }
        }
    }

    /// Bytes of the table and its items, not counting heap data owned by the keys.
    pub(crate) fn memory_bytes(&self) -> usize {
        let mut n = std::mem::size_of::<Self>()
            + self.shards.len() * std::mem::size_of::<ShardOf<K, D::Item>>();
        for s in self.shards.iter() {
            let guard = read(&s.0);
            n += guard.table.allocation_size();
            n += guard
                .table
                .iter()
                .map(|(_, e)| D::bytes(&e.item))
                .sum::<usize>();
        }
        n
    }
}

impl<K, D, S> Table<K, D, S>
where
    K: Hash + Eq + Clone + Send + Sync,
    D: Kind<K>,
    S: BuildHasher,
{
    /// The item of `key`, made if the key has none.
    ///
    /// # Errors
    /// The kind's [`RegistryFull`] if `key` is new, the table holds `max_keys` items and none
    /// of them is evictable.
    #[inline]
    pub(crate) fn get_or_create<Q>(&self, key: &Q) -> Result<D::Item, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
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

    /// `f` of the item of `key`, made if the key has none, without handing the item out: an
    /// existing key's item is read under its shard's read lock (no clone, so no reference
    /// count moves), which also keeps a sweep from dropping it meanwhile.
    ///
    /// # Errors
    /// As [`get_or_create`](Self::get_or_create).
    #[inline]
    pub(crate) fn with<Q, R>(
        &self,
        key: &Q,
        f: impl FnOnce(&D::Item) -> R,
    ) -> Result<R, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash);
        let now = self.now();
        {
            let guard = read(shard);
            if let Some((_, entry)) = guard.table.find(hash, |(k, _)| k.borrow() == key) {
                self.touch_only(entry, now);
                return Ok(f(&entry.item));
            }
        }
        self.insert_slow(hash, key, now).map(|item| f(&item))
    }

    /// The item of `key` if it has one; makes nothing. Counts as a use.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<D::Item>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let now = self.now();
        let guard = read(self.shard(hash));
        guard
            .table
            .find(hash, |(k, _)| k.borrow() == key)
            .map(|(_, e)| self.touch(e, now))
    }

    /// Removes `key`'s item whatever its state and returns it.
    pub(crate) fn remove<Q>(&self, key: &Q) -> Option<D::Item>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let mut guard = write(self.shard(hash));
        let entry = guard
            .table
            .find_entry(hash, |(k, _)| k.borrow() == key)
            .ok()?;
        let ((_, e), _) = entry.remove();
        drop(guard);
        self.len.fetch_sub(1, Ordering::AcqRel);
        self.kind.forget(&e.item);
        Some(e.item)
    }

    /// Removes every evictable item; returns how many. Always 0 without an idle TTL.
    pub(crate) fn evict_idle(&self) -> usize {
        if self.ttl.is_none() {
            return 0;
        }
        let now = self.now();
        self.shards
            .iter()
            .map(|s| {
                let mut guard = write(&s.0);
                self.sweep(&mut guard, now)
            })
            .sum()
    }

    #[inline]
    fn shard(&self, hash: u64) -> &RwLock<Shard<K, D::Item>> {
        &self.shards[(hash >> SHARD_SHIFT) as usize & self.mask].0
    }

    /// The kind's clock reading, or 0 when there is no TTL (then time is never needed).
    #[inline]
    fn now(&self) -> u64 {
        if self.ttl.is_some() {
            self.kind.now()
        } else {
            0
        }
    }

    #[inline]
    fn touch(&self, entry: &Entry<D::Item>, now: u64) -> D::Item {
        self.touch_only(entry, now);
        entry.item.clone()
    }

    /// Records a use of `entry` at `now` (at most once per TTL/16).
    #[inline]
    fn touch_only(&self, entry: &Entry<D::Item>, now: u64) {
        if let Some(ttl) = self.ttl {
            let last = entry.last_used.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= ttl / 16 && now > last {
                entry.last_used.store(now, Ordering::Relaxed);
            }
        }
    }

    #[cold]
    fn insert_slow<Q>(&self, hash: u64, key: &Q, now: u64) -> Result<D::Item, RegistryFull>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shard = self.shard(hash);
        let mut guard = write(shard);
        if let Some((_, entry)) = guard.table.find(hash, |(k, _)| k.borrow() == key) {
            return Ok(self.touch(entry, now));
        }
        if let Some(ttl) = self.ttl {
            // Amortised sweep: each shard at most once per half TTL, on the insert path.
            if now.saturating_sub(guard.last_sweep) >= ttl / 2 {
                self.sweep(&mut guard, now);
            }
        }
        if !self.reserve() {
            // Full: free what this shard can, then (rate-limited) what the others can.
            if self.sweep(&mut guard, now) == 0 || !self.reserve() {
                drop(guard);
                let may_sweep_all = self.ttl.is_some_and(|ttl| {
                    let next = self.next_full_sweep.load(Ordering::Acquire);
                    now >= next
                        && self
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
                    return Err(self.kind.full(self.max_keys));
                }
            }
        }
        let owned = key.to_owned();
        let item = self.kind.make(&owned);
        let entry = Entry {
            item: item.clone(),
            last_used: AtomicU64::new(now),
        };
        let hasher = &self.hasher;
        guard
            .table
            .insert_unique(hash, (owned, entry), |(k, _)| hasher.hash_one(k));
        Ok(item)
    }

    /// Reserves room for one more item; `false` if the table is full.
    fn reserve(&self) -> bool {
        let max = self.max_keys;
        self.len
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Drops the evictable items of one shard; returns how many.
    fn sweep(&self, shard: &mut Shard<K, D::Item>, now: u64) -> usize {
        shard.last_sweep = now;
        let Some(ttl) = self.ttl else {
            return 0;
        };
        // Last-use times are written at most once per TTL/16: an item read as idle for
        // `ttl + ttl/16` was surely idle for `ttl`, and for its reading less `ttl/16`.
        let granularity = ttl / 16;
        let idle_after = ttl.saturating_add(granularity);
        let before = shard.table.len();
        shard.table.retain(|(_, e)| {
            let read_idle = now.saturating_sub(e.last_used.load(Ordering::Relaxed));
            let evict = read_idle >= idle_after
                && self
                    .kind
                    .evictable(&e.item, read_idle.saturating_sub(granularity));
            if evict {
                self.kind.forget(&e.item);
            }
            !evict
        });
        let removed = before - shard.table.len();
        if removed > 0 {
            self.len.fetch_sub(removed, Ordering::AcqRel);
        }
        removed
    }
}
