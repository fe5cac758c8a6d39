//! The error of a timeout.

use std::fmt;
use std::time::Duration;

/// Which limit elapsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// The timeout layer's limit: one attempt when the layer is inside retry (the default
    /// order), the whole retry loop when it is outside.
    Attempt,
    /// The total deadline of the call.
    Deadline,
}

impl TimeoutKind {
    /// `attempt` or `deadline`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TimeoutKind::Attempt => "attempt",
            TimeoutKind::Deadline => "deadline",
        }
    }
}

/// A limit elapsed before the operation completed; the operation's future was dropped.
///
/// Displayed as `attempt timed out after 1s` or `deadline of 15s elapsed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed {
    /// Which limit.
    pub kind: TimeoutKind,
    /// The configured length of that limit (the per-attempt timeout or the total deadline).
    pub after: Duration,
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TimeoutKind::Attempt => write!(f, "attempt timed out after {:?}", self.after),
            TimeoutKind::Deadline => write!(f, "deadline of {:?} elapsed", self.after),
        }
    }
}

impl std::error::Error for Elapsed {}
