//! A pipeline: retry, circuit breaker, timeout, bulkhead, rate limit, hedging, adaptive
//! concurrency limit and adaptive throttling stacked around an async call in a declared order,
//! with an optional fallback outside them all.
//!
//! # Why the order matters
//! The same four layers mean different things in different nestings. Resilience4j's Spring
//! default put retry outside the breaker, so one logical call of 3 attempts counted as 3
//! breaker failures, and retries kept hitting an open breaker (case BR-42). Here the order is
//! always explicit data, checked when the pipeline is built: a layer named twice, an unknown
//! layer, a layer in the order but not configured, or a configured layer left out of an
//! explicit order are [`BuildError`]s.
//!
//! # The default order: `bulkhead > retry > breaker > timeout` (outermost first)
//! - **bulkhead outermost**: the concurrency limit counts *logical* calls. A call holds one
//!   slot across all its attempts and backoff sleeps, so retries cannot multiply the load the
//!   bulkhead admits, and a full bulkhead rejects before any work is done.
//! - **retry outside breaker**: the breaker sees every attempt, so it learns about an outage at
//!   the rate attempts fail and trips early; an open breaker's rejection is never retried, so
//!   retry stops at once instead of hammering it (BR-42 (a)).
//! - **timeout innermost**: each attempt gets its own limit, and a timed-out attempt is a
//!   breaker failure and is retried like any transient error.
//!
//! # The rate limit, hedge, adaptive limit and throttle layers
//! With every layer configured the default order is
//! `bulkhead > retry > breaker > hedge > throttle > rate > adaptive > timeout`:
//! - **hedge inside the breaker**: the breaker sees one outcome per hedged call and holds one
//!   permit for the group; a first attempt that a hedge beat is neither a failure nor a slow
//!   call. **Hedge outside the breaker** (`hedge > breaker`): every hedge is an attempt the
//!   breaker sees, with its own permit; the losers are cancellations, recorded as nothing.
//! - **hedge inside retry**: each retry attempt is one hedged group. **`hedge > retry` is
//!   refused** ([`OrderError::HedgeOutsideRetry`](crate::layer::OrderError::HedgeOutsideRetry)):
//!   each hedge would run its own retry loop, and a hedge could not be cancelled when a
//!   sibling's retry answered.
//! - **throttle, rate and adaptive inside hedge**: every attempt, hedges included, is admitted
//!   separately (each reaches the dependency); a refused hedge leaves the others running.
//!   Outside hedge they admit a call once, however many hedges it sends.
//! - **inside the breaker**, their rejections are local: the breaker records them as ignored.
//!   Inside retry they are never retried. Throttling and the adaptive limit learn nothing from
//!   a refusal by a layer inside them nor from a cancelled call.
//! - **timeout inside hedge**: each attempt has its own timeout. **Outside**: one limit for the
//!   group, and no hedge starts at or after it (nor after the deadline); a rate-limit wait
//!   never outlasts an enclosing limit.
//! - Hedging, like retry, only ever runs an operation declared
//!   [idempotent](PipelineBuilder::idempotent) more than once (case BR-35); a [`Policy`]
//!   or a builder that hedges one not declared idempotent is refused.
//!
//! [`Policy`]: crate::policy::Policy
//!
//! # What each layer sees, in any order
//! A layer sees the result of everything nested inside it.
//!
//! - **Retry outside the breaker** (`retry > breaker`): one outcome per *attempt*. With
//!   `consecutive_failures = 5` and 3 attempts per call, the breaker trips at the 5th attempt,
//!   during the 2nd call; that call's 6th attempt is rejected and returned as
//!   [`Error::Rejected`]. 4 calls make 5 invocations of the operation.
//! - **Breaker outside retry** (`breaker > retry`): one outcome per *logical call*, the
//!   result of the whole retry loop (an [`Error::GaveUp`] is a failure if its last error is).
//!   4 calls of 3 failed attempts make 12 invocations and 4 failures, and the breaker (5 in a
//!   row) stays closed. The breaker holds its permit for the whole loop, backoff included:
//!   mind a slow-call rule and the half-open probe limit.
//! - **Timeout inside retry**: a limit per attempt. **Timeout outside retry**: one limit for all
//!   attempts and sleeps; retry never starts a sleep that would end past it.
//! - **Timeout and breaker**: a timeout raised by the pipeline is a breaker failure whether the
//!   timeout layer is inside or outside the breaker: limits are enforced on the attempt itself,
//!   inside every permit, so the breaker records the failure before its permit is released.
//!   When the caller drops the call's future, nothing is recorded (a cancellation).
//! - **Bulkhead inside retry**: each attempt takes and returns a slot; a full bulkhead is a
//!   rejection and is not retried. **Bulkhead inside the breaker**: a full bulkhead is not a
//!   failure of the dependency; the breaker records it as ignored.
//! - **Total deadline** ([`PipelineBuilder::deadline`]): not a layer of the order; it starts
//!   when the call starts and covers everything, bulkhead wait included.
//! - **Fallback**: always outermost, outside the deadline too. It runs on a local rejection,
//!   on a timeout, and on an error the classifier calls a breaker failure, never on one it
//!   calls ignored (case BR-45), and never on an `Ok`; see [`FallbackOn`].
//!
//! # Results, not only errors
//! A call is judged by a [`Classifier`](crate::classify::Classifier) of its whole result
//! ([`call_with`](Pipeline::call_with); [`call`](Pipeline::call) uses [`AllErrors`]). An `Ok`
//! value can be a failure (an HTTP response with a 503, with
//! [`HttpClassifier`](crate::http::HttpClassifier)): the breaker records it, and the caller
//! still gets `Ok(value)`. If the classifier calls it transient, the retry layer retries it as
//! it would an error (the same attempts, backoff, `Retry-After`, deadline and budget rules);
//! when it gives up, the caller gets the last attempt's `Ok` value, as Polly returns the last
//! result, never an [`Error::GaveUp`].
//!
//! # Retry rules
//! - "3x" is 3 attempts in total. Attempts beyond the first happen only if the operation is
//!   declared [idempotent](PipelineBuilder::idempotent) (case BR-35), so
//!   [`build`](PipelineBuilder::build) refuses a retry of more than one attempt, or a hedge,
//!   on a pipeline not declared idempotent, as a config file or the attribute refuses it.
//! - Retried: errors and `Ok` values the classifier calls
//!   [transient](crate::classify::Classifier::retry_of), and the timeout layer's timeouts.
//!   Never retried, and returned unchanged: non-transient results, local rejections (breaker
//!   or bulkhead), the total deadline.
//! - A retry that wanted to go on after an error but could not returns [`Error::GaveUp`] with
//!   the attempts made, the last error and a [`GiveUpReason`]: attempts exhausted, the next
//!   sleep would end past the deadline ("retry budget exhausted", case BR-32), a server
//!   `Retry-After` longer than the time left ("required delay exceeds remaining budget", case
//!   BR-34), or throttled by a [`RetryBudget`].
//! - A server's `Retry-After` hint replaces the backoff delay (no jitter). It is honoured even
//!   when it exceeds the backoff's cap, as long as it fits before the deadline; without a
//!   deadline it is always honoured.
//!
//! # Metrics
//! With the `metrics` feature a pipeline counts, under the name of its breaker (see
//! [`crate::observe`]): each call the breaker admitted, by outcome (a call dropped by its
//! caller counts as cancelled), each rejection by reason, each retry and each timeout. A
//! breaker the pipeline builds from a policy also counts its transitions and state.
//!
//! # Calling
//! [`Pipeline::call`] takes a closure that returns a *fresh* future per attempt. Nothing on the
//! success path is boxed or allocated: the layers are interpreted by one `async fn` (a pipeline
//! of one breaker and nothing else, by a small future of its own that the compiler can inline
//! into the caller), so a call is one future whose size is known at compile time, and the
//! timer of a timeout is armed only if the attempt does not complete in its first poll (timers
//! and waits are boxed on that slow path, so they do not grow every call's future).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::breaker::BreakerPolicy;
//! use breaker::pipeline::Pipeline;
//! use breaker::retry::RetryPolicy;
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let pipeline = Pipeline::builder()
//!     .breaker_policy(BreakerPolicy::default())
//!     .retry(RetryPolicy::default())
//!     .idempotent(true)
//!     .timeout(Duration::from_secs(1))
//!     .build()
//!     .unwrap();
//! let value: Result<u32, breaker::Error<std::io::Error>> =
//!     pipeline.call(|| async { Ok(42) }).await;
//! assert_eq!(value.unwrap(), 42);
//! # }
//! ```

