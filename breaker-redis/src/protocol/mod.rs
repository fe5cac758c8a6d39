//! The wire protocol: the server-side scripts, the arguments they take and the checked replies.
//!
//! # Why scripts
//! A fleet's transitions must be atomic on the server: "add these counts, and if the window now
//! trips, open with a deadline from the server's clock" is one decision, and so is "reserve a
//! probe slot if fewer than N are leased". Each op is one call of one function of the library
//! `breaker_v1` (source: `breaker.lua` next to this file, with every rule it enforces in its
//! header). Functions survive restarts with persistence and are replicated; a server without
//! functions gets the same source as one `EVALSHA` script (retried with its source on
//! `NOSCRIPT`). A server restarted empty has lost the library: a `Function not found` reply
//! reloads it and retries once.
//!
//! # Checked replies
//! Every reply is checked before anything is taken from it: its shape and types, every number's
//! range, the consistency of state and deadline, the leases' generations, and the generation
//! rules of the op (a flush that claims to have applied counts must answer with the generation
//! the counts were sent with; a trip that opened must answer with the next one; a repair never
//! answers with less than the replica's high-water generation). A reply that breaks a rule is a
//! [`StoreError::Malformed`], never a panic and never a state change.
//!
//! # Files
//! - `mod.rs`: the scripts' sources, the limits and the wire types (ops, reasons, states,
//!   leases, replies, targets).
//! - `client.rs`: [`Protocol`], the client that builds and sends each op.
//! - `parse.rs`: the reply checks, [`parse`] and [`parse_published`].
//! - `breaker.lua`: the server-side source.

use crate::error::{Redactor, StoreError};
use crate::names::{BreakerId, BreakerKeys, Namespace, NamespaceKeys, ReplicaId};
use crate::policy::CompiledPolicy;
use breaker_core::breaker::State;
use redis::aio::ConnectionLike;
use redis::Value;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod client;
mod parse;
#[cfg(test)]
mod tests;

pub use client::Protocol;
pub use parse::{parse, parse_published, Published};

/// The name of the function library.
pub const LIBRARY_NAME: &str = "breaker_v1";

/// The library's source as loaded with `FUNCTION LOAD`.
pub const LIBRARY: &str = concat!(
    "#!lua name=breaker_v1\n",
    include_str!("breaker.lua"),
    "\nlocal function entry(op) return function(keys, args) return dispatch(op, keys, args) end end\n",
    "redis.register_function('breaker_v1_flush', entry('flush'))\n",
    "redis.register_function('breaker_v1_trip', entry('trip'))\n",
    "redis.register_function('breaker_v1_acquire_probe', entry('acquire_probe'))\n",
    "redis.register_function('breaker_v1_end_probe', entry('end_probe'))\n",
    "redis.register_function('breaker_v1_force', entry('force'))\n",
    "redis.register_function('breaker_v1_repair', entry('repair'))\n"
);

/// The same source as one script for `EVALSHA` (first argument: the op's name).
pub const EVAL_SCRIPT: &str = concat!(
    include_str!("breaker.lua"),
    "\nlocal a = {}\nfor i = 2, #ARGV do a[i - 1] = ARGV[i] end\n",
    "return dispatch(ARGV[1], KEYS, a)\n"
);

/// Most breakers in one flush call; a larger flush is split into several calls sent in one
/// pipeline (one round trip), up to [`MAX_BREAKERS_PER_ROUND_TRIP`].
pub const MAX_BREAKERS_PER_CALL: usize = 512;
/// Most breakers in one round trip of a flush: 8 calls of [`MAX_BREAKERS_PER_CALL`]. A larger
/// flush (the first after many registrations, or a degraded store's recovery flush, which
/// carries every registered breaker) is sent in several round trips, one after another, each
/// under the store's operation timeout. Why: one call of 512 breakers took the store about
/// 6 ms on a 2-core VM, so a round trip of 4,096 takes about 50 ms, well inside the default
/// 250 ms timeout; with 100,000 breakers in one round trip a degraded store's every recovery
/// flush outlasted the timeout, and the store never recovered.
pub const MAX_BREAKERS_PER_ROUND_TRIP: usize = 8 * MAX_BREAKERS_PER_CALL;
/// Most leases one acquire asks for.
pub const MAX_LEASES_PER_ACQUIRE: u32 = 64;
const MAX_SAFE: i64 = (1 << 53) - 1;

/// How the scripts are invoked on the connected server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptMode {
    /// `FCALL` of the `breaker_v1` function library (Redis 7 and later).
    Function,
    /// `EVALSHA` of one script, reloaded on `NOSCRIPT` (servers without functions).
    Eval,
}

