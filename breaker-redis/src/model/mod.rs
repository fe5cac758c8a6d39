//! Model checking of the fleet protocol (tests only): a reference model of the store's script
//! cross-checked against a real `redis-server`, and an exhaustive checker over replicas that
//! drive the fleet's real decisions (`plan.rs`) and the core's deciders against it.
//!
//! - `store.rs`: the reference store, `store.lua` as a pure state machine;
//! - `cross_check.rs`: the same calls to the script and to the model, compared value by value;
//! - `checker.rs`: the model checker (replicas, faults, properties).

mod checker;
mod cross_check;
pub(crate) mod store;
