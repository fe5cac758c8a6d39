//! Circuit breakers shared by a fleet of replicas through Redis: one state machine, decided
//! locally, flushed in aggregate, fenced by generations, reconciled after every store fault.
//!
//! # Why
//! A process-local breaker in N replicas admits N half-open probes, and no replica sees the
//! fleet's failure rate. The published designs either pay a remote round trip on every call
//! (and serialise the fleet behind a lock) or share the state but not the counts. This crate
//! shares both without a round trip on the call path:
//!
//! - **One state machine.** The store keeps the core breaker's own state word; every fleet
//!   decision (a trip, the rate rules, the promotion out of open, a probe's end, the cooldown
//!   with its growth and jitter, a manual change) is one of the core's deciders
//!   (`breaker_core::breaker::decide`) taken on the word the store answered, and written with
//!   the store's fenced compare-and-set. The store's script keeps no breaker rule (the lease
//!   semaphore aside, checked against the core's `free_slot` in CI). One policy type: the
//!   breaker's own [`BreakerPolicy`](breaker_core::breaker::BreakerPolicy), checked for its
//!   scope by the core's one validator.
//! - **Every admission is decided locally**, from the local breaker's state plus what the
//!   coordinator told it of the fleet. A closed call and an open rejection make no remote call.
//! - **The store sees aggregated counts and transitions, never single calls.** One
//!   coordinator task per store connection ([`store`]) flushes the counts of the breakers that
//!   were active since the last flush, in one operation per `flush_interval`; idle breakers
//!   cost nothing.
//! - **Fenced.** A write applies only to the word it was decided on (a compare-and-set on the
//!   word, whose 24-bit generation every transition bumps), and only before its `valid_until`
//!   on the store's clock: an operation the client gave up on never takes effect later.
//! - **Reconciled after every store fault.** A store that lost a breaker (restarted empty,
//!   flushed, a key evicted, a failover to a replica that had not caught up) is detected at the
//!   next answer (the word missing or older than the replica's view, a new epoch of the
//!   namespace), and the breaker is seeded again from what the replicas' local breakers hold
//!   *now*; after every degraded period every breaker is reconciled with the store.
//! - **A probe is a lease, not a lock**: a counted slot with an expiry (the probe wait),
//!   reserved atomically; nothing is held across the user's call; a lease not returned frees
//!   itself, and a held probe's late result still counts.
//! - **Server time only.** Deadlines are Redis `TIME`; a reply carries the server's now, and a
//!   replica converts a deadline to its own monotonic clock on receipt. Two replicas' clocks are
//!   never compared.
//! - **Push plus poll.** Transitions are published (pub/sub on the same RESP3 connection,
//!   resubscribed after a reconnect); every flush also reads the breakers that are not closed,
//!   so a lost message costs at most one flush interval.
//!
//! # Shape
//! | module | what |
//! |---|---|
//! | [`names`] | validated names, escaped keys, the key layout under one hash tag per namespace |
//! | [`store`] | [`Store`]: connection, coordinator, manual control |
//! | [`fleet`] | a real [`CircuitBreaker`](breaker_core::breaker::CircuitBreaker) in the fleet ([`Store::share`]), [`SharedCircuitBreaker`] and its [`FleetView`], the fleet's decisions |
//! | [`health`] | the store's own breaker, events, [`StoreStats`], metrics |
//! | [`config`] | [`StoreConfig`], [`OnStoreError`] |
//!
//! The wire protocol (the store's primitives and their checked replies) is private: it is
//! described in the crate's `src/protocol/mod.rs` and `store.lua`.
//!
//! ```no_run
//! # use breaker_core as breaker;
//! use breaker::{BreakerPolicy, CircuitBreaker};
//! use breaker_redis::{Store, StoreConfig};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect(StoreConfig::new("redis://127.0.0.1:6379/", "checkout")?).await?;
//! let breaker = CircuitBreaker::builder(BreakerPolicy::default()).name("payments").build()?;
//! let payments = store.share(&breaker)?;
//! if let Ok(permit) = breaker.try_acquire() {
//!     permit.success(); // counted locally, flushed within a second
//! }
//! println!("the fleet: {:?}", payments.fleet_view().state);
//! # Ok(()) }
//! ```
//!
//! # What the store keeps, and what decides
//! Per breaker: the state word (the core's `u64` encoding; its probes in flight are the
//! unexpired leases, counted at every read), the open deadline (server ms), who made the last
//! transition, its reason and that replica's policy fingerprint, the window of aggregated
//! counts (time buckets), the probe leases and the quorum votes; per namespace, the live
//! replicas, a version counter and an epoch. The replicas decide, each with its own policy:
//! the fleet's rate rules on the window's totals (`add` answers them), its quorum on the votes
//! (`vote` answers them), and every transition with the core's deciders; the store only applies
//! a compare-and-set to the word it was decided on.
//!
//! # Guarantees and their bounds
//! Figures from the tests on loopback (`cargo test -p breaker-redis -- --nocapture` prints
//! them); speed targets belong to benchmarks, the tests assert loose bounds.
//!
//! - **Store operations** (G2): at most one flush operation per `flush_interval` per store,
//!   whatever the call rate (a flush of more than 512 breakers is one pipeline, one round
//!   trip); an early flush (pending failures over the breaker's bound) replaces the next
//!   regular one, so the bound holds. Idle breakers are never sent. Besides flushes: one
//!   operation per local trip (a quorum vote and, when it reaches the quorum, the trip), per
//!   fleet-rate trip, per probe-lease request, per probe end, per manual action, one read per
//!   batch of newly registered breakers, and after a store fault one read of every breaker
//!   with a write for each one the store lost.
//! - **Staleness** (G3): with pub/sub, a transition reaches the other replicas within a few
//!   milliseconds; with pub/sub lost, within one flush interval plus a round trip for every
//!   breaker that is active or not closed. A breaker registered later reads the fleet's state
//!   at once.
//! - **Probes** (G5, G6, G8): at most `half_open_probes` unexpired leases across the fleet; one
//!   lease request per replica per half-open period (a promotion made by another replica first
//!   is joined, not retried); a lease not returned frees its slot at its expiry (the probe
//!   wait), a returned one at once. **During a store loss** the leases in flight are lost with
//!   the word: up to `half_open_probes` more probes may run until the leases of the lost store
//!   would have expired (at most twice the cap for one probe wait), and while degraded in mode
//!   `local` each replica probes by its local rules.
//! - **Fencing** (G9): a write decided on another word than the store's is never applied; an
//!   operation that ran after its `valid_until` (a hung server resuming) writes nothing.
//! - **Footprint** (G10): a breaker's keys take at most ~1 KiB with the largest window of 20
//!   buckets. Every key has an expiry; every script loop is bounded.
//! - **Clock skew**: none of a replica's decisions depends on its clock's offset.
//!
//! # When the store is unreachable
//! Every operation runs under `op_timeout` (default 250 ms); after `store_failures`
//! consecutive failures (default 3) the store's own breaker opens and no operation is tried
//! until its cooldown ends (1 s doubling to 30 s): a hung Redis costs each operation at most
//! `op_timeout`, and user calls nothing (they never wait for the store, except a probe that
//! awaits its lease, which is answered at once while degraded); no command of the [`Store`]
//! waits behind a hung flush. Flushes are dropped (counted in
//! [`StoreStats::dropped_flushes`]: stale counts are worse than lost ones). One
//! `store degraded` and one `store recovered` log line per change. Per [`OnStoreError`]:
//!
//! | mode | while unreachable |
//! |---|---|
//! | `local` (default) | local rules go on; a known shared deadline is honoured (an open fleet stays open to its deadline); fleet-rate rules fall back to the local window; probes are local |
//! | `open` | the shared state is ignored: each breaker decides as a local breaker |
//! | `closed(grace)` | as `local` for `grace`, then every call is rejected until the store is back |
//!
//! After it is back every breaker is reconciled (see [`fleet`]): a replica whose local breaker
//! recovered on its own closes the fleet's breaker, a trip the store missed is sent, and a
//! breaker the store lost is seeded from the local state; after that every rule (consecutive,
//! the windows, the fleet rate, quorum) works again within one flush interval.
//!
//! # Safe by default
//! - **Names and keys.** Names are validated and keys of keyed breakers escaped ([`names`]): a
//!   key from user input can never address another namespace. One bound,
//!   [`names::MAX_ID_LEN`] (256 bytes), holds for every id the scripts receive: a key whose
//!   escaped id would be longer is hashed to fit (a readable prefix and 128 bits of SHA-256),
//!   so a key of any length or bytes is shared and distinct keys stay distinct; no key can
//!   make its breaker local only, or fail the flush batch of the breakers sent with it. A bad
//!   name is refused at [`Store::share`], naming the breaker and the rule.
//! - **Messages.** Names and keys in errors, `Display` and log fields are escaped
//!   (`str::escape_debug`): a name with a newline or a terminal escape cannot forge a log line.
//! - **Credentials.** The store URL is read by the `url` crate's parser (the one the `redis`
//!   client uses) and shown without its user info, query or fragment. The user name and
//!   password never appear in errors, `Debug`, log lines or metric labels, including for a
//!   URL that does not parse and a password with an unencoded `/`, `?`, `#`, `@` or `:`
//!   (property-tested); a URL whose user info the parser would cut short is refused with the
//!   fix (percent-encode `/`, `?`, `#`).
//! - **Authentication.** A refused password reads as [`StoreError::Auth`], at connect and when
//!   the server's password changes under a live store (the next reconnection), never as a
//!   timeout; the store reconnects by itself once the password is right again.
//! - **Replies and arguments.** Replies are checked: a malformed reply is a
//!   [`StoreError::Malformed`], never a panic or a state change. Every argument of every
//!   breaker of an operation is checked by the store before its first write, and a bad one
//!   never harms another breaker's.
//! - **TLS.** `rediss://` works with the `tls` feature (rustls; tested against a local
//!   TLS-only `redis-server`).
//!
//! # Where this deviates from the design document, and why
//! - **A real breaker joins through a hook in the core breaker** ([`Store::share`]), not a
//!   wrapper, so every caller of the breaker (a pipeline, the tower layers, keyed registries,
//!   `#[circuit_breaker(scope = "shared")]`) runs it shared.
//! - **The store decides nothing** (the design had the scripts decide transitions): every rule
//!   is the core's, so the local breaker and the fleet cannot drift apart.
//! - **The window is one string per breaker**, its non-empty buckets `epoch:ok:fail:slow`
//!   joined, rewritten whole on each flush, with an expiry of two windows; at most 20 buckets.
//! - **A count window is refused under a shared scope** ("the last n calls" has no fleet-wide
//!   order); the fleet runs the policy's own time window.
//! - **`shared` is `quorum(1)`.** A local trip opens the fleet under `shared`, and is a vote
//!   under `quorum(k)`; votes count within the window.
//! - **Each replica runs its own policy**; a replica whose policy differs from the one of the
//!   replica that made the fleet's last transition is told (`policy_mismatch`).
//! - **One connection per store** for commands and pub/sub (RESP3 pushes), not two.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod fleet;
pub mod health;
mod link;
pub mod names;
mod plan;
mod policy;
mod protocol;
pub mod store;
#[cfg(test)]
mod test_server;

pub use breaker_core::breaker::ShareError;
pub use config::{OnStoreError, StoreConfig};
pub use error::StoreError;
#[cfg(feature = "config")]
pub use fleet::share_policies;
pub use fleet::{
    install, installed, share_scoped, AlreadyInstalled, FleetView, SharedCircuitBreaker,
    SharedPermit,
};
pub use health::StoreStats;
pub use link::{PolicyMismatch, StoreStatus};
pub use names::{BreakerId, NameError, Namespace, ReplicaId};
pub use protocol::Lease;
pub use store::{ForceTarget, RegisterError, Store};
