//! Atomics, swapped for loom's model-checked versions under `--cfg loom`.
//!
//! Every atomic of the crate comes from here: the breaker's state (the word, its stamps, the
//! counters, the mirrored policy values, the striped window and totals, the fleet counters,
//! the manual clock), and the counters of the registry, the retry budget and the recorder, so
//! the loom models in `tests/loom.rs` check the code that runs. The one exception is
//! [`process`]: atomics in `static`s, which loom cannot model (they outlive any model run) and
//! which hold no breaker state.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// Process-wide atomics for `static`s that hold no breaker state (the per-thread stripe
/// picker), and for test scaffolding that runs outside any loom model: always `std`'s, also
/// under loom.
pub(crate) mod process {
    #[cfg(test)]
    pub(crate) use std::sync::atomic::AtomicU64;
    pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
}
