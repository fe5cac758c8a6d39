//! The wire protocol: the store's primitives, the arguments they take and the checked replies.
//!
//! # What the store does, and what it does not
//! The store keeps each breaker's state *word* (the core breaker's own `u64` encoding, its
//! probes-in-flight field kept zero), its open deadline, who made the last transition, the
//! probe leases, the window of aggregated counts and the quorum votes. It applies four
//! primitives, none of which knows a breaker rule (source: `store.lua` next to this file, with
//! every rule it enforces in its header):
//!
//! - `read`: the words, each with its probes in flight materialized from the unexpired leases;
//! - `add`: adds counts to the window if the stored word is the one they were recorded under,
//!   and returns the window's totals (the client applies the core's `rate_trip`);
//! - `vote`: records this replica's vote in the stored word's period, returns the distinct
//!   votes within the window (the client compares with the quorum);
//! - `cas`: a fenced compare-and-set: the next word the client decided (with the core's
//!   deciders) replaces the stored one only if that is still the word the client decided on;
//!   with its effects (a cooldown from the store's clock, a lease released or granted, and on
//!   a transition the window, leases and votes cleared and the new word published), and two
//!   guards: `not_before` (a promotion out of open applies only once the store's clock passed
//!   the deadline) and `valid_until` (every call, exclusive: an op that runs in the server's
//!   millisecond `valid_until` or later, which may be after the client gave up on it, writes
//!   nothing and answers `expired`).
//!
//! The one decision kept in the script, for atomicity, is the lease semaphore: a `cas` asking
//! for `want` leases is granted `min(want, cap - unexpired leases)`, the core's `free_slot`
//! repeated. A test in CI (`protocol::redis_tests`) feeds the same inputs to both and asserts
//! the same grants.
//!
//! # Checked replies
//! Every reply is checked before anything is taken from it: its shape and types, every
//! number's range, the words (a state tag the core knows, counts within their fields), and
//! each op's rules (an applied `cas` answers with the word it was sent; an `add` or a `vote`
//! applies only to the word it expected; leases no more than asked, expiring in the future). A
//! reply that breaks a rule is a [`StoreError::Malformed`], never a panic and never a state
//! change.
//!
//! # Files
//! - `mod.rs`: the script's source and limits, and the wire types.
//! - `client.rs`: [`Protocol`], the client that builds and sends each op.
//! - `parse.rs`: the reply checks, and the published transitions.
//! - `store.lua`: the server-side source.

use crate::error::{Redactor, StoreError};
use crate::names::{BreakerId, BreakerKeys, Namespace, NamespaceKeys, ReplicaId};
use breaker_core::breaker::decide::Word;
use breaker_core::breaker::TransitionReason;
use redis::aio::ConnectionLike;
use redis::Value;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

mod client;
mod parse;
#[cfg(test)]
mod redis_tests;
#[cfg(test)]
mod tests;

pub(crate) use client::Protocol;
pub(crate) use parse::parse_published;

/// The name of the function library.
pub(crate) const LIBRARY_NAME: &str = "breaker_v2";

/// Most breakers in one call; a larger batch is split into several calls sent in one pipeline
/// (one round trip), up to [`MAX_ITEMS_PER_ROUND_TRIP`].
pub(crate) const MAX_ITEMS_PER_CALL: usize = 512;
/// Most breakers in one round trip: 8 calls of [`MAX_ITEMS_PER_CALL`]. A larger batch (the
/// first flush after many registrations, or the reconciliation after a store fault, which reads
/// every registered breaker) is sent in several round trips, one after another, each under the
/// store's operation timeout. Why: one call of 512 breakers took the store about 6 ms on a
/// 2-core VM, so a round trip of 4,096 takes about 50 ms, well inside the default 250 ms
/// timeout; with 100,000 breakers in one round trip every recovery outlasted the timeout.
pub(crate) const MAX_ITEMS_PER_ROUND_TRIP: usize = 8 * MAX_ITEMS_PER_CALL;
/// Most leases one `cas` grants.
pub(crate) const MAX_LEASES_PER_GRANT: u32 = 64;
/// Most buckets of a fleet window (so a breaker's window stays a few hundred bytes in Redis).
pub(crate) const MAX_BUCKETS: u32 = 20;
/// The largest number a reply or an argument carries: 2^53 - 1 (Lua's exact integers).
pub(crate) const MAX_SAFE: u64 = (1 << 53) - 1;
/// The longest breaker id the script accepts: the one bound of every id
/// ([`names::MAX_ID_LEN`](crate::names::MAX_ID_LEN); a keyed breaker's id is hashed to fit).
pub(crate) const MAX_ID_LEN: usize = crate::names::MAX_ID_LEN;
/// The longest lease id: a sequence number, the epoch and the replica id.
pub(crate) const MAX_LEASE_ID: usize = 20 + 1 + 40 + 1 + crate::names::MAX_NAME_LEN;
/// The longest channel name.
const MAX_CHANNEL: usize = 16 + crate::names::MAX_NAME_LEN;
/// The most probes of a half-open period (the word's field).
const MAX_PROBES: u32 = breaker_core::breaker::decide::MAX_IN_FLIGHT;

