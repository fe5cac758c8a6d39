//! What the one validator reports: [`FieldError`] (one invalid value: its [`Field`], the
//! [`Rule`] it breaks, why) and [`ValidationError`] (every one of them).

use super::Field;
use crate::layer::OrderError;
use std::fmt;

/// Which rule a [`FieldError`] reports, for callers that word an error themselves (the
/// builder's [`BuildError`](crate::pipeline::BuildError) variants, the attribute's hints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The value is outside its range or does not fit the other values of its layer; the
    /// message says which.
    Range,
    /// Zero where at least 1 or a non-zero duration is required (`max_attempts`, `timeout`,
    /// `deadline`).
    NonZero,
    /// `timeout` is longer than `deadline` (reported at `timeout`).
    TimeoutWithinDeadline,
    /// A retry of more than one attempt in a policy not declared idempotent (case BR-35;
    /// reported at `max_attempts`).
    Idempotent,
    /// A rule of the layer order (reported at `order`).
    Order(OrderError),
}

/// One invalid value of a policy: which field, which rule, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldError {
    /// The field.
    pub field: Field,
    /// The rule it breaks.
    pub rule: Rule,
    /// What is wrong and what is expected, lowercase.
    pub message: String,
    /// The other fields the rule reads besides `field`; empty when it judges the value of
    /// `field` alone. A config file reports an error of a value inherited from `[default]`
    /// once, at `default`, if the rule reads that value alone, and per policy otherwise (a
    /// policy may set the other fields).
    pub reads: &'static [Field],
}

impl FieldError {
    /// A [`Rule::Range`] error.
    pub fn new(field: Field, message: impl Into<String>) -> FieldError {
        FieldError::of(field, Rule::Range, message)
    }

    /// An error under `rule`.
    pub fn of(field: Field, rule: Rule, message: impl Into<String>) -> FieldError {
        FieldError {
            field,
            rule,
            message: message.into(),
            reads: &[],
        }
    }

    /// This error, of a rule that also reads `fields` (see [`FieldError::reads`]).
    pub fn reading(mut self, fields: &'static [Field]) -> FieldError {
        self.reads = fields;
        self
    }

    /// The order problem, for a [`Rule::Order`] error.
    pub fn order(&self) -> Option<OrderError> {
        match self.rule {
            Rule::Order(o) => Some(o),
            _ => None,
        }
    }
}

impl fmt::Display for FieldError {
    /// `` `field`: message ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

/// Every invalid value found in a policy, in field order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid policy: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
pub struct ValidationError {
    /// The individual errors; never empty.
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    /// `Ok` when `errors` is empty.
    pub(crate) fn check(errors: Vec<FieldError>) -> Result<(), ValidationError> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { errors })
        }
    }
}
