//! Hedging: when an attempt is slow, start another, and take whichever answers first.
//!
//! # Why
//! Tail latency is mostly bad luck: a call that lands on a busy replica, a paused garbage
//! collector, a lost packet. Retrying cannot help a call that has not failed, only waited; a
//! timeout would throw away the work done. A *hedged* request (Dean and Barroso, "The Tail at
//! Scale", 2013) sends a second copy after the call has taken longer than most calls do, and
//! uses the first answer: at the cost of a few per cent more requests, the slowest calls finish
//! about as fast as the typical one.
//!
//! # How
//! - After [`HedgePolicy::delay`] without an acceptable result, another attempt starts, up to
//!   `max_hedges` beyond the first. The delay is fixed, or a percentile of the latency of
//!   recent attempts (the last 256 acceptable ones, measured from each attempt's own start)
//!   clamped to a range, so a hedge goes out when an attempt is slower than, say, 95% of
//!   recent ones.
//! - **The first acceptable result wins**: a success, or an error the classifier does not
//!   count as a failure (a 404 is an answer). The other attempts are **dropped** at that
//!   moment: cancelled at their next `.await`, their permits (breaker, bulkhead, adaptive
//!   limit) released, and a breaker records nothing for them; a rate-limit permit stays spent
//!   (the request it stood for was sent).
//! - **A failure does not end the call while another attempt may still answer**: a failed
//!   attempt starts the next hedge at once (if any is left), rather than after the delay.
//!   An attempt refused locally by a layer inside the hedge (an open breaker, a rate limit,
//!   the adaptive limit, throttling) starts none at once: another would be refused too, and
//!   counted by the layer that refused it (throttling would see twice the requests). The
//!   others go on, and the next hedge waits for the delay; when nothing is left running, the
//!   call ends with the last failure, or with the refusal when nothing failed.
//! - **Idempotent operations only**, as for retry (case BR-35): a pipeline refuses a hedge
//!   layer for an operation not declared idempotent.
//! - No hedge starts at or after an enclosing limit (a total deadline, a timeout outside the
//!   hedge layer).
//!
//! In a [`Pipeline`](crate::pipeline::Pipeline) the hedge layer's place in the order says
//! what each hedge is: the layers inside it act per attempt (each hedge takes its own breaker
//! permit, bulkhead slot or rate-limit permit, and has its own timeout), those outside it per
//! call. It goes inside retry: each retry attempt is then a hedged group (see the pipeline
//! docs for why `hedge > retry` is refused).
//!
//! ```
//! # use breaker_core as breaker;
//! use breaker::hedge::{Hedge, HedgePolicy};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), breaker::hedge::InvalidHedge> {
//! let hedge = Hedge::new(HedgePolicy::after(Duration::from_millis(50)))?;
//! let start = tokio::time::Instant::now();
//! let answer: Result<&str, ()> = hedge
//!     .run(|attempt| async move {
//!         // The first attempt is stuck; the hedge, sent at 50 ms, answers in 10 ms.
//!         let took = if attempt == 0 { 10_000 } else { 10 };
//!         tokio::time::sleep(Duration::from_millis(took)).await;
//!         Ok(if attempt == 0 { "first" } else { "hedge" })
//!     })
//!     .await;
//! assert_eq!(answer, Ok("hedge"));
//! assert_eq!(start.elapsed(), Duration::from_millis(60));
//! # Ok(()) }
//! ```

mod error;
#[cfg(feature = "tokio")]
mod future;
mod latency;
mod policy;

pub use error::InvalidHedge;
#[cfg(feature = "tokio")]
pub use future::Hedged;
pub use policy::{HedgeDelay, HedgePolicy, MAX_HEDGES};

pub use runtime::{Hedge, Verdict};

