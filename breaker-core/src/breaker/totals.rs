//! Lifetime totals of a breaker, striped per thread so that counting never makes threads fight
//! over one cache line (the idea of Java's `LongAdder`, with a fixed stripe count).

use crate::sync::process::{self, AtomicUsize};
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use std::cell::Cell;
use std::sync::OnceLock;

/// Lifetime totals of one breaker. Every admitted call ends in exactly one of `succeeded`,
/// `failed`, `ignored` and `cancelled`; `late` counts those outcomes (already included in the
/// four) that arrived after the state had moved on and so changed nothing (case BR-10).
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

/// The striped counters, allocated at the first counted event: a breaker that is made and
/// dropped, or never called, costs one null pointer (the default `CircuitBreaker::new` stays
/// one small block). The stripe count is a process constant ([`stripe_count`]), so the
/// pointer alone says where the stripes end.
pub(crate) struct Striped {
    stripes: AtomicPtr<Stripe>,
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
            .min(64)
    })
}

/// A small per-thread number, assigned on first use, that picks the thread's stripe (shared by
/// the totals and the time window).
#[inline]
pub(crate) fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|i| {
        let v = i.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT.fetch_add(1, process::Ordering::Relaxed);
        i.set(v);
        v
    })
}

impl Striped {
    pub(crate) fn new() -> Striped {
        Striped {
            stripes: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The stripes, if any event was counted.
    #[inline(always)]
    fn stripes(&self) -> Option<&[Stripe]> {
        let p = self.stripes.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is the start of a boxed slice of `stripe_count()` stripes,
        // published once with release ordering and freed only in `drop` (`&mut self`).
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, stripe_count()) })
    }

    /// Allocates the stripes (or takes the ones another thread published first).
    #[cold]
    #[inline(never)]
    fn allocate(&self) -> &[Stripe] {
        let fresh: Box<[Stripe]> = (0..stripe_count())
            .map(|_| Stripe(std::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        let fresh = Box::into_raw(fresh) as *mut Stripe;
        if let Err(_other) = self.stripes.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: `fresh` came from `Box::into_raw` above and was never published.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(fresh, stripe_count()))
            });
        }
        self.stripes().expect("published above")
    }

    #[inline]
    pub(crate) fn add(&self, counter: Counter) {
        let stripes = match self.stripes() {
            Some(s) => s,
            None => self.allocate(),
        };
        let stripe = &stripes[thread_index() & (stripes.len() - 1)];
        stripe.0[counter as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> Totals {
        let mut t = [0u64; 7];
        for s in self.stripes().unwrap_or(&[]) {
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

    /// Heap bytes of the stripes (0 until the first counted event).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.stripes().map_or(0, std::mem::size_of_val)
    }
}

impl Drop for Striped {
    fn drop(&mut self) {
        let p = self.stripes.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: published by `allocate` from a boxed slice of `stripe_count()` stripes;
            // `&mut self` means no reader is left.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, stripe_count())) });
        }
    }
}