/// The ops of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Add aggregated counts; may trip on the fleet rate; repairs from the high-water mark.
    Flush,
    /// A replica tripped locally (a vote under quorum).
    Trip,
    /// Reserve probe leases (promotes open to half-open once the deadline passed).
    AcquireProbe,
    /// Release a probe lease with its outcome.
    EndProbe,
    /// Manual control: reset, open, force open, force closed.
    Force,
    /// Adopt a replica's newer state.
    Repair,
}

impl Op {
    /// The op's name, as in the script and in errors.
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Flush => "flush",
            Op::Trip => "trip",
            Op::AcquireProbe => "acquire_probe",
            Op::EndProbe => "end_probe",
            Op::Force => "force",
            Op::Repair => "repair",
        }
    }

    fn function(self) -> &'static str {
        match self {
            Op::Flush => "breaker_v1_flush",
            Op::Trip => "breaker_v1_trip",
            Op::AcquireProbe => "breaker_v1_acquire_probe",
            Op::EndProbe => "breaker_v1_end_probe",
            Op::Force => "breaker_v1_force",
            Op::Repair => "breaker_v1_repair",
        }
    }
}

/// Why the shared state is what it is (the cause of its last transition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A replica's consecutive-failure rule tripped.
    ConsecutiveFailures,
    /// The failure rate (the fleet's, or a replica's under quorum) reached its threshold.
    FailureRate,
    /// The slow-call rate reached its threshold.
    SlowCallRate,
    /// The cooldown ended and a probe was requested.
    CooldownElapsed,
    /// A probe failed.
    ProbeFailed,
    /// Enough probes succeeded.
    ProbesSucceeded,
    /// Force open, force closed, open or reset.
    Manual,
    /// A replica re-wrote state the store had lost (restart, failover, expiry).
    Repaired,
    /// No transition yet.
    Initial,
}

impl Reason {
    fn from_code(c: i64) -> Option<Reason> {
        Some(match c {
            0 => Reason::ConsecutiveFailures,
            1 => Reason::FailureRate,
            2 => Reason::SlowCallRate,
            3 => Reason::CooldownElapsed,
            4 => Reason::ProbeFailed,
            5 => Reason::ProbesSucceeded,
            7 => Reason::Manual,
            8 => Reason::Repaired,
            9 => Reason::Initial,
            _ => return None,
        })
    }

    fn trip_code(self) -> Option<u8> {
        match self {
            Reason::ConsecutiveFailures => Some(0),
            Reason::FailureRate => Some(1),
            Reason::SlowCallRate => Some(2),
            _ => None,
        }
    }

    /// Lowercase snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::CooldownElapsed => "cooldown_elapsed",
            Reason::ProbeFailed => "probe_failed",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::Manual => "manual",
            Reason::Repaired => "repaired",
            Reason::Initial => "initial",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an op did, per breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Done as asked.
    Applied,
    /// Dropped: computed from another generation (or state) than the store's.
    Stale,
    /// The replica's high-water state was adopted.
    Repaired,
    /// The write opened the breaker.
    Tripped,
    /// Counts of the current generation in a state that has no window (open, forced): ignored.
    Ignored,
    /// A quorum vote was recorded; not enough votes yet.
    Voted,
    /// The probe's lease had expired: its outcome was not counted.
    Late,
    /// No lease granted (not half-open yet, or every slot taken).
    Denied,
}

impl Code {
    fn from_code(c: i64) -> Option<Code> {
        Some(match c {
            0 => Code::Applied,
            1 => Code::Stale,
            2 => Code::Repaired,
            3 => Code::Tripped,
            4 => Code::Ignored,
            5 => Code::Voted,
            6 => Code::Late,
            7 => Code::Denied,
            _ => return None,
        })
    }
}

fn state_tag(s: State) -> u8 {
    match s {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::ForcedClosed => 4,
    }
}

fn state_from_tag(t: i64) -> Option<State> {
    Some(match t {
        0 => State::Closed,
        1 => State::Open,
        2 => State::HalfOpen,
        3 => State::ForcedOpen,
        4 => State::ForcedClosed,
        _ => return None,
    })
}

/// A breaker's shared state as the store answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedState {
    /// The shared generation: bumped by every transition, never lowered (repair only raises it).
    pub generation: u64,
    /// The shared state.
    pub state: State,
    /// When open: the deadline, server time in ms since the Unix epoch. `None` otherwise.
    pub deadline_ms: Option<u64>,
    /// Consecutive openings since the breaker last closed (0..=255).
    pub streak: u32,
    /// Half-open: successful probes so far in this generation.
    pub probe_successes: u32,
    /// The replica whose write caused the last transition (`None` before any).
    pub caused_by: Option<ReplicaId>,
    /// Why.
    pub reason: Reason,
}

