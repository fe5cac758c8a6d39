//! Lifetime totals of a breaker, striped per thread so that counting never makes threads fight
//! over one cache line (the idea of Java's `LongAdder`, with a fixed stripe count).

use crate::sync::process::{self, AtomicUsize};
use crate::sync::{AtomicU64, Ordering};
use std::cell::Cell;

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

pub(crate) struct Striped {
    stripes: Box<[Stripe]>,
}

pub(crate) fn stripe_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .next_power_of_two()
        .min(64)
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
        let stripes = (0..stripe_count())
            .map(|_| Stripe(std::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        Striped { stripes }
    }

    #[inline]
    pub(crate) fn add(&self, counter: Counter) {
        let stripe = &self.stripes[thread_index() & (self.stripes.len() - 1)];
        stripe.0[counter as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> Totals {
        let mut t = [0u64; 7];
        for s in self.stripes.iter() {
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

    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.stripes)
    }
}
