//! Circuit breakers shared by a fleet of replicas through Redis.
//!
//! (The design section is written with the coordinator; see the modules.)
#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod health;
pub mod link;
pub mod names;
pub mod policy;
pub mod protocol;
pub mod store;
pub mod testing;

pub use config::{OnStoreError, StoreConfig};
pub use error::StoreError;
pub use health::StoreStats;
pub use link::{
    Deltas, Link, PolicyMismatch, ProbeGrant, RemoteUpdate, SharedBreaker, StoreStatus,
};
pub use names::{BreakerId, NameError, Namespace, ReplicaId};
pub use policy::{CompiledPolicy, PolicyError, SharedPolicy};
pub use protocol::{ForceTarget, Lease, ProbeOutcome, Reason, SharedState};
pub use store::{RegisterError, Store};
