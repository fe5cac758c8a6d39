//! Retry with bounded attempts, capped and jittered backoff, and a retry budget.
//!
//! # Why
//! Most failures of a remote call are brief (a dropped connection, a restarting instance, a
//! full queue), and trying again a little later succeeds. Done carelessly, retrying turns a
//! brief failure into an outage: every client multiplies its load by its attempt count just
//! when the dependency is weakest, synchronised retries arrive in waves, and a retry loop keeps
//! a caller waiting past any useful deadline. The pieces here are each aimed at one of these:
//!
//! - a bounded attempt count; "3x" means **3 attempts in total** (see [`RetryPolicy`]);
//! - a backoff schedule with a hard cap, computed without overflow for every attempt number
//!   (cases BR-26, BR-28; see [`Backoff::delay`]);
//! - jitter, from the AWS "Exponential Backoff and Jitter" analysis, applied so that the cap
//!   stays a hard ceiling (cases BR-30, BR-31; see [`Jitter`]); the random source is a type
//!   parameter of [`Delays`], so tests are deterministic;
//! - a [`RetryBudget`] (gRPC retry throttling) that caps the amplification;
//! - in a [`Pipeline`](crate::pipeline::Pipeline): a retry predicate separate from the
//!   breaker's classification, idempotency (non-idempotent operations are attempted once),
//!   `Retry-After` hints, a total deadline that no backoff sleep may cross, and breaker
//!   rejections that are never retried. See the [pipeline docs](crate::pipeline) for the rules.

mod backoff;
mod budget;
pub(crate) mod defaults;
mod error;
mod policy;

pub use backoff::Delays;
pub use budget::{BudgetError, RetryBudget};
pub use error::GiveUpReason;
pub use policy::{Backoff, Jitter, RetryPolicy};
