//! Lifetime totals of a breaker, striped per thread so that counting never makes threads fight
//! over one cache line (the idea of Java's `LongAdder`, with a fixed stripe count).
//!
//! # Unsafe
//! The table of stripes and each stripe are allocated lazily and published with one
//! compare-and-swap from null each (one atomic word each, so a breaker without totals
//! events holds one null pointer); reading them back needs raw pointers. The rules every block
//! rests on: a cell is written once (null to a pointer, by [`Striped::publish`]), a pointer that
//! lost its race is freed by the thread that made it and seen by no other, and everything
//! published is freed only in `drop` (`&mut self`). Checked by the loom model
//! `totals_publish_once` (`tests/loom.rs`) and by the unit tests here under valgrind's memcheck
//! in CI.
#![allow(unsafe_code)]

use crate::sync::process::{self, AtomicUsize};
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use std::cell::Cell;
#[cfg(not(loom))]
use std::cell::RefCell;
use std::sync::OnceLock;

/// Lifetime totals of one breaker, kept only when asked for
/// ([`BreakerBuilder::totals(true)`](super::BreakerBuilder::totals); off by default) and read
/// from [`Snapshot::totals`](super::Snapshot::totals). Every admitted call ends in exactly one
/// of `succeeded`, `failed`, `ignored` and `cancelled`; `late` counts those outcomes (already
/// included in the four) that arrived after the state had moved on and so changed nothing
/// (case BR-10).
///
/// A call is counted when it ends, not when it is admitted: counting both ends would put a
/// second atomic read-modify-write on every call's path, which costs more than the rest of the
/// breaker's closed path together. Calls still in flight appear in no total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Admitted calls (half-open probes and forced-closed calls included) that have ended:
    /// `succeeded + failed + ignored + cancelled`.
    pub admitted: u64,
    /// Calls rejected by this breaker.
    pub rejected: u64,
    /// Admitted calls recorded as successes.
    pub succeeded: u64,
    /// Admitted calls recorded as failures (panics and our own timeouts included).
    pub failed: u64,
    /// Admitted calls whose outcome was classified as ignored.
    pub ignored: u64,
    /// Admitted calls dropped without an outcome (the caller cancelled).
    pub cancelled: u64,
    /// Outcomes from an earlier generation, which were not applied to the state.
    pub late: u64,
    /// Times the breaker moved to open (tripped or re-opened after a failed probe).
    pub opened: u64,
}

#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    Rejected = 0,
    Succeeded,
    Failed,
    Ignored,
    Cancelled,
    Late,
    Opened,
}

#[repr(align(64))]
struct Stripe([AtomicU64; 7]);

/// The striped counters, allocated as they are first used: a breaker that is made and dropped,
/// or never called, costs one null pointer; its first counted event allocates a table of stripe pointers (one per owner and the
/// shared one: a process constant, [`stripe_count`] + 1, so the pointer alone says where the
/// table ends), and each stripe is allocated by the first event counted in it, so a breaker
/// called from one thread holds one stripe (64 bytes) whatever the CPU count.
///
/// # Owned stripes
/// A counted event is on every call's path, and an atomic read-modify-write (`lock` prefix)
/// costs more than the rest of the closed path. So a thread *owns* one stripe index for as long
/// as it lives (claimed from a process-wide table at its first event, released when it exits),
/// and it is then the only writer of that stripe in every breaker: it adds with a plain load
/// and store, exact because no other thread writes those counters. The release of a stripe
/// (release store) happens before its next owner's claim (acquire), so the next owner starts
/// from the last value written. Threads beyond [`stripe_count`] live at once share the last
/// stripe and add with `fetch_add`. Under loom every thread takes the shared path (loom runs
/// its threads on one OS thread, so a thread-local cannot tell them apart).
pub(crate) struct Striped {
    table: AtomicPtr<AtomicPtr<Stripe>>,
}

/// One stripe per CPU rounded up to a power of two, at most 64. Read once per process:
/// `available_parallelism` reads cgroup files on Linux (tens of microseconds), far too slow to
/// call per breaker.
pub(crate) fn stripe_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .next_power_of_two()
            .min(MAX_STRIPES)
    })
}

const MAX_STRIPES: usize = 64;

/// The stripes a breaker's totals allocate: one per owner, and the shared one.
fn stripes_len() -> usize {
    stripe_count() + 1
}

