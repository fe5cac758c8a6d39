//! A lock-free, per-thread striped time window.
//!
//! Why: a time window is where high-traffic breakers record every call. With one shared set of
//! counters, every success would write the same cache lines from every core and throughput would
//! collapse as threads are added. Here each thread writes its own stripe of buckets (one stripe
//! per CPU, rounded up to a power of two), and the window is summed across stripes only when a
//! rule could actually fire:
//!
//! - after every failure and every slow call;
//! - after a success, only if the last evaluation was in an earlier bucket (buckets may have aged
//!   out since, which can raise the rates) or found fewer than `min_calls` calls (this success
//!   may open the gate).
//!
//! Otherwise a success cannot raise a rate (adding a success to `f / c` gives `f / (c + 1)`),
//! so skipping the sum is exact: the rules are still re-evaluated after every outcome that could
//! change their verdict (case BR-14).
//!
//! Each bucket carries a tag `(generation, bucket index)`; a stale tag means "empty", so entering
//! a new closed period or a new bucket resets nothing eagerly. When more threads than stripes
//! share a stripe, a reset racing an increment can lose that one increment; with one thread per
//! stripe the counts are exact.
//!
//! # Memory
//! A stripe is allocated by the first outcome recorded in it: a breaker made and never called
//! holds no stripe, and one called from a single thread holds one. A stripe is its buckets packed
//! side by side (24 bytes each: a 64-bit tag and three 32-bit counts), the stripe as a whole
//! aligned to and padded to 64-byte cache lines so that two stripes never share a line; with
//! 10 buckets a stripe is 256 bytes. The pointers to stripes other than the first live in a table
//! allocated when a second stripe is first written.
//!
//! # Time domain
//! The window is fed readings of one clock for its whole life (`store.rs` picks the coarse clock
//! where the breaker's clock has one, else the precise one); its bucket indices are only ever
//! compared with readings of that same clock.
//!
//! # Unsafe
//! The stripes and their table are allocated lazily and published with one compare-and-swap
//! from null each, so a stripe is one load away and costs nothing until it is written; that
//! needs raw pointers (a `Box<[Bucket]>` can be neither published in one atomic word nor
//! aligned to cache lines). Every block states its argument; the rules they rest on: a cell is
//! written once (null to a pointer, by [`publish`]), a pointer that lost its race is freed by
//! the thread that made it and seen by no other, and everything published is freed only in
//! `drop` (`&mut self`). Checked by the loom model `time_window_stripes_publish_once`
//! (`tests/loom.rs`: two threads race to publish a stripe, and no outcome is lost), and by the
//! unit tests here run under valgrind's memcheck in CI (a double free, a leak, or a read of
//! freed memory fails them).
#![allow(unsafe_code)]

use super::totals::thread_index;
use super::window::WindowCounts;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::alloc::Layout;
use std::ptr;

const INDEX_BITS: u32 = 40;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// A stripe's alignment and the unit its size is rounded up to: one cache line.
const LINE: usize = 64;

#[derive(Default)]
struct Bucket {
    tag: AtomicU64,
    calls: AtomicU32,
    failures: AtomicU32,
    slow: AtomicU32,
}

pub(crate) struct StripedTimeWindow {
    bucket_nanos: u64,
    /// The newest bucket seen, `(index << SLOT_BITS) | slot`: while a reading falls in it, a
    /// call finds its bucket with a multiply and a compare instead of two divisions.
    cursor: AtomicU64,
    /// `(tag << 1) | gate_open` of the newest evaluation.
    last_eval: AtomicU64,
    buckets: u32,
    stripe_mask: u32,
    /// Stripe 0: null until its first outcome, then `buckets` buckets (see [`stripe_layout`]).
    first: AtomicPtr<Bucket>,
    /// Stripes `1..=stripe_mask`: null until one of them is first written, then a table of
    /// `stripe_mask` stripe pointers, each null until its stripe's first outcome.
    rest: AtomicPtr<AtomicPtr<Bucket>>,
}

const SLOT_BITS: u32 = 24;

fn tag(generation: u32, index: u64) -> u64 {
    (u64::from(generation) << INDEX_BITS) | (index & INDEX_MASK)
}

