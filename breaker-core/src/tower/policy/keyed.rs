//! [`KeyedPolicyLayer`]: a whole policy as one tower layer, with a breaker and a rate limiter
//! per key of the request (a host, a tenant), from bounded registries.

use super::future::{Key, ResponseFuture};
use crate::classify::Classifier;
use crate::error::Rejection;
use crate::pipeline::{AllErrors, Pipeline};
use crate::ratelimit::RateLimiters;
use crate::registry::Registry;
use std::fmt;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Wraps services in a [`KeyedPolicyService`]: a [`Pipeline`] whose breaker and rate limit are
/// each key's own, the key read from each request by `key` (`Fn(&Req) -> String`). The
/// tower form of `#[circuit_breaker(key = .., rate = ".. per key")]` and of
/// [`Pipeline::call_keyed`]; the other layers (bulkhead, retry budget, adaptive limit,
/// throttling) are the pipeline's, shared by every key.
///
/// The keys' layers come from registries: [`breakers`](Self::breakers) (a [`Registry`] of
/// breakers you build and bound; without it every key shares the pipeline's breaker) and, for
/// a pipeline whose rate limit is `per key`, a [`RateLimiters`] of that policy made with the
/// layer (bounded as the attribute's), or the one given to
/// [`rate_limiters`](Self::rate_limiters). A registry for a layer the pipeline does not have
/// is not used. A new key of a full registry is refused at once with [`Rejection::Keys`]
/// (the service is not called).
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::policy::Policy;
/// use breaker::ratelimit::{RateLimitPolicy, RateLimiters};
/// use breaker::tower::policy::KeyedPolicyLayer;
/// use breaker::{Error, Rejection};
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let per_tenant = RateLimitPolicy::per_second(1).burst(1).per_key();
/// let policy = Policy { rate_limit: Some(per_tenant), ..Policy::default() };
/// let tenants: RateLimiters<String> = RateLimiters::builder(per_tenant).max_keys(10_000).build()?;
/// let mut svc = KeyedPolicyLayer::new(&policy, |req: &(String, u32)| req.0.clone())?
///     .rate_limiters(tenants)
///     .layer(service_fn(|(_, n): (String, u32)| async move { Ok::<_, std::io::Error>(n) }));
/// assert_eq!(svc.ready().await?.call(("a".into(), 1)).await?, 1);
/// let refused = svc.ready().await?.call(("a".into(), 2)).await.unwrap_err();
/// assert!(matches!(refused, Error::Rejected(Rejection::RateLimited(_))));
/// assert_eq!(svc.ready().await?.call(("b".into(), 3)).await?, 3); // b has its own limit
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KeyedPolicyLayer<F, C = AllErrors> {
    pipeline: Pipeline,
    classifier: C,
    key: F,
    breakers: Option<Registry<String>>,
    limiters: Option<RateLimiters<String>>,
}

impl<F> KeyedPolicyLayer<F> {
    /// The pipeline of `policy` (as [`PolicyLayer::new`](super::PolicyLayer::new)), keyed by
    /// `key`. Unlike [`PolicyLayer`](super::PolicyLayer), it accepts a rate limit `per key`:
    /// give it the keys' limiters with [`rate_limiters`](Self::rate_limiters).
    ///
    /// # Errors
    /// As [`Pipeline::from_policy`].
    pub fn new(
        policy: &crate::policy::Policy,
        key: F,
    ) -> Result<Self, crate::pipeline::BuildError> {
        Ok(Self::from_pipeline(Pipeline::from_policy(policy)?, key))
    }

