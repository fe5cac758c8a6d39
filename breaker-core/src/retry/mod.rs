//! Retry with bounded attempts and capped, jittered backoff.

mod policy;

pub use policy::{Backoff, Jitter, RetryPolicy};