mod runtime {
    #[cfg(feature = "tokio")]
    use super::future::Hedged;
    use super::latency::Latencies;
    use super::{HedgeDelay, HedgePolicy, InvalidHedge};
    #[cfg(feature = "tokio")]
    use crate::classify::{Classifier, Outcome};
    use std::fmt;
    #[cfg(feature = "tokio")]
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    /// What a hedged call makes of an attempt's result (the judge of a [`Hedged`] call).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Verdict {
        /// An answer: it ends the call.
        Accept,
        /// A failure: kept, in case no other attempt answers.
        Fail,
        /// A local rejection of the attempt: kept only if nothing else failed.
        Refused,
    }

    /// A hedging policy with its record of recent latencies. See the [module docs](super).
    /// Cloning is cheap and clones share the latencies.
    #[derive(Clone)]
    pub struct Hedge {
        pub(crate) inner: Arc<Inner>,
    }

    pub(crate) struct Inner {
        pub(crate) policy: HedgePolicy,
        latencies: Option<Latencies>,
        /// The name its hedges are counted under.
        pub(crate) name: String,
    }

    impl Hedge {
        /// Hedging with `policy`. Time is tokio's (so a paused test clock drives it).
        ///
        /// # Errors
        /// [`InvalidHedge`] naming every value out of range ([`HedgePolicy::problems`]).
        pub fn new(policy: HedgePolicy) -> Result<Self, InvalidHedge> {
            policy.validate()?;
            let latencies = match policy.delay {
                HedgeDelay::Percentile { percentile, .. } => Some(Latencies::new(percentile)),
                HedgeDelay::Fixed(_) => None,
            };
            Ok(Hedge {
                inner: Arc::new(Inner {
                    policy,
                    latencies,
                    name: String::new(),
                }),
            })
        }

        /// This hedge counting its hedges under `breaker=name` (with the `metrics` feature;
        /// `""` by default). Call it before cloning.
        pub fn name(mut self, name: impl Into<String>) -> Self {
            if let Some(inner) = Arc::get_mut(&mut self.inner) {
                inner.name = name.into();
            }
            self
        }

        /// The policy.
        pub fn policy(&self) -> HedgePolicy {
            self.inner.policy
        }

        /// The delay before the next hedge now: the fixed delay, or the percentile of recent
        /// latencies clamped to its range (its `max` before 64 attempts have completed).
        pub fn delay(&self) -> Duration {
            self.inner.delay()
        }

        /// Notes the latency of an acceptable attempt, measured from that attempt's own start,
        /// for a percentile delay (what a hedged call does when an attempt answers; for a
        /// caller that runs the attempts itself, such as `breaker-sim`'s replay). A fixed
        /// delay ignores it.
        pub fn record_latency(&self, latency: Duration) {
            self.inner.record(latency);
        }

        /// Runs `op` hedged, every `Ok` an answer and every `Err` a failure. `op` is called
        /// with the attempt's number (0 for the first, 1 for the first hedge, ...) and must
        /// return a fresh future each time.
        ///
        /// # Errors
        /// The last attempt's error when no attempt succeeded.
        ///
        /// # Panics
        /// If it must start a timer outside a tokio runtime with the time driver.
        #[cfg(feature = "tokio")]
        pub fn run<T, E, F, Fut>(
            &self,
            op: F,
        ) -> Hedged<'_, F, Fut, impl FnMut(&Result<T, E>) -> Verdict>
        where
            F: FnMut(u32) -> Fut,
            Fut: Future<Output = Result<T, E>>,
        {
            Hedged::new(
                &self.inner,
                op,
                |r: &Result<T, E>| match r {
                    Ok(_) => Verdict::Accept,
                    Err(_) => Verdict::Fail,
                },
                None,
            )
        }

        /// Runs `op` hedged, judging results with `classifier`: a result it calls a failure
        /// does not end the call while another attempt may answer; anything else does.
        ///
        /// # Errors
        /// As [`run`](Self::run).
        ///
        /// # Panics
        /// As [`run`](Self::run).
        #[cfg(feature = "tokio")]
        pub fn run_with<'a, T, E, F, Fut, C>(
            &'a self,
            classifier: &'a C,
            op: F,
        ) -> Hedged<'a, F, Fut, impl FnMut(&Result<T, E>) -> Verdict + 'a>
        where
            F: FnMut(u32) -> Fut,
            Fut: Future<Output = Result<T, E>>,
            C: Classifier<T, E> + ?Sized,
        {
            Hedged::new(
                &self.inner,
                op,
                move |r: &Result<T, E>| match classifier.outcome_of(r.as_ref()) {
                    Outcome::Failure => Verdict::Fail,
                    Outcome::Success | Outcome::Ignored => Verdict::Accept,
                },
                None,
            )
        }

        #[cfg(feature = "tokio")]
        pub(crate) fn inner(&self) -> &Inner {
            &self.inner
        }
    }

    impl Inner {
        pub(crate) fn delay(&self) -> Duration {
            match self.policy.delay {
                HedgeDelay::Fixed(d) => d,
                HedgeDelay::Percentile { min, max, .. } => {
                    match self.latencies.as_ref().and_then(Latencies::percentile) {
                        Some(p) => Duration::from_nanos(p).clamp(min, max),
                        None => max,
                    }
                }
            }
        }

        /// Notes the latency of an acceptable attempt.
        pub(crate) fn record(&self, latency: Duration) {
            if let Some(l) = &self.latencies {
                l.record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
            }
        }
    }

    impl fmt::Debug for Hedge {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Hedge")
                .field("policy", &self.inner.policy)
                .field("delay", &self.delay())
                .finish()
        }
    }
}

#[cfg(all(test, feature = "tokio"))]
mod tests;