#[cfg(feature = "tokio")]
mod attempt;
#[cfg(feature = "tokio")]
mod builder;
mod classify;
#[cfg(feature = "tokio")]
mod ctx;
#[cfg(feature = "tokio")]
mod retry_run;
#[cfg(feature = "tokio")]
#[macro_use]
mod segment;
#[cfg(feature = "tokio")]
mod direct;
#[cfg(feature = "tokio")]
mod keyed;
#[cfg(feature = "tokio")]
mod runtime;

#[cfg(feature = "tokio")]
pub use builder::{BuildError, PipelineBuilder};
#[cfg(feature = "http")]
pub(crate) use classify::sealed;
pub use classify::{classifier, AllErrors, ErrorClassifier, FnClassifier, NoHint};

#[cfg(feature = "tokio")]
pub use keyed::KeyLayers;
#[cfg(feature = "tokio")]
pub(crate) use keyed::Layers;
#[cfg(feature = "tokio")]
pub use runtime::Pipeline;

#[cfg(feature = "tokio")]
use crate::retry::{GiveUpReason, RetryBudget};
#[cfg(feature = "tokio")]
use crate::Error;

/// Which errors a fallback is called for. In no case is it called for an error the classifier
/// marks [`Outcome::Ignored`](crate::classify::Outcome::Ignored) or
/// [`Outcome::Success`](crate::classify::Outcome::Success).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FallbackOn {
    /// Only local rejections (an open breaker, a full bulkhead).
    Rejection,
    /// Local rejections, timeouts, and errors classified as breaker failures (also when the
    /// retry layer gave up on them). The default.
    #[default]
    RejectionOrFailure,
}
