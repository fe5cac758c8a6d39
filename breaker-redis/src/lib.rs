//! Circuit breakers shared by a fleet of replicas through Redis: decided locally, flushed in
//! aggregate, fenced by generations.
//!
//! # Why
//! A process-local breaker in N replicas admits N half-open probes, and no replica sees the
//! fleet's failure rate. The published designs either pay a remote round trip on every call
//! (and serialise the fleet behind a lock) or share the state but not the counts. This crate
//! shares both without a round trip on the call path:
//!
//! - **Every admission is decided locally**, from the local breaker's state plus what the
//!   coordinator told it of the fleet (shared generation, shared state, the deadline as a
//!   local instant). A closed call and an open rejection make no remote call.
//! - **Redis sees aggregated counts and transitions, never single calls.** One coordinator task
//!   per store connection ([`store`]) flushes the counts of the breakers that were active since
//!   the last flush, in one operation per `flush_interval`; idle breakers cost nothing.
//! - **Fenced by generations.** Every transition bumps a shared generation; every write carries
//!   the generation it was computed from and the server-side scripts ([`protocol`]) drop a
//!   write of another generation. Each flush carries the replica's high-water mark, so a store
//!   that lost writes (restart, failover, expiry) is repaired by the next flush.
//! - **A probe is a lease, not a lock**: a counted slot with an expiry, reserved atomically by
//!   a script; nothing is held across the user's call; a lease not returned frees itself.
//! - **Server time only.** Deadlines are Redis `TIME`; a reply carries the server's now, and a
//!   replica converts a deadline to its own monotonic clock on receipt. Two replicas' clocks are
//!   never compared.
//! - **Push plus poll.** Transitions are published (pub/sub on the same RESP3 connection,
//!   resubscribed after a reconnect); every flush reply also carries the states, so a lost
//!   message costs at most one flush interval.
//!
//! # Shape
//! | module | what |
//! |---|---|
//! | [`names`] | validated names, escaped keys, the key layout under one hash tag per namespace |
//! | [`policy`] | [`SharedPolicy`]: what the scripts decide with; pinned with a fingerprint |
//! | [`protocol`] | the Lua function library and its checked replies |
//! | [`store`] | [`Store`]: connection, coordinator, manual control |
//! | [`fleet`] | a real [`CircuitBreaker`](breaker_core::breaker::CircuitBreaker) in the fleet ([`Store::share`]), [`SharedCircuitBreaker`] for manual control |
//! | [`link`] | the narrow interface to a local breaker: [`SharedBreaker`] and [`Link`] |
//! | [`health`] | the store's own breaker, events, [`StoreStats`], metrics |
//! | [`config`] | [`StoreConfig`], [`OnStoreError`] |
//! | [`testing`] | [`FakeBreaker`](testing::FakeBreaker), a minimal [`SharedBreaker`] |
//!
//! ```no_run
//! use breaker_redis::{BreakerId, SharedPolicy, Store, StoreConfig};
//! use breaker_redis::testing::{Admission, FakeBreaker, Outcome};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect(StoreConfig::new("redis://127.0.0.1:6379/", "checkout")?).await?;
//! // A real breaker joins with `store.share(&breaker)` (see [`fleet`]); the fake shows the
//! // exchange with the coordinator.
//! let payments = FakeBreaker::register(&store, BreakerId::new("payments")?, &SharedPolicy::default())?;
//! if payments.admit() == Admission::Admitted {
//!     payments.record(Outcome::Success); // counted locally, flushed within a second
//! }
//! # Ok(()) }
//! ```
//!
//! # Guarantees and their bounds
//! Figures from the tests on loopback (`cargo test -p breaker-redis -- --nocapture` prints
//! them); speed targets belong to benchmarks, the tests assert loose bounds.
//!
//! - **Store operations** (G2): at most one flush operation per `flush_interval` per store,
//!   whatever the call rate (a flush of more than 512 breakers is one pipeline, one round
//!   trip); an early flush (pending failures over the breaker's bound) replaces the next
//!   regular one, so the bound holds. Idle breakers are never sent. Besides flushes: one
//!   operation per local trip, per probe-lease request, per probe end, per manual action, and
//!   one read per batch of newly registered breakers. Measured: about 0.25 store operations per
//!   1,000 calls at 100 ms flushes under load.
//! - **Staleness** (G3): with pub/sub, a transition reaches the other replicas within a few
//!   milliseconds (measured from the trip's request: ~2-5 ms median, under 15 ms worst of 30);
//!   with pub/sub lost, within one flush interval plus a round trip for every breaker that is
//!   active or not closed. A breaker registered later reads the fleet's state at once.
//! - **Probes** (G5, G6, G8): at most `half_open_probes` unexpired leases across the fleet
//!   (32 replicas x 64 callers, 200 cycles in CI: never above the cap); one lease request per
//!   replica per half-open period (1.03 per replica per cycle measured, the extra when a request
//!   reached the server just before its deadline); a lease not returned frees its slot at its
//!   expiry (measured 303 ms for a 300 ms lease), a returned one at once. **During a store loss
//!   or failover** the leases in flight are lost with the state: up to `half_open_probes` more
//!   probes may run (at most twice the cap), and while degraded in mode `local` each replica
//!   probes by its local rules.
//! - **Fencing** (G9): a write computed from another generation is never applied; a random
//!   multi-replica schedule test compares every reply and the window with a reference model.
//! - **Footprint** (G10): a breaker's keys take at most ~1 KiB (760-800 bytes measured with the
//!   default 10-bucket window, full, and a lease; 1,280-1,350 bytes with the largest window of 20
//!   buckets, 3 leases and a quorum vote). Every key has an expiry; every script loop is bounded.
//! - **Clock skew**: none of a replica's decisions depends on its clock's offset (tested with
//!   replicas 7 minutes apart).
//!
//! # When the store is unreachable
//! Every operation runs under `op_timeout` (default 250 ms); after `store_failures`
//! consecutive failures (default 3) the store's own breaker opens and no operation is tried
//! until its cooldown ends (1 s doubling to 30 s): a hung Redis costs the coordinator at most
//! `store_failures x op_timeout` once, and user calls nothing (they never wait for the store,
//! except a probe that awaits its lease, which is answered at once while degraded). Flushes are
//! dropped (counted in [`StoreStats::dropped_flushes`]: stale counts are worse than lost ones).
//! One `store degraded` and one `store recovered` log line per change. Per
//! [`OnStoreError`]:
//!
//! | mode | while unreachable |
//! |---|---|
//! | `local` (default) | local rules go on; a known shared deadline is honoured (an open fleet stays open to its deadline); fleet-rate rules fall back to the local window; probes are local |
//! | `open` | the shared state is ignored: each breaker decides as a local breaker |
//! | `closed(grace)` | as `local` for `grace`, then every call is rejected until the store is back |
//!
//! After it is back, the first answered flush re-adopts the fleet's state (repairing the store
//! from the replicas' high-water marks if it lost it).
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
//! - **Replies.** Replies are checked ([`protocol`]): a malformed reply is a
//!   [`StoreError::Malformed`], never a panic or a state change.
//! - **TLS.** `rediss://` works with the `tls` feature (rustls; tested against a local
//!   TLS-only `redis-server`).
//!
//! # Where this deviates from the design document, and why
//! - **A real breaker joins through a hook in the core breaker** ([`Store::share`]), not a
//!   wrapper, so every caller of the breaker (a pipeline, the tower layers, keyed registries,
//!   `#[circuit_breaker(scope = "shared")]`) runs it shared. The hook is consulted only where
//!   the fleet needs it: on a closed outcome the breaker adds to counters it keeps and reads
//!   one flag (no virtual call); a probe slot, a probe's end and a local trip call the hook.
//!   A breaker without a hook pays one load of an empty cell per recorded outcome.
//! - **The window is one string per breaker**, its non-empty buckets `epoch:ok:fail:slow`
//!   joined, epochs modulo 10^6, rewritten whole on each flush (stale buckets dropped then), with
//!   an expiry of two windows; and at most 20 buckets. A hash of buckets cost ~1.4 KiB with 20
//!   buckets; this keeps G10.
//! - **The fleet window is always a time window.** A count window ("the last n calls") has no
//!   fleet-wide order; mapping a count-window policy to a shared one is the integration's
//!   choice.
//! - **`shared` is `quorum(1)`.** One trip path: a local trip is a vote, and the fleet opens
//!   when `quorum` distinct replicas voted within the window. The live-replica set is kept for
//!   observability; votes are not checked against it (the window bounds their age).
//! - **The first writer's policy is pinned** and governs the fleet; a replica with another
//!   fingerprint is told (`policy_mismatch`, once per registration); force and reset re-pin.
//! - **Repair rides on every flush** (the high-water mark is part of each flush item) instead of
//!   a separate round trip; `repair` is also its own function.
//! - **An expired lease's late outcome is ignored** (`late`), where the local breaker starts a
//!   new half-open generation (`ProbeExpired`): the lease's expiry already freed the slot.
//! - **Urgent operations are not retried**: a trip or a probe end that meets a dead connection
//!   is lost (the replica's local breaker stays open; a lost end costs the lease time). The
//!   next flush carries the replica's view either way.
//! - **One connection per store** for commands and pub/sub (RESP3 pushes), not two.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod fleet;
pub mod health;
pub mod link;
pub mod names;
pub mod policy;
pub mod protocol;
pub mod store;
pub mod testing;

pub use config::{OnStoreError, StoreConfig};
pub use error::StoreError;
#[cfg(feature = "config")]
pub use fleet::share_policies;
pub use fleet::{
    install, installed, share_scoped, AlreadyInstalled, ShareError, SharedCircuitBreaker,
    SharedPermit,
};
pub use health::StoreStats;
pub use link::{
    Deltas, Link, PolicyMismatch, ProbeGrant, RemoteUpdate, SharedBreaker, StoreStatus,
};
pub use names::{BreakerId, NameError, Namespace, ReplicaId};
pub use policy::{CompiledPolicy, PolicyError, SharedPolicy};
pub use protocol::{ForceTarget, Lease, ProbeOutcome, Reason, SharedState};
pub use store::{RegisterError, Store};
