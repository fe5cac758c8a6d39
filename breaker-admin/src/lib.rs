//! See and steer every circuit breaker of a running service: a status API, a stream of
//! transitions and rejections, a live dashboard, and admin actions behind a token.
//!
//! # Why
//! "Which of my breakers are open right now, and since when?" should not need code. Spring
//! Boot's actuator answers it for Resilience4j (`/actuator/circuitbreakers`, its events, and
//! state changes by an operator), Hystrix's dashboard showed every circuit live. This crate
//! gives a service built on `breaker` the same: one [`Admin`], mounted as a tower service in the
//! server the program already has ([`Admin::service`]) or served on its own loopback listener
//! ([`Admin::listen`]).
//!
//! # What it shows
//! Every breaker the process knows ([`catalog`] says in what order):
//! - the named policies of the [installed](breaker_core::config::install) policy registry, and of
//!   registries added with [`AdminBuilder::policies`], with the file and reload generation
//!   their policy comes from;
//! - every `#[circuit_breaker]` function ([`breaker_core::annotated::functions`]): its own
//!   breaker once called, its keys' breakers (`key = ..`) as a keyed group, or the row of the
//!   named policy it uses;
//! - breakers, pipelines and keyed registries added to the builder;
//! - with the `redis` feature, breakers shared by a fleet through `breaker-redis`: the fleet's
//!   view beside the local state of every breaker shared through the installed store (or one
//!   added with `AdminBuilder::store`), however it was shared, and admin actions on it carried
//!   out fleet-wide ([`fleet`]).
//!
//! For each: state, time in state, the open breaker's time to its next probe, consecutive
//! failures, the window's calls and failure rate, probes in flight, lifetime totals, the policy
//! as DSL text per layer with its source, the pipeline's layers in order, calls, failures and
//! rejections per second (from lifetime totals, when the breaker keeps them: those of named
//! policies and annotated functions do), latency percentiles (from [`Admin::recorder`], when
//! given to the pipeline), and a band of its states over the last two minutes. A keyed group
//! shows its count of keys by state, and its keys page by page, busiest first.
//!
//! # How, and what it costs calls: nothing
//! A [sampler] task reads every breaker every 250 ms ([`AdminBuilder::sample_every`])
//! through what the breaker already keeps (its state word and its striped totals); no call
//! path has a hook, a lock or an extra atomic for it. The [event stream](events) gets each
//! transition from the breaker itself, as it made it ([`transitions`]: from, to and reason,
//! never merged), and rejection counts from the sampler, into one ring of a fixed size that
//! every reader shares: a slow reader loses the oldest events and is told how many, and never
//! slows anyone. The status API reads each
//! breaker's [`Snapshot`](breaker_core::Snapshot) when asked, so its states and counts are the
//! breakers' own at that moment.
//!
//! # Admin actions
//! Force open, force closed, disable, reset ([`Action`]) and reload the config files. Off
//! unless [`AdminBuilder::admin_token`] or [`AdminBuilder::admin_layer`] turns them on; then
//! only with `Authorization: Bearer <token>` (compared in constant time) or through the
//! program's own tower auth layer. Never with cookies, and never with a token in the query
//! string (refused on every route). Every action, and every refused attempt, is a `tracing`
//! event (target `breaker_admin`) naming who, from where, and what. See [`auth`].
//!
//! # Examples
//! ```no_run
//! use breaker_admin::Admin;
//! use breaker_core::breaker::{BreakerPolicy, CircuitBreaker};
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let inventory = CircuitBreaker::builder(BreakerPolicy::default())
//!     .name("inventory")
//!     .totals(true) // calls, failures and rejections per second on the dashboard
//!     .build()
//!     .unwrap();
//! let admin = Admin::builder()
//!     .breaker(&inventory)
//!     .admin_token("ops", &std::env::var("BREAKER_ADMIN_TOKEN").unwrap())
//!     .build();
//! let listening = admin.listen().await?; // 127.0.0.1, a free port
//! println!("dashboard: {}", listening.url());
//! # Ok(()) }
//! ```
//!
//! Mounted in axum instead: `Router::new().nest_service("/breakers/", admin.service())`.
//!
//! # The JSON
//! `GET /api/v1/breakers` returns `{"now_ms", "sample_every_ms", "admin", "breakers": [..]}`;
//! each breaker has `id` (its name in URLs), `name`, `kind` (`policy`, `function`, `pipeline`,
//! `plain`, `keyed`), `state` (`closed`, `open`, `half-open`, `forced-open`, `forced-closed`),
//! `generation`, `time_in_state_ms`, `retry_after_ms`, `consecutive_failures`, `window`
//! (`calls`, `failures`, `slow`, `failure_rate_percent` 0..=100, `shape`: the trip rule's,
//! `100 calls` or `1m` for a rate rule, `5 consecutive` for a consecutive-only policy),
//! `probes_in_flight`,
//! `probe_successes`, `totals` (or `null`), `policy` (the DSL text of every layer, each
//! parsing back to the layer's policy, `null` where absent: `breaker`, `retry`, `timeout`,
//! `deadline`, `bulkhead`, `rate`, `hedge`, `adaptive`, `throttle`; and `order`),
//! `source` (`attribute`, `file` with `path` and `generation`, `config`, `code`), `layers`,
//! `used_by`, `rates` (per second, or `null`), `latency` (microseconds, or `null`), `keys` (a
//! keyed group's `count`, `max_keys`, `open`, `by_state`; its `group_state`, the worst state
//! any of its keys is in, replaces the single breaker's fields) and `fleet` (the shared store's view of a fleet-wide breaker, or `null`).
//! The [`service`] module lists every route, check and status.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod admin;
pub mod auth;
pub mod catalog;
pub mod events;
pub mod fleet;
mod latency;
pub mod sampler;
mod server;
pub mod service;
pub mod transitions;
mod view;

pub use admin::{
    Action, Actions, Admin, AdminBuilder, DEFAULT_EVENT_BUFFER, DEFAULT_HISTORY,
    DEFAULT_MAX_EVENT_READERS, DEFAULT_SAMPLE_EVERY, MAX_BODY_BYTES,
};
pub use auth::Principal;
pub use fleet::Shared;
pub use server::{Listening, HEADER_READ_TIMEOUT, LOOPBACK};
pub use service::{AdminService, Body, PeerAddr};
