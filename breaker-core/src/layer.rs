//! The layers of a pipeline, the order they are stacked in, and the one check of an order.

use std::fmt;

/// One layer of a resilience pipeline. The fallback is not a layer of the order: it always
/// wraps the whole pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The per-attempt timeout (`timeout`).
    Timeout,
    /// Retry with backoff (`retry`).
    Retry,
    /// The circuit breaker (`breaker`).
    Breaker,
    /// The concurrency limit (`bulkhead`).
    Bulkhead,
    /// The rate limiter (`rate`; [`crate::ratelimit`]).
    RateLimit,
    /// Hedging (`hedge`; [`crate::hedge`]).
    Hedge,
    /// The adaptive concurrency limit (`adaptive`; [`crate::adaptive`]).
    Adaptive,
    /// Client-side adaptive throttling (`throttle`; [`crate::throttle`]).
    Throttle,
}

impl Layer {
    /// Every layer, in declaration order (`timeout`, `retry`, `breaker`, `bulkhead`, `rate`,
    /// `hedge`, `adaptive`, `throttle`): the order the DSL lists them in its errors.
    pub const ALL: [Layer; 8] = [
        Layer::Timeout,
        Layer::Retry,
        Layer::Breaker,
        Layer::Bulkhead,
        Layer::RateLimit,
        Layer::Hedge,
        Layer::Adaptive,
        Layer::Throttle,
    ];

    /// Every layer, in the default order (outermost first):
    /// `bulkhead > retry > breaker > hedge > throttle > rate > adaptive > timeout`. The
    /// [pipeline docs](crate::pipeline) say why each goes where it does.
    pub const DEFAULT_ORDER: [Layer; 8] = [
        Layer::Bulkhead,
        Layer::Retry,
        Layer::Breaker,
        Layer::Hedge,
        Layer::Throttle,
        Layer::RateLimit,
        Layer::Adaptive,
        Layer::Timeout,
    ];

    /// The name used in the DSL, config files and the attribute.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Timeout => "timeout",
            Layer::Retry => "retry",
            Layer::Breaker => "breaker",
            Layer::Bulkhead => "bulkhead",
            Layer::RateLimit => "rate",
            Layer::Hedge => "hedge",
            Layer::Adaptive => "adaptive",
            Layer::Throttle => "throttle",
        }
    }

    /// Parses a layer name; `None` for anything but `timeout`, `retry`, `breaker`, `bulkhead`,
    /// `rate`, `hedge`, `adaptive`, `throttle`.
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The layer names in the default order, each in backticks, comma-separated:
    /// `` `bulkhead`, `retry`, `breaker`, `timeout` `` (for "expected one of .." messages).
    pub fn names_in_default_order() -> String {
        let names: Vec<String> = Layer::DEFAULT_ORDER
            .iter()
            .map(|l| format!("`{l}`"))
            .collect();
        names.join(", ")
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with a layer order, as found by [`check_order`]. Positions are indices into
/// the order as given (0 = outermost).
///
/// `Display` is the wording of [`Policy::validate`](crate::policy::Policy::validate) (config
/// files, the DSL); the builder and the attribute word the same facts their own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OrderError {
    /// `layer` is named again at `at`; it was first named at `first`.
    Twice {
        /// The layer.
        layer: Layer,
        /// Its second position.
        at: usize,
        /// Its first position.
        first: usize,
    },
    /// The order names `layer` (at `at`), which is not configured.
    NotConfigured {
        /// The layer.
        layer: Layer,
        /// Its position.
        at: usize,
    },
    /// `layer` is configured but the order leaves it out.
    Missing {
        /// The layer.
        layer: Layer,
    },
    /// `hedge` (at `at`) is outside `retry` (at `inner`): each hedge would run a retry loop of
    /// its own, up to attempts × (hedges + 1) calls, and a hedge could not be cancelled when
    /// a sibling's retry answered.
    HedgeOutsideRetry {
        /// The position of `hedge`.
        at: usize,
        /// The position of `retry`.
        inner: usize,
    },
}

impl OrderError {
    /// The layer the error is about.
    pub fn layer(self) -> Layer {
        match self {
            OrderError::Twice { layer, .. }
            | OrderError::NotConfigured { layer, .. }
            | OrderError::Missing { layer } => layer,
            OrderError::HedgeOutsideRetry { .. } => Layer::Hedge,
        }
    }

    /// The position in the order the error points at, if it is about one item.
    pub fn at(self) -> Option<usize> {
        match self {
            OrderError::Twice { at, .. }
            | OrderError::NotConfigured { at, .. }
            | OrderError::HedgeOutsideRetry { at, .. } => Some(at),
            OrderError::Missing { .. } => None,
        }
    }
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OrderError::Twice { layer, .. } => write!(
                f,
                "layer `{layer}` appears twice; each layer may appear at most once"
            ),
            OrderError::NotConfigured { layer, .. } => write!(
                f,
                "layer `{layer}` is in the order but not configured; configure `{layer}` or \
                 remove it from the order"
            ),
            OrderError::Missing { layer } => write!(
                f,
                "layer `{layer}` is configured but missing from the order; add it"
            ),
            OrderError::HedgeOutsideRetry { .. } => f.write_str(
                "layer `hedge` is outside `retry`: each hedge would run a retry loop of its \
                 own (up to attempts × hedges calls); put `hedge` inside `retry` \
                 (`retry > .. > hedge`), so each retry attempt is one hedged group",
            ),
        }
    }
}

/// The rules of an explicit order, checked in one place for every way of building a pipeline
/// (the builder, [`Policy::validate`](crate::policy::Policy::validate), config files, the DSL
/// and the attribute): each layer at most once, only `configured` layers, every configured
/// layer placed, and `hedge` inside `retry` when both are there.
///
/// Returns every problem: first those about items, in the order's order (a repeated layer is
/// reported once, at its repetition, and not checked again), then the missing layers in
/// [`Layer::DEFAULT_ORDER`]. Empty when the order is valid.
///
/// # Examples
/// ```
/// # use breaker_core as breaker;
/// use breaker::layer::{check_order, Layer, OrderError};
/// let problems = check_order(&[Layer::Retry, Layer::Retry], &[Layer::Retry, Layer::Breaker]);
/// assert_eq!(
///     problems,
///     [
///         OrderError::Twice { layer: Layer::Retry, at: 1, first: 0 },
///         OrderError::Missing { layer: Layer::Breaker },
///     ]
/// );
/// ```
pub fn check_order(order: &[Layer], configured: &[Layer]) -> Vec<OrderError> {
    let mut problems = Vec::new();
    for (at, &layer) in order.iter().enumerate() {
        if let Some(first) = order[..at].iter().position(|l| *l == layer) {
            problems.push(OrderError::Twice { layer, at, first });
        } else if !configured.contains(&layer) {
            problems.push(OrderError::NotConfigured { layer, at });
        }
    }
    for layer in Layer::DEFAULT_ORDER {
        if configured.contains(&layer) && !order.contains(&layer) {
            problems.push(OrderError::Missing { layer });
        }
    }
    let at = |layer| order.iter().position(|l| *l == layer);
    if let (Some(at), Some(inner)) = (at(Layer::Hedge), at(Layer::Retry)) {
        if at < inner {
            problems.push(OrderError::HedgeOutsideRetry { at, inner });
        }
    }
    problems
}
