//! A call with a key's own layers ([`Pipeline::call_keyed`]): the key's breaker (from a
//! [`Registry`](crate::registry::Registry)) and rate limiter (from
//! [`RateLimiters`](crate::ratelimit::RateLimiters)) in the pipeline's places, and the checks
//! that keep a key's layer from being dropped or a `per key` limit from being shared.

use super::runtime::Pipeline;
use crate::breaker::CircuitBreaker;
use crate::classify::Classifier;
use crate::error::Error;
use crate::ratelimit::RateLimiter;
use std::future::Future;

impl Pipeline {
    /// Like [`call_with`](Self::call_with), with `breaker` in place of the pipeline's own
    /// in the same position of the order: what
    /// [`with_breaker(breaker).call_with(..)`](Self::with_breaker) does, without cloning
    /// the pipeline. The way to run one pipeline with a breaker per key, the breaker taken
    /// from a [`Registry`](crate::registry::Registry) per call. A pipeline without a
    /// breaker layer ignores `breaker`. Calls and rejections are counted under the name
    /// of the pipeline's own breaker.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    ///
    /// # Panics
    /// As [`call`](Self::call).
    pub fn call_with_breaker<'a, T: 'a, E: 'a, F, Fut, C>(
        &'a self,
        breaker: &'a CircuitBreaker,
        classifier: &'a C,
        op: F,
    ) -> impl Future<Output = Result<T, Error<E>>> + 'a
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
        C: Classifier<T, E> + ?Sized,
    {
        self.run(
            Layers::Key(self.keyed(KeyLayers::new().breaker(breaker))),
            classifier,
            op,
        )
    }

    /// Like [`call_with`](Self::call_with), with a key's own layers in place of the
    /// pipeline's, each in the same position of the order: its breaker (from a
    /// [`Registry`](crate::registry::Registry)) and its rate limiter (from
    /// [`RateLimiters`](crate::ratelimit::RateLimiters)). What `#[circuit_breaker(key = ..)]`
    /// runs. The pipeline must have the rate layer to run a key's limiter (its place in the
    /// order): build it with the key's policy (`.rate_limit(policy)`). A breaker the pipeline
    /// has no layer for is ignored, as by [`call_with_breaker`](Self::call_with_breaker); a
    /// layer the key does not give is the pipeline's own, except a rate limit `per key`, which
    /// needs the key's. Calls and rejections are counted under the name of the pipeline's own
    /// breaker.
    ///
    /// # Errors
    /// As [`call`](Self::call).
    ///
    /// # Panics
    /// As [`call`](Self::call); and if `key` gives a rate limiter to a pipeline with no rate
    /// limit, or gives none to a pipeline whose rate limit is `per key`.
    ///
    /// ```
    /// # use breaker_core as breaker;
    /// use breaker::pipeline::{AllErrors, KeyLayers, Pipeline};
    /// use breaker::ratelimit::{RateLimitPolicy, RateLimiters};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let per_tenant = RateLimitPolicy::per_second(1).burst(1);
    /// let pipeline = Pipeline::builder().rate_limit(per_tenant).build()?;
    /// let tenants: RateLimiters<String> =
    ///     RateLimiters::builder(per_tenant).max_keys(10_000).build()?;
    /// for (tenant, admitted) in [("a", true), ("a", false), ("b", true)] {
    ///     let limiter = tenants.get_or_create(tenant)?;
    ///     let key = KeyLayers::new().rate_limiter(&limiter);
    ///     let result: Result<u32, breaker::Error<std::io::Error>> =
    ///         pipeline.call_keyed(key, &AllErrors, || async { Ok(7) }).await;
    ///     assert_eq!(result.is_ok(), admitted);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn call_keyed<'a, T: 'a, E: 'a, F, Fut, C>(
        &'a self,
        key: KeyLayers<'a>,
        classifier: &'a C,
        op: F,
    ) -> impl Future<Output = Result<T, Error<E>>> + 'a
    where
        F: FnMut() -> Fut + 'a,
        Fut: Future<Output = Result<T, E>> + 'a,
        C: Classifier<T, E> + ?Sized,
    {
        self.run(Layers::Key(self.keyed(key)), classifier, op)
    }

    /// The pipeline's own breaker and rate limiter.
    ///
    /// # Panics
    /// If the rate limit is `per key`: a call with no key's limiter would share one limit
    /// among all keys (see [`call_keyed`](Self::call_keyed)).
    #[inline]
    pub(crate) fn own_layers(&self) -> KeyLayers<'_> {
        KeyLayers {
            breaker: self.breaker.as_ref(),
            rate: self.rate.as_ref().inspect(|own| {
                if own.policy().per_key {
                    no_key_for_a_limit_per_key()
                }
            }),
        }
    }

    /// A key's layers in place of the pipeline's, for the layers the pipeline has.
    ///
    /// # Panics
    /// If `key` has a rate limiter and the pipeline no rate limit (there is no place in the
    /// order to run it), or the pipeline's rate limit is `per key` and `key` has none.
    #[inline]
    pub(crate) fn keyed<'a>(&'a self, key: KeyLayers<'a>) -> KeyLayers<'a> {
        let rate = match (&self.rate, key.rate) {
            (Some(_), Some(limiter)) => Some(limiter),
            (Some(own), None) if own.policy().per_key => no_key_for_a_limit_per_key(),
            (Some(own), None) => Some(own),
            (None, Some(_)) => panic!(
                "a key's rate limiter was given to a pipeline with no rate limit, which has no \
                 place in its order to run it; add one to the pipeline \
                 (`PipelineBuilder::rate_limit`, the key's policy)"
            ),
            (None, None) => None,
        };
        KeyLayers {
            breaker: self.breaker.as_ref().map(|own| key.breaker.unwrap_or(own)),
            rate,
        }
    }
}

#[cold]
#[track_caller]
fn no_key_for_a_limit_per_key() -> ! {
    panic!(
        "this pipeline's rate limit is `per key`, but the call gave no key's rate limiter: \
         call it with `call_keyed` and a limiter from `RateLimiters`, or with tower through a \
         `KeyedPolicyLayer` (one limit shared by every key is a rate limit without `per key`)"
    )
}

/// The layers of one call ([`Pipeline::run`]): the pipeline's own, or a key's in their places
/// ([`Pipeline::keyed`], checked).
pub(crate) enum Layers<'a> {
    Own,
    Key(KeyLayers<'a>),
}

/// A key's own layers for one call of [`Pipeline::call_keyed`]: the breaker and the rate
/// limiter that take the place of the pipeline's, each in its position of the order. Build it
/// with [`new`](Self::new) and the setters; a layer left unset is the pipeline's own.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyLayers<'a> {
    pub(crate) breaker: Option<&'a CircuitBreaker>,
    pub(crate) rate: Option<&'a RateLimiter>,
}

impl<'a> KeyLayers<'a> {
    /// No layer of the key's own: the call runs with the pipeline's.
    pub fn new() -> Self {
        KeyLayers::default()
    }

    /// The key's breaker, in the breaker layer's position.
    pub fn breaker(self, breaker: &'a CircuitBreaker) -> Self {
        KeyLayers {
            breaker: Some(breaker),
            ..self
        }
    }

    /// The key's rate limiter, in the rate layer's position.
    pub fn rate_limiter(self, limiter: &'a RateLimiter) -> Self {
        KeyLayers {
            rate: Some(limiter),
            ..self
        }
    }
}
