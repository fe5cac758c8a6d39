//! Layer order and bulkhead: see the grammar in the [module docs](super).

use super::error::{tick, DslError};
use super::parse::{fmt_duration, Parser};
use crate::layer::Layer;
use crate::policy::{check_bulkhead, duplicate_layer, BulkheadPolicy};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

const LAYERS: [&str; 4] = ["timeout", "retry", "breaker", "bulkhead"];

fn layer_expected() -> Vec<String> {
    LAYERS.iter().map(|l| tick(l)).collect()
}

/// The nesting of layers, outermost first, as written in the DSL: `timeout > retry > breaker`.
///
/// ```
/// use breaker_core::dsl::Order;
/// use breaker_core::layer::Layer;
/// let order: Order = "timeout > retry > breaker".parse()?;
/// assert_eq!(order.0, [Layer::Timeout, Layer::Retry, Layer::Breaker]);
/// assert_eq!(order.to_string(), "timeout > retry > breaker");
/// # Ok::<(), breaker_core::dsl::DslError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Order(pub Vec<Layer>);

pub(crate) fn parse_order(src: &str) -> Result<Vec<Layer>, DslError> {
    let mut p = Parser::new(src);
    let mut layers: Vec<(Layer, std::ops::Range<usize>)> = Vec::new();
    loop {
        let Some(layer) = p.peek().and_then(|t| Layer::from_name(t.text)) else {
            return Err(p.unexpected("layer", &layer_expected(), &LAYERS));
        };
        let t = p.bump().expect("peeked");
        if let Some((_, first)) = layers.iter().find(|(l, _)| *l == layer) {
            return Err(
                DslError::new(src, t.span.clone(), duplicate_layer(layer)).help(format!(
                    "`{layer}` is already at {}..{}",
                    first.start, first.end
                )),
            );
        }
        layers.push((layer, t.span));
        if p.peek_is(">") {
            p.bump();
            continue;
        }
        p.finish(&[tick(">"), "end of input".to_owned()])?;
        return Ok(layers.into_iter().map(|(l, _)| l).collect());
    }
}

impl fmt::Display for Order {
    /// The layers joined by ` > `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.0.iter().map(|l| l.name()).collect();
        f.write_str(&names.join(" > "))
    }
}

impl FromStr for Order {
    type Err = DslError;

    /// Parses `layer { ">" layer }`, outermost first; each layer at most once.
    ///
    /// # Errors
    /// A [`DslError`] at an unknown layer name or at a layer's second occurrence.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_order(s).map(Order)
    }
}

impl FromStr for Layer {
    type Err = DslError;

    /// Parses one layer name: `timeout`, `retry`, `breaker` or `bulkhead`.
    ///
    /// # Errors
    /// A [`DslError`] naming the token and listing the layers.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = Parser::new(s);
        let Some(layer) = p.peek().and_then(|t| Layer::from_name(t.text)) else {
            return Err(p.unexpected("layer", &layer_expected(), &LAYERS));
        };
        p.bump();
        p.finish(&["end of input".to_owned()])?;
        Ok(layer)
    }
}

pub(crate) fn parse_bulkhead(src: &str) -> Result<BulkheadPolicy, DslError> {
    let mut p = Parser::new(src);
    let start = p.here();
    let (max_concurrent, _) = p.int("a concurrency limit")?;
    p.expect("concurrent")?;
    p.record("max_concurrent", start..p.last_end());
    let mut max_wait = Duration::ZERO;
    if p.peek_is("wait") {
        p.bump();
        let (d, span) = p.duration("a maximum wait")?;
        p.record("max_wait", span);
        max_wait = d;
    }
    p.finish(&[tick("wait"), "end of input".to_owned()])?;
    let policy = BulkheadPolicy {
        max_concurrent,
        max_wait,
    };
    let mut errors = Vec::new();
    check_bulkhead(&policy, &mut errors);
    if errors.is_empty() {
        Ok(policy)
    } else {
        Err(p.field_error(&errors))
    }
}

impl fmt::Display for BulkheadPolicy {
    /// `10 concurrent`, followed by ` wait 100ms` when `max_wait` is not zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} concurrent", self.max_concurrent)?;
        if !self.max_wait.is_zero() {
            write!(f, " wait {}", fmt_duration(self.max_wait))?;
        }
        Ok(())
    }
}

impl FromStr for BulkheadPolicy {
    type Err = DslError;

    /// Parses and validates `int "concurrent" [ "wait" duration ]`.
    ///
    /// # Errors
    /// A [`DslError`] naming the offending token, or at the count if it is out of
    /// `1..=1_000_000`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_bulkhead(s)
    }
}
