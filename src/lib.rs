//! Circuit breaker, retry, timeout and bulkhead for async Rust, with policies checked at compile
//! time.
//!
//! Annotate an async function whose return type is a `Result`:
//!
//! ```
//! use breaker::circuit_breaker;
//!
//! #[derive(Debug)]
//! struct Unavailable;
//!
//! #[circuit_breaker(threshold = 5, cooldown = "30s", retry = "3x exp jitter", timeout = "2s")]
//! async fn get_stock(sku: &str) -> Result<u32, Unavailable> {
//!     let _ = sku;
//!     Ok(7)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! // The rewritten function returns `Result<u32, breaker::Error<Unavailable>>`.
//! match get_stock("abc").await {
//!     Ok(n) => assert_eq!(n, 7),
//!     // Not called at all: the breaker is open. A place for a fallback.
//!     Err(breaker::Error::Rejected(r)) => println!("rejected: {r}"),
//!     Err(e) => println!("failed: {e:?}"),
//! }
//! # }
//! ```
//!
//! A bad policy is a compile error under the offending literal; see [`circuit_breaker`] for
//! every option, the order of the layers and the equivalent code without the attribute.
//!
//! # Where things are
//! - [`pipeline::Pipeline`]: the same layers as a plain Rust API, in a declared order.
//! - [`breaker::CircuitBreaker`]: the lock-free state machine alone, with RAII permits.
//! - [`retry`], [`timeout`], [`bulkhead`]: the policies of the other layers.
//! - [`ratelimit`], [`hedge`], [`adaptive`], [`throttle`]: a GCRA rate limiter, hedging, an
//!   adaptive concurrency limit and client-side adaptive throttling, layers of the same order.
//! - [`dsl`]: the policy strings (`"30s"`, `"3x exp jitter"`), one parser for the attribute,
//!   the config files and your own code.
//! - `config` (feature `config`, on by default): named policies from TOML, YAML or JSON files,
//!   reloadable.
//! - [`registry`]: one breaker per key (host, tenant), bounded, with idle eviction.
//! - [`observe`]: metrics through the `metrics` facade (feature `metrics`); every state
//!   transition is also a `tracing` event.
//! - `tower` (feature `tower`): the same layers for tower stacks.
//! - `http` / `reqwest` (features `http`, `reqwest`): the standard classification by status
//!   code (5xx, 408 and 429 transient; other 4xx neither failure nor transient).
//! - [`Error`]: one error type that keeps apart the operation's error, a local rejection, a
//!   timeout and a retry that gave up.
//!
//! Breaker state is per process: N replicas each keep their own breakers.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

pub use breaker_core::*;
#[doc = include_str!("circuit_breaker.md")]
pub use breaker_macros::circuit_breaker;
