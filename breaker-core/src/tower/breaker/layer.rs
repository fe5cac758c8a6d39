use super::BreakerService;
use crate::breaker::CircuitBreaker;
use crate::observe::BreakerMetrics;
use crate::pipeline::AllErrors;
use tower_layer::Layer;

/// Wraps services in a [`BreakerService`] sharing one breaker; see the
/// [module docs](super).
#[derive(Clone, Debug)]
pub struct BreakerLayer<C = AllErrors> {
    breaker: CircuitBreaker,
    classifier: C,
    metrics: BreakerMetrics,
}

impl BreakerLayer {
    /// A layer guarding services with `breaker` (clones of it share its state), classifying
    /// `Ok` as success and `Err` as failure. With the `metrics` feature, registers the call and
    /// rejection counters of the breaker's name now.
    pub fn new(breaker: CircuitBreaker) -> Self {
        let metrics = BreakerMetrics::new(breaker.name());
        BreakerLayer {
            breaker,
            classifier: AllErrors,
            metrics,
        }
    }
}

impl<C> BreakerLayer<C> {
    /// Uses `classifier` (a [`Classifier`](crate::classify::Classifier) of the service's
    /// `Result<Response, Error>`: [`HttpClassifier`](crate::http::HttpClassifier),
    /// [`from_fn`](crate::classify::from_fn), an error classifier, or your own) to turn
    /// results, responses included, into outcomes. With `HttpClassifier` the service's error
    /// must be an [`HttpFailure`](crate::http::HttpFailure) (`reqwest::Error`,
    /// `std::io::Error`, `Box<dyn Error + Send + Sync>`, a layer's `breaker::Error<E>`, ...):
    /// map another client's error into a boxed one (tower's `MapErr`), as
    /// `examples/tower_client.rs` does. The bound is checked where the service is used.
    pub fn with_classifier<C2>(self, classifier: C2) -> BreakerLayer<C2> {
        BreakerLayer {
            breaker: self.breaker,
            classifier,
            metrics: self.metrics,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService {
            inner,
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
            metrics: self.metrics.clone(),
        }
    }
}
