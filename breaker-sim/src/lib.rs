//! Choose a circuit breaker policy from evidence: record calls, replay them against policies
//! on a virtual clock with the library's real [`CircuitBreaker`](breaker_core::CircuitBreaker),
//! sweep a grid of settings, and plot what each policy would have done.
//!
//! - [`trace`]: the trace format (JSON Lines or CSV, one call per line, with a JSON Schema),
//!   its streaming reader and writer.
//! - [`generate`]: synthetic traces from a short description and a seed.
//! - [`replay`]: the replay of one policy, and its exact rules.
//! - [`run`]: one trace against many policies, read once, in parallel.
//! - [`sweep`]: a grid of policies around a base, ranked, with its Pareto front.
//! - [`report`]: what is reported per policy (table and JSON).
//! - [`plot`]: SVG charts (timelines, sweep scatter) drawn with `plotters`.
//!
//! The `breaker` command line (`breaker simulate`, `breaker trace generate`) is built on this
//! crate (feature `cli` of the `breaker` package); library users of `breaker` compile none
//! of it.
//!
//! ```
//! use breaker_sim::replay::{NamedPolicy, Options};
//! use breaker_sim::trace::{Format, TraceReader};
//!
//! let trace = "\
//! {\"t_ms\": 0, \"latency_ms\": 10, \"outcome\": \"failure\"}
//! {\"t_ms\": 100, \"latency_ms\": 10, \"outcome\": \"failure\"}
//! {\"t_ms\": 200, \"latency_ms\": 10, \"outcome\": \"success\"}
//! ";
//! let mut reader = TraceReader::new("inline", Box::new(trace.as_bytes()), Format::JsonLines)?;
//! let policy = NamedPolicy::from_breaker_dsl("2 consecutive, open 10s")?;
//! let reports = breaker_sim::run::run(&mut reader, &[policy], Options::default(), &|_| {})?;
//! assert_eq!(reports[0].opens, 1);
//! assert_eq!(reports[0].rejected, 1); // the call at 200 ms: the breaker opened at 110 ms
//! assert_eq!(reports[0].successes_rejected, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

pub mod generate;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run;
pub mod sweep;
pub mod trace;