/// A thread's stripes, packed in one word: bits 0..15 its totals stripe (an owned index below
/// [`stripe_count`], or `stripe_count()` itself, the shared stripe), bit 15 [`SHARED`], and
/// from bit 16 its time-window stripe (see [`thread_index`]).
const SHARED: usize = 1 << 15;
const SLOT_MASK: usize = SHARED - 1;
const WINDOW_SHIFT: u32 = 16;

/// Which stripe indices a live thread owns (0 free, 1 owned).
#[cfg(not(loom))]
static OWNED: [AtomicUsize; MAX_STRIPES] = [const { AtomicUsize::new(0) }; MAX_STRIPES];

thread_local! {
    /// The thread's stripes (the packed word above); `usize::MAX` before the first use. No
    /// destructor, so it is readable while other thread-locals are destroyed.
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[cfg(not(loom))]
thread_local! {
    /// Releases the owned stripe index when the thread exits.
    static OWNER: RefCell<Option<Owner>> = const { RefCell::new(None) };
}

#[cfg(not(loom))]
struct Owner(usize);

#[cfg(not(loom))]
impl Drop for Owner {
    fn drop(&mut self) {
        // Events counted from here on (other thread-locals' destructors) share.
        let _ = INDEX.try_with(|i| i.set((i.get() & !SLOT_MASK) | SHARED | stripe_count()));
        OWNED[self.0].store(0, process::Ordering::Release);
    }
}

/// The thread's packed stripes, assigned on first use.
#[inline(always)]
fn stripes_of_thread() -> usize {
    INDEX.with(|i| {
        let v = i.get();
        if v != usize::MAX {
            return v;
        }
        first_index(i)
    })
}

/// A small per-thread number that picks the thread's stripe of a time window (which masks it
/// to its stripe count and always adds with `fetch_add`): the owned totals index, or for a
/// thread that owns none, a number handed out in turn, so that such threads spread over the
/// window's stripes.
#[inline(always)]
pub(crate) fn thread_index() -> usize {
    stripes_of_thread() >> WINDOW_SHIFT
}

#[cold]
#[inline(never)]
fn first_index(cell: &Cell<usize>) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let v = match claim() {
        Some(i) => i | i << WINDOW_SHIFT,
        None => {
            let turn = NEXT.fetch_add(1, process::Ordering::Relaxed) & (MAX_STRIPES - 1);
            stripe_count() | SHARED | turn << WINDOW_SHIFT
        }
    };
    cell.set(v);
    v
}

/// Claims a free stripe index for this thread, registering its release at thread exit.
#[cfg(not(loom))]
fn claim() -> Option<usize> {
    let i = (0..stripe_count()).find(|&i| {
        OWNED[i]
            .compare_exchange(0, 1, process::Ordering::Acquire, process::Ordering::Relaxed)
            .is_ok()
    })?;
    match OWNER.try_with(|o| *o.borrow_mut() = Some(Owner(i))) {
        Ok(()) => Some(i),
        Err(_) => {
            // The thread is exiting: it cannot release a claim, so it makes none.
            OWNED[i].store(0, process::Ordering::Release);
            None
        }
    }
}

#[cfg(loom)]
fn claim() -> Option<usize> {
    None
}