    /// A layer running calls through `pipeline`, keyed by `key`. A pipeline whose rate limit
    /// is `per key` gets the keys' limiters from a registry of its policy bounded as the
    /// attribute's are (10,000 keys, idle after 10 minutes and their refill), until
    /// [`rate_limiters`](Self::rate_limiters) gives another.
    pub fn from_pipeline(pipeline: Pipeline, key: F) -> Self {
        let limiters = pipeline
            .rate_limiter()
            .filter(|own| own.policy().per_key)
            .map(|own| {
                RateLimiters::builder(own.policy())
                    .clock(own.clock().clone())
                    .max_keys(crate::__private::DEFAULT_MAX_KEYS)
                    .idle_ttl(crate::__private::DEFAULT_KEY_IDLE)
                    .build()
                    .expect("the pipeline's rate limiter has a valid policy")
            });
        KeyedPolicyLayer {
            pipeline,
            classifier: AllErrors,
            key,
            breakers: None,
            limiters,
        }
    }
}

impl<F, C> KeyedPolicyLayer<F, C> {
    /// Uses `classifier` to judge the inner service's results (see
    /// [`PolicyLayer::with_classifier`](super::PolicyLayer::with_classifier)).
    pub fn with_classifier<C2>(self, classifier: C2) -> KeyedPolicyLayer<F, C2> {
        KeyedPolicyLayer {
            pipeline: self.pipeline,
            classifier,
            key: self.key,
            breakers: self.breakers,
            limiters: self.limiters,
        }
    }

    /// Each key's breaker from `breakers`, in the breaker layer's place.
    pub fn breakers(mut self, breakers: Registry<String>) -> Self {
        self.breakers = Some(breakers);
        self
    }

    /// Each key's rate limiter from `limiters`, in the rate layer's place.
    pub fn rate_limiters(mut self, limiters: RateLimiters<String>) -> Self {
        self.limiters = Some(limiters);
        self
    }

    /// The pipeline the services run calls through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
}

impl<S, F: Clone, C: Clone> Layer<S> for KeyedPolicyLayer<F, C> {
    type Service = KeyedPolicyService<S, F, C>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedPolicyService {
            inner,
            layer: self.clone(),
        }
    }
}

impl<F, C> fmt::Debug for KeyedPolicyLayer<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPolicyLayer")
            .field("pipeline", &self.pipeline)
            .field("breakers", &self.breakers)
            .field("limiters", &self.limiters)
            .finish_non_exhaustive()
    }
}

/// A [`Service`] whose calls run through a [`Pipeline`] with the layers of the request's key;
/// from [`KeyedPolicyLayer`].
#[derive(Clone)]
pub struct KeyedPolicyService<S, F, C = AllErrors> {
    inner: S,
    layer: KeyedPolicyLayer<F, C>,
}

impl<S, F, C> KeyedPolicyService<S, F, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug, F, C> fmt::Debug for KeyedPolicyService<S, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPolicyService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, F, C, Req> Service<Req> for KeyedPolicyService<S, F, C>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    F: Fn(&Req) -> String,
    C: Classifier<S::Response, S::Error> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = crate::Error<S::Error>;
    type Future = ResponseFuture<S::Response, S::Error>;

    /// Forwards to the inner service's `poll_ready`; takes no permit (those are taken per
    /// attempt, inside the call).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let layer = &self.layer;
        let name = (layer.key)(&req);
        let mut key = Key::default();
        if let (Some(breakers), Some(_)) = (&layer.breakers, layer.pipeline.breaker()) {
            match breakers.get_or_create(name.as_str()) {
                Ok(b) => key.breaker = Some(b),
                Err(full) => return refused(full),
            }
        }
        if let (Some(limiters), Some(_)) = (&layer.limiters, layer.pipeline.rate_limiter()) {
            match limiters.get_or_create(name.as_str()) {
                Ok(l) => key.rate = Some(l),
                Err(full) => return refused(full),
            }
        }
        super::start(
            &mut self.inner,
            &layer.pipeline,
            &layer.classifier,
            req,
            key,
        )
    }
}

fn refused<T: Send + 'static, E: Send + 'static>(
    full: crate::registry::RegistryFull,
) -> ResponseFuture<T, E> {
    ResponseFuture::failed(crate::Error::Rejected(Rejection::Keys(full)))
}