/// The layout of a stripe of `buckets` buckets: packed, aligned to and padded to cache lines.
fn stripe_layout(buckets: usize) -> Layout {
    let bytes = (buckets * std::mem::size_of::<Bucket>()).next_multiple_of(LINE);
    Layout::from_size_align(bytes, LINE).expect("a stripe of at most 2^24 buckets")
}

/// Publishes `fresh` in `cell` if it is still empty (null), or frees it with `free` if another
/// thread published first. The one write of a cell: a cell never changes once set.
fn publish<T>(cell: &AtomicPtr<T>, fresh: *mut T, free: impl FnOnce(*mut T)) {
    if cell
        .compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        free(fresh);
    }
}

impl StripedTimeWindow {
    pub(crate) fn new(bucket_nanos: u64, buckets: u32, stripes: usize) -> Self {
        let stripes = stripes.max(1).next_power_of_two();
        StripedTimeWindow {
            bucket_nanos: bucket_nanos.max(1),
            cursor: AtomicU64::new(0),
            last_eval: AtomicU64::new(u64::MAX),
            buckets: buckets.max(1),
            stripe_mask: (stripes - 1) as u32,
            first: AtomicPtr::new(ptr::null_mut()),
            rest: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Heap bytes of the stripes allocated so far and of the table of further stripes.
    pub(crate) fn heap_bytes(&self) -> usize {
        let table = self.table().map_or(0, std::mem::size_of_val);
        let stripes = (0..=self.stripe_mask as usize)
            .filter(|&s| self.written(s).is_some())
            .count();
        table + stripes * stripe_layout(self.buckets as usize).size()
    }

    /// The table of stripes `1..`, if one of them was written.
    #[inline(always)]
    fn table(&self) -> Option<&[AtomicPtr<Bucket>]> {
        let p = self.rest.load(Ordering::Acquire);
        // SAFETY: `rest` is only ever null or a pointer that `allocate` got from
        // `Box::into_raw` of a boxed slice of `stripe_mask` entries (its one write is the
        // compare-and-swap in `publish`, from null), and the box is freed only in `drop`, which
        // has `&mut self`, so no shared borrow of `self` (this one) outlives it. The acquire load
        // pairs with the release of that swap: the entries' initialisation is visible.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, self.stripe_mask as usize) })
    }

    /// Stripe `s`'s buckets, if an outcome was recorded in it.
    #[inline(always)]
    fn written(&self, s: usize) -> Option<&[Bucket]> {
        let cell = if s == 0 {
            &self.first
        } else {
            self.table()?.get(s - 1)?
        };
        let p = cell.load(Ordering::Acquire);
        // SAFETY: a stripe cell (`first` or an entry of the table) is only ever null or a block
        // that `allocate` got from `stripe_layout(buckets)` and filled with `buckets`
        // initialised buckets before publishing it (the compare-and-swap from null in
        // `publish`, release; this load is acquire, so the buckets' writes are visible). It is
        // freed only in `drop` (`&mut self`), after every borrow of `self` ended.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, self.buckets as usize) })
    }

    /// Stripe `s`'s buckets, allocated if this is its first outcome.
    #[inline(always)]
    fn stripe_to_write(&self, s: usize) -> &[Bucket] {
        if let Some(stripe) = self.written(s) {
            return stripe;
        }
        self.allocate(s)
    }

    /// Publishes stripe `s` (and the table of stripes `1..` if `s` is the first of them to be
    /// written), unless another thread did first, and returns it. A thread that loses a race
    /// frees what it allocated and takes the winner's.
    #[cold]
    #[inline(never)]
    fn allocate(&self, s: usize) -> &[Bucket] {
        let cell = if s == 0 {
            &self.first
        } else {
            if self.rest.load(Ordering::Acquire).is_null() {
                let n = self.stripe_mask as usize;
                let fresh: Box<[AtomicPtr<Bucket>]> =
                    (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
                publish(&self.rest, Box::into_raw(fresh).cast(), |p| {
                    // SAFETY: `p` is the pointer `Box::into_raw` just gave for a boxed slice of
                    // `n` entries, and the swap that would have published it failed, so no other
                    // thread has seen it: it is freed once, here, as the box it was.
                    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) })
                });
            }
            // `rest` is set now (by this thread or another) and never unset while `self` is
            // borrowed, so the table is there (were it not, stripe 0 would do as well: a sum
            // reads every stripe); `1 <= s <= stripe_mask`.
            match self.table() {
                Some(table) => &table[s - 1],
                None => &self.first,
            }
        };
        if cell.load(Ordering::Acquire).is_null() {
            let n = self.buckets as usize;
            let fresh = new_stripe(n);
            publish(cell, fresh, |f| {
                // SAFETY: `f` is the stripe `new_stripe(n)` just made, and the swap that would
                // have published it failed, so no other thread has seen it.
                unsafe { free_stripe(f, n) }
            });
        }
        // Published now, by this thread or another, and never unset while `self` is borrowed.
        self.written(s).unwrap_or_default()
    }

