//! Lifetime totals of a breaker, striped per thread so that counting never makes threads fight
//! over one cache line (the idea of Java's `LongAdder`, with a fixed stripe count).

use crate::sync::{AtomicU64, Ordering};
use std::cell::Cell;
use std::sync::atomic::AtomicUsize;

/// Lifetime totals of one breaker. Every admitted call ends in exactly one of `succeeded`,
/// `failed`, `ignored` and `cancelled`; `late` counts those outcomes (already included in the
/// four) that arrived after the state had moved on and so changed nothing (case BR-10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Calls admitted (including half-open probes and forced-closed calls).
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
    Admitted = 0,
    Rejected,
    Succeeded,
    Failed,
    Ignored,
    Cancelled,
    Late,
    Opened,
}

#[repr(align(64))]
struct Stripe([AtomicU64; 8]);

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
        let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        let mut t = [0u64; 8];
        for s in self.stripes.iter() {
            for (acc, c) in t.iter_mut().zip(s.0.iter()) {
                *acc += c.load(Ordering::Relaxed);
            }
        }
        Totals {
            admitted: t[0],
            rejected: t[1],
            succeeded: t[2],
            failed: t[3],
            ignored: t[4],
            cancelled: t[5],
            late: t[6],
            opened: t[7],
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.stripes)
    }
}
