//! Atomics, swapped for loom's model-checked versions under `--cfg loom`.
//!
//! Every atomic of the breaker's state (the word, its stamps, the counters, the mirrored policy
//! values, the striped window and totals, the manual clock) comes from here, so the loom models
//! in `tests/loom.rs` check the code that runs. The one exception is [`process`]: counters in
//! `static`s, which loom cannot model (they outlive any model run) and which hold no breaker
//! state.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Process-wide atomics for `static`s that hold no breaker state (the per-thread stripe
/// picker): always `std`'s, also under loom.
pub(crate) mod process {
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
}
