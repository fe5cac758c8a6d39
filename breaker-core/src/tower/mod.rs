//! [tower](https://docs.rs/tower) middleware built from this crate's policies (feature `tower`).
//!
//! One module per policy, laid out like tower's own (`mod.rs` the service, `layer.rs`,
//! `future.rs`):
//!
//! - [`breaker`]: [`BreakerLayer`](breaker::BreakerLayer) /
//!   [`BreakerService`](breaker::BreakerService), a circuit breaker around any `Service`.

pub mod breaker;