impl Striped {
    pub(crate) fn new() -> Striped {
        Striped {
            table: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The table of stripe pointers, if any event was counted.
    #[inline(always)]
    fn table(&self) -> Option<&[AtomicPtr<Stripe>]> {
        let p = self.table.load(Ordering::Acquire);
        // SAFETY: `table` is only ever null or the pointer `Box::into_raw` gave for a boxed
        // slice of `stripes_len()` entries (a process constant) in `allocate_table`, whose
        // compare-and-swap from null (release; this load is acquire) is the one write of the
        // cell. The box is freed only in `drop` (`&mut self`), after every borrow of `self`.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, stripes_len()) })
    }

    /// The stripe in `entry`, if one was published there.
    #[inline(always)]
    fn stripe(entry: &AtomicPtr<Stripe>) -> Option<&Stripe> {
        let s = entry.load(Ordering::Acquire);
        // SAFETY: an entry is only ever null or the pointer `Box::into_raw` gave for a boxed
        // stripe in `allocate_stripe`, published by the entry's one compare-and-swap from null
        // (release; this load is acquire), and freed only in `drop` (`&mut self`), so it
        // outlives the borrow of the table (and of `self`) that `entry` comes from.
        (!s.is_null()).then(|| unsafe { &*s })
    }

    /// The stripes allocated so far.
    fn stripes(&self) -> impl Iterator<Item = &Stripe> {
        self.table().unwrap_or(&[]).iter().filter_map(Self::stripe)
    }

    /// Publishes `fresh` in `cell` if it is still empty (null), or frees it with `free` if
    /// another thread published first. The one write of a cell: a cell never changes once set.
    #[cold]
    #[inline(never)]
    fn publish<T>(cell: &AtomicPtr<T>, fresh: *mut T, free: impl FnOnce(*mut T)) {
        if cell
            .compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            free(fresh);
        }
    }

    /// The table, published first if no event was counted yet.
    #[cold]
    #[inline(never)]
    fn allocate_table(&self) -> &[AtomicPtr<Stripe>] {
        let fresh: Box<[AtomicPtr<Stripe>]> = (0..stripes_len())
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        Self::publish(&self.table, Box::into_raw(fresh).cast(), |p| {
            // SAFETY: `p` is the pointer `Box::into_raw` just gave for a boxed slice of
            // `stripes_len()` entries, and the swap that would have published it failed, so no
            // other thread has seen it: it is freed once, here, as the box it was.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, stripes_len())) })
        });
        // Published now, by this thread or another, and never unset while `self` is borrowed.
        self.table().unwrap_or(&[])
    }

    /// The stripe of `entry`, published first if none is there yet.
    #[cold]
    #[inline(never)]
    fn allocate_stripe(entry: &AtomicPtr<Stripe>) -> &Stripe {
        let fresh = Box::new(Stripe(std::array::from_fn(|_| AtomicU64::new(0))));
        Self::publish(entry, Box::into_raw(fresh), |p| {
            // SAFETY: `p` is the pointer `Box::into_raw` just gave, and the swap that would
            // have published it failed, so no other thread has seen it.
            drop(unsafe { Box::from_raw(p) })
        });
        Self::stripe(entry).expect("a published stripe is never unset while its table lives")
    }

    #[inline]
    pub(crate) fn add(&self, counter: Counter) {
        let table = match self.table() {
            Some(table) => table,
            None => self.allocate_table(),
        };
        let v = stripes_of_thread();
        // `v & SLOT_MASK` is at most `stripe_count()`, the table's last index.
        let entry = &table[v & SLOT_MASK];
        let stripe = match Self::stripe(entry) {
            Some(stripe) => stripe,
            None => Self::allocate_stripe(entry),
        };
        let cell = &stripe.0[counter as usize];
        if v & SHARED == 0 {
            // This thread owns the stripe: it is the only writer (see the type's docs).
            cell.store(
                cell.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
        } else {
            cell.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn sum(&self) -> Totals {
        let mut t = [0u64; 7];
        for s in self.stripes() {
            for (acc, c) in t.iter_mut().zip(s.0.iter()) {
                *acc += c.load(Ordering::Relaxed);
            }
        }
        let [rejected, succeeded, failed, ignored, cancelled, late, opened] = t;
        Totals {
            admitted: succeeded + failed + ignored + cancelled,
            rejected,
            succeeded,
            failed,
            ignored,
            cancelled,
            late,
            opened,
        }
    }

    /// Heap bytes of the table and the stripes (0 until the first counted event).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table().map_or(0, std::mem::size_of_val)
            + self.stripes().count() * std::mem::size_of::<Stripe>()
    }
}

impl Drop for Striped {
    fn drop(&mut self) {
        let p = self.table.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a non-null `table` is what `Box::into_raw` gave for a boxed slice of
            // `stripes_len()` entries (see `table`), rebuilt here once, with `&mut self`: no
            // borrow of it is left.
            let table =
                unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, stripes_len())) };
            for e in table.iter() {
                let s = e.load(Ordering::Acquire);
                if !s.is_null() {
                    // SAFETY: a non-null entry is what `Box::into_raw` gave for a boxed stripe
                    // (see `stripe`); each entry is visited once, so it is freed once.
                    drop(unsafe { Box::from_raw(s) });
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
