//! Per-attempt timeouts and the total deadline.
//!
//! # Why
//! A call that never answers holds a connection, a task, a bulkhead slot and a breaker probe
//! slot for as long as it hangs. A timeout gives them back: when it fires, the future that runs
//! the call is **dropped** at that instant, so its side effects stop at its next `.await` and
//! every permit it holds is released (case BR-46). A timeout only stops futures: blocking,
//! non-async code running inside a poll cannot be pre-empted and delays the timeout until it
//! yields.
//!
//! # How it composes in a [`Pipeline`](crate::pipeline::Pipeline)
//! - The **timeout layer** ([`Layer::Timeout`](crate::layer::Layer::Timeout)) bounds everything
//!   nested inside it in the declared order. Inside retry (the default order) it bounds one
//!   attempt and each attempt gets a fresh timeout; outside retry it bounds all attempts and
//!   backoff sleeps together. It reports [`TimeoutKind::Attempt`].
//! - The **total deadline** is not a layer of the order: it starts when the call starts and
//!   bounds everything (bulkhead wait, attempts, backoff sleeps; the fallback is outside it).
//!   It reports [`TimeoutKind::Deadline`]. A retry never starts a backoff sleep that would end
//!   past it (case BR-32).
//! - Limits nest: each attempt runs until the *earliest* enclosing limit, and the error names
//!   that limit. When two limits end at the same instant, the outer one is reported.
//! - A timeout raised by the pipeline is a **failure** for the circuit breaker in every order:
//!   the limit is enforced on the attempt itself, inside the breaker's permit, so the breaker
//!   records the failure before the permit is released. The caller dropping the pipeline's
//!   future is different: it is a *cancellation*, and the breaker records nothing.
//!
//! The timer is created lazily: an attempt that completes on its first poll never touches
//! tokio's timer wheel. When the timeout layer encloses nothing but the attempt (it is inside
//! retry, the default, or there is no retry), the pipeline does not even read the clock for it
//! until the attempt first returns `Pending`: the limit counts from there, so the time the
//! attempt's first poll spends running synchronously is not counted (it could not have been
//! interrupted anyway). Limits that enclose more than one attempt (the total deadline, a
//! timeout layer outside retry) start when the call, or that layer, is entered.

mod error;
#[cfg(feature = "tokio")]
mod future;

pub use error::{Elapsed, TimeoutKind};
#[cfg(feature = "tokio")]
pub(crate) use future::LazySleep;
#[cfg(feature = "tokio")]
pub use future::Timeout;
