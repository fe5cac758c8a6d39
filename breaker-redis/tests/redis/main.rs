//! Tests against real Redis servers, started by the tests as child processes on loopback.
//!
//! Without `redis-server` on `PATH` every test prints a notice and passes, unless
//! `REQUIRE_REDIS=1` (CI sets it): then a missing server is a failure.

#[macro_use]
mod common;
mod coordinator;
mod faults;
mod fleet;
mod harness;
mod pipeline;
mod scale;
mod tower_stack;
