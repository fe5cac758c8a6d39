//! Layer order and bulkhead: see the grammar in the [module docs](super).

use super::parser;
use crate::bulkhead::policy::BULKHEAD_MAX_WAIT;
use crate::bulkhead::{check_bulkhead, BulkheadPolicy};
use crate::field::Field;
use crate::layer::{check_order, Layer, OrderError};
use crate::syntax::{fmt_duration, shown_span, tick, DslError, Parser};
use std::fmt;
use std::str::FromStr;

/// The next token as a layer name, or the error listing the layers.
fn layer(p: &mut Parser<'_>) -> Result<(Layer, std::ops::Range<usize>), DslError> {
    let names = Layer::ALL.map(Layer::name);
    let Some(layer) = p.peek().and_then(|t| Layer::from_name(t.text)) else {
        let expected: Vec<String> = names.iter().map(|l| tick(l)).collect();
        return Err(p.unexpected("layer", &expected, &names));
    };
    Ok((layer, p.bump().expect("peeked").span))
}

/// The nesting of layers, outermost first, as written in the DSL: `timeout > retry > breaker`.
///
/// ```
/// # use breaker_core as breaker;
/// use breaker::dsl::Order;
/// use breaker::layer::Layer;
/// let order: Order = "timeout > retry > breaker".parse()?;
/// assert_eq!(order.0, [Layer::Timeout, Layer::Retry, Layer::Breaker]);
/// assert_eq!(order.to_string(), "timeout > retry > breaker");
/// # Ok::<(), breaker::dsl::DslError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Order(pub Vec<Layer>);

pub(crate) fn parse_order(src: &str) -> Result<Vec<Layer>, DslError> {
    let mut p = parser(src);
    let mut layers = Vec::new();
    let mut spans = Vec::new();
    loop {
        let (l, span) = layer(&mut p)?;
        layers.push(l);
        spans.push(span);
        // Whether the named layers are configured is the policy's business: here only the
        // rules an order has on its own apply (each layer once, `hedge` inside `retry`).
        if let Some(&problem) = check_order(&layers, &layers).first() {
            let (at, other, what) = match problem {
                OrderError::Twice { at, first, .. } => (at, first, format!("`{l}` is already")),
                OrderError::HedgeOutsideRetry { at, inner } => (at, inner, "`retry` is".to_owned()),
                _ => unreachable!(
                    "an order naming only itself can only repeat a layer or misplace `hedge`"
                ),
            };
            return Err(DslError::new(src, spans[at].clone(), problem.to_string())
                .help(format!("{what} at {}", shown_span(src, &spans[other]))));
        }
        if p.peek_is(">") {
            p.bump();
            continue;
        }
        p.finish(&[tick(">"), "end of input".to_owned()])?;
        return Ok(layers);
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
        let mut p = parser(s);
        let (l, _) = layer(&mut p)?;
        p.finish(&["end of input".to_owned()])?;
        Ok(l)
    }
}

pub(crate) fn parse_bulkhead(src: &str) -> Result<BulkheadPolicy, DslError> {
    let mut p = parser(src);
    let policy = bulkhead(&mut p)?;
    p.validated(policy, check_bulkhead)
}

/// Parses a bulkhead written in a config file: the policy (defaults for what it does not
/// write) and the fields it writes (see `Parser::written_validated`).
pub(crate) fn parse_bulkhead_written(src: &str) -> Result<(BulkheadPolicy, Vec<Field>), DslError> {
    let mut p = parser(src);
    let policy = bulkhead(&mut p)?;
    p.written_validated(policy, check_bulkhead)
}

fn bulkhead(p: &mut Parser<'_>) -> Result<BulkheadPolicy, DslError> {
    let start = p.here();
    let (max_concurrent, _) = p.int("a concurrency limit")?;
    p.expect("concurrent")?;
    p.record(Field::MaxConcurrent, start..p.last_end());
    let mut max_wait = BULKHEAD_MAX_WAIT;
    if p.peek_is("wait") {
        p.bump();
        let (d, span) = p.duration("a maximum wait")?;
        p.record(Field::MaxWait, span);
        max_wait = d;
    }
    p.finish(&[tick("wait"), "end of input".to_owned()])?;
    Ok(BulkheadPolicy {
        max_concurrent,
        max_wait,
    })
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
