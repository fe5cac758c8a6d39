//! The layers of a pipeline and the order they are stacked in.

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
}

impl Layer {
    /// Every layer, in the default order (outermost first): `bulkhead > retry > breaker > timeout`.
    pub const DEFAULT_ORDER: [Layer; 4] = [
        Layer::Bulkhead,
        Layer::Retry,
        Layer::Breaker,
        Layer::Timeout,
    ];

    /// The name used in the DSL, config files and the attribute.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Timeout => "timeout",
            Layer::Retry => "retry",
            Layer::Breaker => "breaker",
            Layer::Bulkhead => "bulkhead",
        }
    }

    /// Parses a layer name; `None` for anything but `timeout`, `retry`, `breaker`, `bulkhead`.
    pub fn from_name(name: &str) -> Option<Layer> {
        Some(match name {
            "timeout" => Layer::Timeout,
            "retry" => Layer::Retry,
            "breaker" => Layer::Breaker,
            "bulkhead" => Layer::Bulkhead,
            _ => return None,
        })
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
