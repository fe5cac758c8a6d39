//! Circuit breakers shared by a fleet of replicas through Redis.
//!
//! (The design section is written with the coordinator; see the modules.)
#![warn(missing_docs)]

pub mod error;
pub mod names;
pub mod policy;
pub mod protocol;

pub use error::StoreError;
pub use names::{BreakerId, NameError, Namespace, ReplicaId};
pub use policy::{CompiledPolicy, PolicyError, SharedPolicy};