    /// The bucket index of `now` and its slot in the ring.
    #[inline(always)]
    fn locate(&self, now: u64) -> (u64, usize) {
        let c = self.cursor.load(Ordering::Relaxed);
        let index = c >> SLOT_BITS;
        if now.wrapping_sub(index.wrapping_mul(self.bucket_nanos)) < self.bucket_nanos {
            return (index, (c & ((1 << SLOT_BITS) - 1)) as usize);
        }
        self.locate_slow(now)
    }

    #[cold]
    #[inline(never)]
    fn locate_slow(&self, now: u64) -> (u64, usize) {
        let index = now / self.bucket_nanos;
        let slot = (index % u64::from(self.buckets)) as usize;
        // Any thread's value is a correct cache entry (index and slot travel together).
        self.cursor
            .store((index << SLOT_BITS) | slot as u64, Ordering::Relaxed);
        (index, slot)
    }

    /// Records a plain success (neither failure nor slow) of closed-state `generation` at `now`
    /// if it is the steady state: `now` falls in the newest bucket seen, this thread's bucket
    /// there is already tagged for it, and the newest evaluation was in that bucket and found
    /// at least `min_calls` calls, so the success needs no evaluation (see the module docs).
    /// Returns `false`, having changed nothing, otherwise; the caller then calls [`record`].
    ///
    /// [`record`]: StripedTimeWindow::record
    #[inline(always)]
    pub(crate) fn record_steady_success(&self, generation: u32, now: u64) -> bool {
        let c = self.cursor.load(Ordering::Relaxed);
        let index = c >> SLOT_BITS;
        if now.wrapping_sub(index.wrapping_mul(self.bucket_nanos)) >= self.bucket_nanos {
            return false;
        }
        let want = tag(generation, index);
        if self.last_eval.load(Ordering::Acquire) != (want << 1) | 1 {
            return false;
        }
        let Some(stripe) = self.written(thread_index() & self.stripe_mask as usize) else {
            return false;
        };
        // The cursor's slot is below `buckets`, the stripe's length: it starts at 0 and
        // `locate_slow` writes `index % buckets`. (Indexing checks it again: one compare, which
        // an unchecked read does not save within the noise of this path.)
        let b = &stripe[(c & ((1 << SLOT_BITS) - 1)) as usize];
        if b.tag.load(Ordering::Acquire) != want {
            return false;
        }
        b.calls.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Records one outcome of closed-state `generation` at `now`. Returns the window totals if
    /// a rule could fire (see the module docs), `None` if evaluation can be skipped.
    #[inline(always)]
    pub(crate) fn record(
        &self,
        generation: u32,
        now: u64,
        failure: bool,
        slow: bool,
        min_calls: u32,
    ) -> Option<WindowCounts> {
        let stripe = thread_index() & self.stripe_mask as usize;
        self.record_in_stripe(stripe, generation, now, failure, slow, min_calls)
    }

    /// [`record`](StripedTimeWindow::record) in stripe `stripe` (at most `stripe_mask`).
    #[inline(always)]
    fn record_in_stripe(
        &self,
        stripe: usize,
        generation: u32,
        now: u64,
        failure: bool,
        slow: bool,
        min_calls: u32,
    ) -> Option<WindowCounts> {
        let (index, slot) = self.locate(now);
        let want = tag(generation, index);
        let b = &self.stripe_to_write(stripe)[slot];
        let have = b.tag.load(Ordering::Acquire);
        if have != want {
            // A bucket from an earlier lap or generation: claim and clear it. If the tag is
            // *newer* than ours (a clock reading that went backwards), count into it anyway:
            // the sample is not lost, only attributed to a slightly later bucket.
            let have_gen = (have >> INDEX_BITS) as u32;
            let stale = have_gen != generation || (have & INDEX_MASK) < (want & INDEX_MASK);
            if stale
                && b.tag
                    .compare_exchange(have, want, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                b.calls.store(0, Ordering::Relaxed);
                b.failures.store(0, Ordering::Relaxed);
                b.slow.store(0, Ordering::Relaxed);
            }
        }
        b.calls.fetch_add(1, Ordering::Relaxed);
        if failure {
            b.failures.fetch_add(1, Ordering::Relaxed);
        }
        if slow {
            b.slow.fetch_add(1, Ordering::Relaxed);
        }
        if !failure && !slow && self.last_eval.load(Ordering::Acquire) == (want << 1) | 1 {
            return None;
        }
        let counts = self.sum(generation, index);
        self.last_eval.store(
            (want << 1) | u64::from(counts.calls >= min_calls),
            Ordering::Release,
        );
        Some(counts)
    }

    /// The totals of closed-state `generation` as of `now` (a reading of the window's clock).
    pub(crate) fn counts(&self, generation: u32, now: u64) -> WindowCounts {
        self.sum(generation, now / self.bucket_nanos)
    }

    fn sum(&self, generation: u32, index: u64) -> WindowCounts {
        let oldest = index.saturating_sub(u64::from(self.buckets) - 1);
        let mut c = WindowCounts::default();
        for stripe in 0..=self.stripe_mask as usize {
            for b in self.written(stripe).unwrap_or(&[]) {
                let t = b.tag.load(Ordering::Acquire);
                let i = t & INDEX_MASK;
                if (t >> INDEX_BITS) as u32 == generation && i >= oldest && i <= index {
                    c.calls += b.calls.load(Ordering::Relaxed);
                    c.failures += b.failures.load(Ordering::Relaxed);
                    c.slow += b.slow.load(Ordering::Relaxed);
                }
            }
        }
        c
    }
}

/// A new stripe of `n` empty buckets (`n >= 1`), in a block of [`stripe_layout(n)`]: aligned to
/// and padded to cache lines, which a `Box<[Bucket]>` cannot be. Freed by [`free_stripe`].
fn new_stripe(n: usize) -> *mut Bucket {
    let layout = stripe_layout(n);
    // SAFETY: `layout` has a non-zero size (at least one line: `n >= 1` buckets, rounded up),
    // as `alloc` requires. A null result is handled before any use. The block is
    // `n * size_of::<Bucket>()` bytes or more, aligned to 64 >= `align_of::<Bucket>()`, so
    // each of the `n` writes is in bounds and aligned, and writes (not assigns) into
    // uninitialised memory.
    unsafe {
        let fresh = std::alloc::alloc(layout).cast::<Bucket>();
        if fresh.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        for i in 0..n {
            fresh.add(i).write(Bucket::default());
        }
        fresh
    }
}

/// Drops and frees a stripe of `n` buckets.
///
/// # Safety
/// `p` was returned by [`new_stripe(n)`] and is freed once: no other pointer to it is used
/// afterwards.
unsafe fn free_stripe(p: *mut Bucket, n: usize) {
    // SAFETY: by the caller's contract `p` holds `n` initialised buckets in a block of
    // `stripe_layout(n)` that nothing uses after this call: dropping them in place and
    // deallocating with the layout it was allocated with is then valid.
    unsafe {
        ptr::drop_in_place(ptr::slice_from_raw_parts_mut(p, n));
        std::alloc::dealloc(p.cast(), stripe_layout(n));
    }
}

impl Drop for StripedTimeWindow {
    fn drop(&mut self) {
        let n = self.buckets as usize;
        let mut free = |cell: &AtomicPtr<Bucket>| {
            let p = cell.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: a non-null stripe cell holds what `new_stripe(n)` returned (see
                // `written`); `&mut self` means no borrow of a stripe is left, and each cell is
                // visited once, so each stripe is freed once.
                unsafe { free_stripe(p, n) };
            }
        };
        free(&self.first);
        let t = self.rest.load(Ordering::Acquire);
        if !t.is_null() {
            // SAFETY: a non-null `rest` is what `Box::into_raw` gave for a boxed slice of
            // `stripe_mask` entries (see `table`), rebuilt here once, with `&mut self`.
            let table = unsafe {
                Box::from_raw(ptr::slice_from_raw_parts_mut(t, self.stripe_mask as usize))
            };
            table.iter().for_each(&mut free);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
