//! Circuit breakers shared by a fleet of replicas through Redis.
//!
//! (The design section is written with the protocol; see the crate's modules.)
#![warn(missing_docs)]

pub mod names;

pub use names::{BreakerId, NameError, Namespace, ReplicaId};