/// The script's limits, generated from the constants above so the two cannot disagree.
fn limits() -> String {
    format!(
        "local MAX_MS, MAX_ITEMS, MAX_ID, MAX_REPLICA, MAX_CHANNEL, MAX_LEASES, MAX_PROBES, \
         MAX_BUCKETS, MAX_LEASE_ID = {MAX_SAFE}, {MAX_ITEMS_PER_CALL}, {MAX_ID_LEN}, {}, \
         {MAX_CHANNEL}, {MAX_LEASES_PER_GRANT}, {MAX_PROBES}, {MAX_BUCKETS}, {MAX_LEASE_ID}\n",
        crate::names::MAX_NAME_LEN
    )
}

/// The library's source as loaded with `FUNCTION LOAD`.
pub(crate) fn library() -> &'static str {
    static LIBRARY: OnceLock<String> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let mut s = format!("#!lua name={LIBRARY_NAME}\n");
        s.push_str(&limits());
        s.push_str(include_str!("store.lua"));
        s.push_str(
            "\nlocal function entry(op) return function(keys, args) return dispatch(op, keys, \
             args) end end\n",
        );
        for op in Op::ALL {
            s.push_str(&format!(
                "redis.register_function('{}', entry('{}'))\n",
                op.function(),
                op.as_str()
            ));
        }
        s
    })
}

/// The same source as one script for `EVALSHA` (first argument: the op's name).
pub(crate) fn eval_script() -> &'static str {
    static SCRIPT: OnceLock<String> = OnceLock::new();
    SCRIPT.get_or_init(|| {
        let mut s = limits();
        s.push_str(include_str!("store.lua"));
        s.push_str(
            "\nlocal a = {}\nfor i = 2, #ARGV do a[i - 1] = ARGV[i] end\nreturn dispatch(ARGV[1], \
             KEYS, a)\n",
        );
        s
    })
}

/// How the scripts are invoked on the connected server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptMode {
    /// `FCALL` of the function library (Redis 7 and later).
    Function,
    /// `EVALSHA` of one script, reloaded on `NOSCRIPT` (servers without functions).
    Eval,
}

/// The store's primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// The words, nothing written.
    Read,
    /// Add counts to the window of the expected word; the window's totals.
    Add,
    /// A quorum vote in the expected word's period; the distinct votes.
    Vote,
    /// The fenced compare-and-set.
    Cas,
}

impl Op {
    const ALL: [Op; 4] = [Op::Read, Op::Add, Op::Vote, Op::Cas];

    /// The op's name, as in the script and in errors.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Add => "add",
            Op::Vote => "vote",
            Op::Cas => "cas",
        }
    }

    fn function(self) -> &'static str {
        match self {
            Op::Read => "breaker_v2_read",
            Op::Add => "breaker_v2_add",
            Op::Vote => "breaker_v2_vote",
            Op::Cas => "breaker_v2_cas",
        }
    }
}

/// What an op did, per breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// Done as asked.
    Applied,
    /// Not done: the stored word is not the one expected (it is in the reply).
    Stale,
    /// Not done: the store has no word for the breaker (never written, or lost).
    Missing,
    /// Not done: `not_before` is still ahead on the store's clock.
    Early,
    /// Not done: the call ran in its `valid_until` millisecond or later (the bound is
    /// exclusive).
    Expired,
    /// Not done: an argument of this item was refused (a client bug; the others went on).
    Bad,
}

impl Code {
    fn from_code(c: i64) -> Option<Code> {
        Some(match c {
            0 => Code::Applied,
            1 => Code::Stale,
            2 => Code::Missing,
            3 => Code::Early,
            4 => Code::Expired,
            5 => Code::Bad,
            _ => return None,
        })
    }
}

/// The wire code of a transition reason: the one table, for the store's `rs` field and the
/// published messages.
pub(crate) fn reason_code(r: TransitionReason) -> u8 {
    match r {
        TransitionReason::ConsecutiveFailures => 0,
        TransitionReason::FailureRate => 1,
        TransitionReason::SlowCallRate => 2,
        TransitionReason::CooldownElapsed => 3,
        TransitionReason::ProbeFailed => 4,
        TransitionReason::ProbesSucceeded => 5,
        TransitionReason::ProbeExpired => 6,
        TransitionReason::Manual => 7,
    }
}

/// The reason of wire code `c` (the inverse of [`reason_code`]).
pub(crate) fn reason_of(c: u8) -> Option<TransitionReason> {
    TransitionReason::ALL
        .into_iter()
        .find(|r| reason_code(*r) == c)
}

/// A word on the wire: its encoding with no probes in flight (the store materializes those
/// from the leases).
pub(crate) fn wire_word(w: Word) -> String {
    Word { in_flight: 0, ..w }.encode().to_string()
}

/// A breaker's word as the store answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The word, its probes in flight the unexpired leases.
    pub(crate) word: Word,
    /// Open: the deadline, server ms since the Unix epoch (0: none).
    pub(crate) deadline_ms: u64,
    /// The replica whose write made the last transition.
    pub(crate) by: Option<ReplicaId>,
    /// Its reason.
    pub(crate) reason: TransitionReason,
    /// That replica's policy fingerprint.
    pub(crate) fingerprint: String,
}

