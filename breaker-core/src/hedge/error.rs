//! The errors of a hedging policy.

/// A hedging policy out of range; the message names every wrong value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid hedging: {}", .problems.join("; "))]
pub struct InvalidHedge {
    /// What is wrong, one entry per value, lowercase.
    pub problems: Vec<String>,
}