impl SharedState {
    /// The state of a breaker the store has never seen: closed, generation 0.
    pub fn initial() -> SharedState {
        SharedState {
            generation: 0,
            state: State::Closed,
            deadline_ms: None,
            streak: 0,
            probe_successes: 0,
            caused_by: None,
            reason: Reason::Initial,
        }
    }
}

/// A probe lease: a counted slot with an expiry, held by one probe.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    member: Arc<str>,
    generation: u64,
    expiry_ms: u64,
}

impl Lease {
    /// The half-open generation the lease belongs to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// When the slot frees itself, server ms.
    pub fn expiry_ms(&self) -> u64 {
        self.expiry_ms
    }

    /// The lease's member in the store's sorted set.
    pub fn id(&self) -> &str {
        &self.member
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &&*self.member)
            .field("expiry_ms", &self.expiry_ms)
            .finish()
    }
}

/// One breaker's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemReply {
    /// What the op did.
    pub code: Code,
    /// The shared state after the op.
    pub state: SharedState,
    /// Unexpired probe leases (half-open only, else 0).
    pub leases_in_flight: u32,
    /// Whether the pinned policy's fingerprint differs from the one sent.
    pub policy_mismatch: bool,
    /// The pinned policy's fingerprint.
    pub pinned_fingerprint: String,
    /// Leases granted by an acquire.
    pub granted: Vec<Lease>,
    /// The server's `TIME` during the op, ms since the Unix epoch (the reference of the
    /// deadline and of the lease expiries).
    pub server_now_ms: u64,
}

/// A checked reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The server's `TIME` during the op, ms since the Unix epoch.
    pub server_now_ms: u64,
    /// Replicas that flushed within the live window.
    pub live_replicas: u64,
    /// The namespace's version counter (bumped by every transition).
    pub version: u64,
    /// One answer per breaker, in request order.
    pub items: Vec<ItemReply>,
}

/// What a replica knows of a breaker's newest state: its high-water mark. Sent with every flush
/// so a store that lost writes is repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HighWater {
    /// The newest shared generation this replica has seen.
    pub generation: u64,
    /// The state of that generation.
    pub state: State,
    /// When open: the time left until the deadline, by this replica's monotonic clock.
    pub remaining: Duration,
    /// The open streak of that generation.
    pub streak: u32,
}

impl HighWater {
    /// Nothing known: generation 0, closed.
    pub const NONE: HighWater = HighWater {
        generation: 0,
        state: State::Closed,
        remaining: Duration::ZERO,
        streak: 0,
    };
}

/// A probe's outcome, for [`Protocol::end_probe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Counts toward closing.
    Success,
    /// Re-opens the fleet.
    Failure,
    /// Releases the slot only.
    Neutral,
}

/// The targets of [`Protocol::force`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceTarget {
    /// Closed, streak and window cleared (`reset`).
    Reset,
    /// Open with a fresh cooldown, as if tripped.
    Open,
    /// Forced open: every replica rejects until reset.
    ForcedOpen,
    /// Forced closed: every replica admits and records nothing until reset.
    ForcedClosed,
}

/// One breaker as the protocol addresses it: id, keys, compiled policy.
#[derive(Clone, Debug)]
pub struct Target {
    pub(crate) id: BreakerId,
    pub(crate) keys: BreakerKeys,
    pub(crate) policy: CompiledPolicy,
}

impl Target {
    /// The breaker `id` of `namespace` under `policy`.
    pub fn new(namespace: &Namespace, id: BreakerId, policy: CompiledPolicy) -> Target {
        let keys = namespace.breaker_keys(&id);
        Target { id, keys, policy }
    }

    /// The breaker's id.
    pub fn id(&self) -> &BreakerId {
        &self.id
    }

    /// The breaker's keys.
    pub fn keys(&self) -> &BreakerKeys {
        &self.keys
    }

    /// The breaker's policy.
    pub fn policy(&self) -> &CompiledPolicy {
        &self.policy
    }
}

/// One breaker's part of a flush.
#[derive(Clone, Debug)]
pub struct FlushItem<'a> {
    /// The breaker.
    pub target: &'a Target,
    /// The shared generation the counts were recorded under.
    pub generation: u64,
    /// Successful calls.
    pub successes: u64,
    /// Failed calls.
    pub failures: u64,
    /// Slow calls (a subset of the successes and failures).
    pub slow: u64,
    /// The replica's high-water mark of this breaker.
    pub high_water: HighWater,
}