/// A probe lease: a counted slot of the fleet's half-open period with an expiry, held by one
/// probe ([`SharedPermit::lease`](crate::SharedPermit::lease)).
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) member: Arc<str>,
    /// The store's epoch it was granted in (a lease of a lost store is of no period now).
    pub(crate) epoch: Arc<str>,
    /// The generation of the half-open period it belongs to.
    pub(crate) generation: u32,
    /// When the slot frees itself, server ms.
    pub(crate) expiry_ms: u64,
}

impl Lease {
    /// The lease's id in the store (a sequence number, the store's epoch and the replica).
    pub fn id(&self) -> &str {
        &self.member
    }

    /// The fleet generation of the half-open period it belongs to.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// When its slot frees itself, server ms since the Unix epoch.
    pub fn expiry_ms(&self) -> u64 {
        self.expiry_ms
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &&*self.member)
            .field("generation", &self.generation)
            .field("expiry_ms", &self.expiry_ms)
            .finish()
    }
}

/// What an op answers besides the word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Extra {
    /// Nothing.
    None,
    /// `add`: the window's totals (successes, failures, slow).
    Totals {
        successes: u64,
        failures: u64,
        slow: u64,
    },
    /// `vote`: distinct votes within the window.
    Votes(u64),
    /// `cas`: the leases granted.
    Granted(Vec<Lease>),
}

/// One breaker's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ItemReply {
    /// What the op did.
    pub(crate) code: Code,
    /// The breaker's word after the op (`None`: missing).
    pub(crate) stored: Option<Stored>,
    /// The op's own values.
    pub(crate) extra: Extra,
}

/// A checked reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The server's `TIME` during the op, ms since the Unix epoch.
    pub(crate) server_now_ms: u64,
    /// The namespace's epoch ('' when it has none: nothing written since the store lost it).
    pub(crate) epoch: Arc<str>,
    /// Replicas that flushed within the live window.
    pub(crate) live_replicas: u64,
    /// The namespace's version counter (bumped by every transition).
    pub(crate) version: u64,
    /// One answer per breaker, in request order.
    pub(crate) items: Vec<ItemReply>,
}

/// What a breaker's every write carries besides its word: from its policy and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    /// The fingerprint of the replica's policy (16 hex digits).
    pub(crate) fingerprint: Arc<str>,
    /// Expiry of the breaker's keys after their last write, ms.
    pub(crate) ttl_ms: u64,
    /// The fleet window's length, ms.
    pub(crate) window_ms: u64,
    /// Its buckets.
    pub(crate) buckets: u32,
    /// Probes in flight across the fleet.
    pub(crate) cap: u32,
    /// How long a probe lease lives, ms (the probe wait).
    pub(crate) lease_ms: u64,
    /// Distinct replicas whose trips open the fleet.
    pub(crate) quorum: u32,
}

/// One breaker as the protocol addresses it: id, keys, parameters.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) id: BreakerId,
    pub(crate) keys: BreakerKeys,
    pub(crate) params: Params,
}

impl Target {
    /// The breaker `id` of `namespace` with `params`.
    pub(crate) fn new(namespace: &Namespace, id: BreakerId, params: Params) -> Target {
        let keys = namespace.breaker_keys(&id);
        Target { id, keys, params }
    }
}

/// One breaker's part of an `add`.
#[derive(Clone, Debug)]
pub(crate) struct AddItem<'a> {
    pub(crate) target: &'a Target,
    /// The word the counts were recorded under (a closed word).
    pub(crate) expect: Word,
    /// Creates the breaker as `expect` if the store holds no word for it (one never written;
    /// never set for one the store lost: that one is seeded from the local breaker).
    pub(crate) create: bool,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    /// Slow calls (a subset of the successes and failures).
    pub(crate) slow: u64,
}

/// One breaker's `cas`.
#[derive(Clone, Debug)]
pub(crate) struct CasItem<'a> {
    pub(crate) target: &'a Target,
    /// The word decided on (`None`: the store has none).
    pub(crate) expect: Option<Word>,
    /// The word decided.
    pub(crate) next: Word,
    /// Why, when `next` is a transition (a new generation).
    pub(crate) reason: TransitionReason,
    /// Also applies (the leases only) when the store holds `next` already: another replica
    /// made the same deterministic change (a promotion out of open) first.
    pub(crate) join: bool,
    /// Applies only once the store's clock is at least this (server ms; 0: now).
    pub(crate) not_before: u64,
    /// Sets the deadline to the store's now plus this (ms); `None` keeps it (none on a
    /// transition).
    pub(crate) cooldown_ms: Option<u64>,
    /// Leases wanted (0: none).
    pub(crate) want: u32,
    /// A lease to release.
    pub(crate) release: Option<Arc<str>>,
}

impl CasItem<'_> {
    /// Whether `next` starts a new generation.
    pub(crate) fn is_transition(&self) -> bool {
        self.expect
            .map_or(true, |e| e.generation != self.next.generation)
    }
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
