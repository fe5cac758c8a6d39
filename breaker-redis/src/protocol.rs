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
/// pipeline (one round trip).
pub const MAX_BREAKERS_PER_CALL: usize = 512;
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

/// The protocol client of one replica in one namespace. Stateless apart from the script mode,
/// so one instance serves any number of connections.
pub struct Protocol {
    replica: ReplicaId,
    ns: NamespaceKeys,
    ns_ttl_ms: u64,
    live_ms: u64,
    mode: AtomicU8,
    script: redis::Script,
    jitter: Mutex<Jitter>,
    redactor: Redactor,
}

enum Jitter {
    Fixed(u32),
    Rng(rand::rngs::SmallRng),
}

impl fmt::Debug for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protocol")
            .field("replica", &self.replica)
            .field("channel", &self.ns.channel)
            .field("mode", &self.mode())
            .finish()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Protocol {
    /// The protocol client of `replica` in `namespace`. `live` is how long a replica counts as
    /// live after its last flush (about three flush intervals); `ns_ttl` the expiry of the
    /// namespace-wide keys.
    pub fn new(
        namespace: &Namespace,
        replica: ReplicaId,
        live: Duration,
        ns_ttl: Duration,
    ) -> Self {
        use rand::SeedableRng;
        Protocol {
            replica,
            ns: namespace.keys(),
            ns_ttl_ms: ms(ns_ttl).max(1),
            live_ms: ms(live).max(1),
            mode: AtomicU8::new(0),
            script: redis::Script::new(EVAL_SCRIPT),
            jitter: Mutex::new(Jitter::Rng(rand::rngs::SmallRng::from_entropy())),
            redactor: Redactor::default(),
        }
    }

    /// Uses `redactor` for every error message.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Uses the fixed jitter draw `u` (0..1_000_000, clamped) instead of random ones: tests.
    pub fn with_fixed_jitter(self, u: u32) -> Self {
        *self.jitter.lock().unwrap_or_else(|e| e.into_inner()) = Jitter::Fixed(u.min(999_999));
        self
    }

    /// This replica's id.
    pub fn replica(&self) -> &ReplicaId {
        &self.replica
    }

    /// The namespace's keys and channel.
    pub fn namespace_keys(&self) -> &NamespaceKeys {
        &self.ns
    }

    /// The script mode found by [`load`](Self::load), `None` before.
    pub fn mode(&self) -> Option<ScriptMode> {
        match self.mode.load(Ordering::Acquire) {
            1 => Some(ScriptMode::Function),
            2 => Some(ScriptMode::Eval),
            _ => None,
        }
    }

    /// Forces the script mode (tests of the `EVALSHA` path on a server that has functions).
    pub fn set_mode(&self, mode: ScriptMode) {
        let v = match mode {
            ScriptMode::Function => 1,
            ScriptMode::Eval => 2,
        };
        self.mode.store(v, Ordering::Release);
    }

    /// Loads the function library (`FUNCTION LOAD REPLACE`), or falls back to `EVALSHA` on a
    /// server that has no functions.
    ///
    /// # Errors
    /// [`StoreError`] if the server cannot be reached or rejects the library.
    pub async fn load<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<ScriptMode, StoreError> {
        let r: redis::RedisResult<String> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(LIBRARY)
            .query_async(conn)
            .await;
        match r {
            Ok(_) => {
                self.set_mode(ScriptMode::Function);
                Ok(ScriptMode::Function)
            }
            Err(e)
                if e.to_string()
                    .to_ascii_lowercase()
                    .contains("unknown command") =>
            {
                self.set_mode(ScriptMode::Eval);
                Ok(ScriptMode::Eval)
            }
            Err(e) => Err(self.redactor.error("load", &e)),
        }
    }

    fn draw(&self) -> u32 {
        use rand::Rng;
        match &mut *self.jitter.lock().unwrap_or_else(|e| e.into_inner()) {
            Jitter::Fixed(u) => *u,
            Jitter::Rng(r) => r.gen_range(0..1_000_000),
        }
    }

    fn header(&self, n: usize) -> (Vec<String>, Vec<String>) {
        let keys = vec![self.ns.replicas.clone(), self.ns.version.clone()];
        let args = vec![
            self.replica.as_str().to_owned(),
            self.ns.channel.clone(),
            self.ns_ttl_ms.to_string(),
            self.draw().to_string(),
            self.live_ms.to_string(),
            n.to_string(),
        ];
        (keys, args)
    }

    fn push_target(keys: &mut Vec<String>, args: &mut Vec<String>, t: &Target) {
        keys.extend([
            t.keys.state.clone(),
            t.keys.window.clone(),
            t.keys.leases.clone(),
            t.keys.votes.clone(),
        ]);
        args.extend([
            t.id.as_str().to_owned(),
            t.policy.fingerprint.to_string(),
            t.policy.canonical.to_string(),
        ]);
    }

    fn build(&self, targets: &[(&Target, Vec<String>)]) -> (Vec<String>, Vec<String>) {
        let (mut keys, mut args) = self.header(targets.len());
        for (t, extra) in targets {
            Self::push_target(&mut keys, &mut args, t);
            args.extend(extra.iter().cloned());
        }
        (keys, args)
    }

    fn cmd(&self, op: Op, keys: &[String], args: &[String]) -> redis::Cmd {
        if self.mode() == Some(ScriptMode::Eval) {
            let mut c = redis::cmd("EVALSHA");
            c.arg(self.script.get_hash()).arg(keys.len()).arg(keys);
            c.arg(op.as_str()).arg(args);
            c
        } else {
            let mut c = redis::cmd("FCALL");
            c.arg(op.function()).arg(keys.len()).arg(keys).arg(args);
            c
        }
    }

    fn eval_cmd(&self, op: Op, keys: &[String], args: &[String]) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(EVAL_SCRIPT).arg(keys.len()).arg(keys);
        c.arg(op.as_str()).arg(args);
        c
    }

    /// Sends one call; reloads the library (or the script) once when the server lost it.
    async fn invoke<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        op: Op,
        keys: &[String],
        args: &[String],
    ) -> Result<Value, StoreError> {
        if self.mode().is_none() {
            self.load(conn).await?;
        }
        let first: redis::RedisResult<Value> = self.cmd(op, keys, args).query_async(conn).await;
        match first {
            Ok(v) => Ok(v),
            Err(e) => {
                if is_noscript(&e) {
                    self.eval_cmd(op, keys, args)
                        .query_async(conn)
                        .await
                        .map_err(|e| self.redactor.error(op.as_str(), &e))
                } else if is_lost_function(&e) {
                    self.load(conn).await?;
                    self.cmd(op, keys, args)
                        .query_async(conn)
                        .await
                        .map_err(|e| self.redactor.error(op.as_str(), &e))
                } else {
                    Err(self.redactor.error(op.as_str(), &e))
                }
            }
        }
    }

    /// Flushes aggregated counts and high-water marks of several breakers (split into calls of
    /// at most [`MAX_BREAKERS_PER_CALL`], sent as one pipeline).
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub async fn flush<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        items: &[FlushItem<'_>],
    ) -> Result<Reply, StoreError> {
        if items.is_empty() {
            return Err(StoreError::Config {
                message: "flush of no breakers".into(),
            });
        }
        let op = Op::Flush;
        let chunks: Vec<_> = items.chunks(MAX_BREAKERS_PER_CALL).collect();
        let mut calls = Vec::with_capacity(chunks.len());
        for chunk in &chunks {
            let targets: Vec<_> = chunk
                .iter()
                .map(|i| {
                    let h = &i.high_water;
                    (
                        i.target,
                        vec![
                            i.generation.to_string(),
                            i.successes.to_string(),
                            i.failures.to_string(),
                            i.slow.min(i.successes + i.failures).to_string(),
                            h.generation.to_string(),
                            state_tag(h.state).to_string(),
                            ms(h.remaining).to_string(),
                            h.streak.to_string(),
                        ],
                    )
                })
                .collect();
            calls.push(self.build(&targets));
        }
        let values = if calls.len() == 1 {
            vec![self.invoke(conn, op, &calls[0].0, &calls[0].1).await?]
        } else {
            if self.mode().is_none() {
                self.load(conn).await?;
            }
            let mut pipe = redis::pipe();
            for (k, a) in &calls {
                pipe.add_command(self.cmd(op, k, a));
            }
            let r: redis::RedisResult<Vec<Value>> = pipe.query_async(conn).await;
            match r {
                Ok(v) => v,
                Err(e) => {
                    // Lost library or script: reload and send the calls one by one.
                    if is_noscript(&e) || is_lost_function(&e) {
                        let mut out = Vec::with_capacity(calls.len());
                        for (k, a) in &calls {
                            out.push(self.invoke(conn, op, k, a).await?);
                        }
                        out
                    } else {
                        return Err(self.redactor.error(op.as_str(), &e));
                    }
                }
            }
        };
        if values.len() != chunks.len() {
            return Err(malformed(op, "pipeline answered the wrong number of calls"));
        }
        let mut merged: Option<Reply> = None;
        for (v, chunk) in values.into_iter().zip(&chunks) {
            let r = parse(op, v, chunk.len())?;
            for (it, req) in r.items.iter().zip(chunk.iter()) {
                check_flush(it, req)?;
            }
            match &mut merged {
                None => merged = Some(r),
                Some(m) => {
                    m.server_now_ms = m.server_now_ms.max(r.server_now_ms);
                    m.live_replicas = m.live_replicas.max(r.live_replicas);
                    m.version = m.version.max(r.version);
                    m.items.extend(r.items);
                }
            }
        }
        merged.ok_or_else(|| malformed(op, "no reply"))
    }

    /// A replica tripped locally from `generation` because of `reason` (one of
    /// consecutive failures, failure rate, slow-call rate).
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol;
    /// [`StoreError::Config`] for another reason.
    pub async fn trip<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        generation: u64,
        reason: Reason,
    ) -> Result<ItemReply, StoreError> {
        let op = Op::Trip;
        let code = reason.trip_code().ok_or_else(|| StoreError::Config {
            message: format!("a trip's reason must be a trip rule, got `{reason}`"),
        })?;
        let (k, a) = self.build(&[(target, vec![generation.to_string(), code.to_string()])]);
        let v = self.invoke(conn, op, &k, &a).await?;
        let it = single(op, v)?;
        let g = it.state.generation;
        let ok = match it.code {
            Code::Tripped => g == generation + 1 && it.state.state == State::Open,
            Code::Voted => g == generation && it.state.state == State::Closed,
            Code::Stale => g != generation || it.state.state != State::Closed,
            _ => false,
        };
        if !ok {
            return Err(malformed(
                op,
                format!(
                    "code {:?} with generation {g} for a trip from {generation}",
                    it.code
                ),
            ));
        }
        Ok(it)
    }

    /// Reserves up to `want` probe leases of `target.policy().lease()` each. Promotes an open
    /// breaker whose deadline passed (server time) to half-open.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub async fn acquire_probe<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        want: u32,
    ) -> Result<ItemReply, StoreError> {
        let op = Op::AcquireProbe;
        let want = want.clamp(1, MAX_LEASES_PER_ACQUIRE);
        let lease = ms(target.policy.lease).max(1);
        let (k, a) = self.build(&[(target, vec![want.to_string(), lease.to_string()])]);
        let v = self.invoke(conn, op, &k, &a).await?;
        let r = parse(op, v, 1)?;
        let now = r.server_now_ms;
        let it = r
            .items
            .into_iter()
            .next()
            .ok_or_else(|| malformed(op, "no item"))?;
        let ok = match it.code {
            Code::Applied => {
                it.state.state == State::HalfOpen
                    && !it.granted.is_empty()
                    && it.granted.len() <= want as usize
                    && it
                        .granted
                        .iter()
                        .all(|l| l.generation == it.state.generation && l.expiry_ms > now)
            }
            Code::Denied => it.granted.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(malformed(
                op,
                format!(
                    "code {:?} with {} leases in state {}",
                    it.code,
                    it.granted.len(),
                    it.state.state
                ),
            ));
        }
        Ok(it)
    }

    /// Ends a probe: releases its lease with its outcome.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub async fn end_probe<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        lease: &Lease,
        outcome: ProbeOutcome,
    ) -> Result<ItemReply, StoreError> {
        let op = Op::EndProbe;
        let o = match outcome {
            ProbeOutcome::Success => "s",
            ProbeOutcome::Failure => "f",
            ProbeOutcome::Neutral => "n",
        };
        let (k, a) = self.build(&[(target, vec![lease.member.to_string(), o.to_owned()])]);
        let v = self.invoke(conn, op, &k, &a).await?;
        let it = single(op, v)?;
        let (g, lg) = (it.state.generation, lease.generation);
        let ok = match it.code {
            Code::Applied => g == lg || g == lg + 1,
            Code::Late => g == lg,
            Code::Stale => true,
            _ => false,
        };
        if !ok {
            return Err(malformed(
                op,
                format!("code {:?} with generation {g} for a lease of {lg}", it.code),
            ));
        }
        Ok(it)
    }

    /// Manual control, applied whatever the current generation, re-pinning this policy.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub async fn force<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        to: ForceTarget,
    ) -> Result<ItemReply, StoreError> {
        let op = Op::Force;
        let (tag, state) = match to {
            ForceTarget::Reset => (0, State::Closed),
            ForceTarget::Open => (1, State::Open),
            ForceTarget::ForcedOpen => (3, State::ForcedOpen),
            ForceTarget::ForcedClosed => (4, State::ForcedClosed),
        };
        let (k, a) = self.build(&[(target, vec![tag.to_string()])]);
        let v = self.invoke(conn, op, &k, &a).await?;
        let it = single(op, v)?;
        if it.code != Code::Applied || it.state.state != state || it.state.generation == 0 {
            return Err(malformed(
                op,
                format!(
                    "code {:?} in state {} after force to {state}",
                    it.code, it.state.state
                ),
            ));
        }
        Ok(it)
    }

    /// Fleet-wide reset: closed, window and streak cleared.
    ///
    /// # Errors
    /// As [`force`](Self::force).
    pub async fn reset<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
    ) -> Result<ItemReply, StoreError> {
        self.force(conn, target, ForceTarget::Reset).await
    }

    /// Offers a replica's high-water state; adopted if newer than the store's.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub async fn repair<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        hw: &HighWater,
    ) -> Result<ItemReply, StoreError> {
        let op = Op::Repair;
        let extra = vec![
            hw.generation.to_string(),
            state_tag(hw.state).to_string(),
            ms(hw.remaining).to_string(),
            hw.streak.to_string(),
        ];
        let (k, a) = self.build(&[(target, extra)]);
        let v = self.invoke(conn, op, &k, &a).await?;
        let it = single(op, v)?;
        let g = it.state.generation;
        let ok = g >= hw.generation
            && match it.code {
                Code::Repaired => g == hw.generation && it.state.state == hw.state,
                Code::Stale | Code::Applied => true,
                _ => false,
            };
        if !ok {
            return Err(malformed(
                op,
                format!(
                    "code {:?} with generation {g} below the high-water {}",
                    it.code, hw.generation
                ),
            ));
        }
        Ok(it)
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::NoScriptError || e.to_string().contains("NOSCRIPT")
}

fn is_lost_function(e: &redis::RedisError) -> bool {
    e.to_string().contains("Function not found")
}

fn malformed(op: Op, what: impl Into<String>) -> StoreError {
    StoreError::Malformed {
        op: op.as_str(),
        what: what.into(),
    }
}

fn check_flush(it: &ItemReply, req: &FlushItem<'_>) -> Result<(), StoreError> {
    let g = it.state.generation;
    let has = req.successes + req.failures > 0;
    let ok = g >= req.high_water.generation
        && match it.code {
            Code::Applied => !has || g == req.generation,
            Code::Ignored => has && g == req.generation && it.state.state != State::Closed,
            Code::Tripped => has && g == req.generation + 1 && it.state.state == State::Open,
            Code::Stale => has && g != req.generation,
            Code::Repaired => g == req.high_water.generation || g == req.generation + 1,
            _ => false,
        };
    if ok {
        Ok(())
    } else {
        Err(malformed(
            Op::Flush,
            format!(
                "code {:?} with generation {g} for counts of generation {} (high-water {})",
                it.code, req.generation, req.high_water.generation
            ),
        ))
    }
}

fn single(op: Op, v: Value) -> Result<ItemReply, StoreError> {
    parse(op, v, 1)?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| malformed(op, "no item"))
}

fn int(op: Op, v: &Value, what: &str, max: i64) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) if (0..=max).contains(i) => Ok(*i),
        Value::Int(i) => Err(malformed(op, format!("{what} {i} out of range 0..={max}"))),
        other => Err(malformed(
            op,
            format!("{what}: expected an integer, got {}", kind(other)),
        )),
    }
}

fn text<'v>(op: Op, v: &'v Value, what: &str, max_len: usize) -> Result<&'v str, StoreError> {
    match v {
        Value::BulkString(b) if b.len() <= max_len => {
            std::str::from_utf8(b).map_err(|_| malformed(op, format!("{what}: not utf-8")))
        }
        Value::SimpleString(s) if s.len() <= max_len => Ok(s),
        Value::BulkString(_) | Value::SimpleString(_) => Err(malformed(
            op,
            format!("{what}: longer than {max_len} bytes"),
        )),
        other => Err(malformed(
            op,
            format!("{what}: expected a string, got {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) | Value::SimpleString(_) | Value::VerbatimString { .. } => "a string",
        Value::Array(_) | Value::Set(_) => "an array",
        Value::Map(_) => "a map",
        Value::Okay => "OK",
        Value::ServerError(_) => "an error",
        _ => "another type",
    }
}

fn array<'v>(op: Op, v: &'v Value, what: &str) -> Result<&'v [Value], StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(malformed(
            op,
            format!("{what}: expected an array, got {}", kind(other)),
        )),
    }
}

/// Parses and checks a reply of `expect` items (shape, types, ranges, state/deadline
/// consistency, lease generations).
///
/// # Errors
/// [`StoreError::Malformed`] naming the first thing wrong.
pub fn parse(op: Op, v: Value, expect: usize) -> Result<Reply, StoreError> {
    if let Value::ServerError(e) = &v {
        return Err(StoreError::Server {
            op: op.as_str(),
            message: format!("{e:?}"),
        });
    }
    let top = array(op, &v, "reply")?;
    if top.len() != 4 + expect {
        return Err(malformed(
            op,
            format!("expected {} elements, got {}", 4 + expect, top.len()),
        ));
    }
    if text(op, &top[0], "version tag", 8)? != "brk1" {
        return Err(malformed(op, "unknown version tag"));
    }
    let now = int(op, &top[1], "server time", MAX_SAFE)? as u64;
    if now == 0 {
        return Err(malformed(op, "server time 0"));
    }
    let live = int(op, &top[2], "live replicas", MAX_SAFE)? as u64;
    let version = int(op, &top[3], "namespace version", MAX_SAFE)? as u64;
    let mut items = Vec::with_capacity(expect);
    for (i, raw) in top[4..].iter().enumerate() {
        let what = format!("item {i}");
        let f = array(op, raw, &what)?;
        if f.len() != 13 {
            return Err(malformed(
                op,
                format!("{what}: expected 13 fields, got {}", f.len()),
            ));
        }
        let code =
            Code::from_code(int(op, &f[0], "code", 7)?).ok_or_else(|| malformed(op, "code"))?;
        let generation = int(op, &f[1], "generation", MAX_SAFE)? as u64;
        let state =
            state_from_tag(int(op, &f[2], "state", 4)?).ok_or_else(|| malformed(op, "state"))?;
        let dl = int(op, &f[3], "deadline", MAX_SAFE)? as u64;
        let streak = int(op, &f[4], "open streak", 255)? as u32;
        let probe_successes = int(op, &f[5], "probe successes", 8_191)? as u32;
        let leases_in_flight = int(op, &f[6], "leases in flight", 65_535)? as u32;
        let policy_mismatch = int(op, &f[7], "policy mismatch", 1)? == 1;
        let by = text(op, &f[8], "caused by", 128)?;
        let caused_by = if by.is_empty() {
            None
        } else {
            Some(ReplicaId::parse(by).ok_or_else(|| malformed(op, "caused by: not a replica id"))?)
        };
        let reason = Reason::from_code(int(op, &f[9], "reason", 9)?)
            .ok_or_else(|| malformed(op, "reason: unknown code"))?;
        let fp = text(op, &f[10], "pinned fingerprint", 64)?.to_owned();
        let granted_raw = array(op, &f[11], "granted leases")?;
        let lease_exp = int(op, &f[12], "lease expiry", MAX_SAFE)? as u64;
        if (state == State::Open) != (dl > 0) {
            return Err(malformed(
                op,
                format!("{what}: state {state} with deadline {dl}"),
            ));
        }
        if granted_raw.len() > MAX_LEASES_PER_ACQUIRE as usize {
            return Err(malformed(op, "too many leases"));
        }
        let mut granted = Vec::with_capacity(granted_raw.len());
        for l in granted_raw {
            let member = text(op, l, "lease", 300)?;
            let lg: u64 = member
                .split(':')
                .next()
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| malformed(op, "lease without a generation"))?;
            if lg != generation || lease_exp == 0 {
                return Err(malformed(
                    op,
                    format!("lease of generation {lg} in generation {generation}"),
                ));
            }
            granted.push(Lease {
                member: member.into(),
                generation: lg,
                expiry_ms: lease_exp,
            });
        }
        items.push(ItemReply {
            code,
            state: SharedState {
                generation,
                state,
                deadline_ms: (dl > 0).then_some(dl),
                streak,
                probe_successes,
                caused_by,
                reason,
            },
            leases_in_flight,
            policy_mismatch,
            pinned_fingerprint: fp,
            granted,
            server_now_ms: now,
        });
    }
    Ok(Reply {
        server_now_ms: now,
        live_replicas: live,
        version,
        items,
    })
}

/// A transition as published on the namespace's channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The breaker.
    pub id: BreakerId,
    /// The state entered, with its generation and deadline.
    pub state: SharedState,
    /// The server's time when it was published, ms.
    pub server_now_ms: u64,
}

/// Parses a published message (`brk1|id|generation|state|deadline|now|by|reason|streak`);
/// `None` for
/// anything else (a message that is not ours is ignored, never trusted).
pub fn parse_published(payload: &[u8]) -> Option<Published> {
    let s = std::str::from_utf8(payload).ok()?;
    if s.len() > 1024 {
        return None;
    }
    let mut it = s.split('|');
    if it.next()? != "brk1" {
        return None;
    }
    let id = BreakerId::parse(it.next()?)?;
    let num = |x: Option<&str>| -> Option<i64> {
        let v: i64 = x?.parse().ok()?;
        (0..=MAX_SAFE).contains(&v).then_some(v)
    };
    let generation = num(it.next())? as u64;
    let state = state_from_tag(num(it.next())?)?;
    let dl = num(it.next())? as u64;
    let now = num(it.next())? as u64;
    let by = it.next()?;
    let reason = Reason::from_code(num(it.next())?)?;
    let streak = num(it.next())?;
    if it.next().is_some() || streak > 255 || (state == State::Open) != (dl > 0) || now == 0 {
        return None;
    }
    let caused_by = if by.is_empty() {
        None
    } else {
        Some(ReplicaId::parse(by)?)
    };
    Some(Published {
        id,
        state: SharedState {
            generation,
            state,
            deadline_ms: (dl > 0).then_some(dl),
            streak: streak as u32,
            probe_successes: 0,
            caused_by,
            reason,
        },
        server_now_ms: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(fields: Vec<Value>) -> Value {
        Value::Array(vec![
            Value::BulkString(b"brk1".to_vec()),
            Value::Int(1_700_000_000_000),
            Value::Int(1),
            Value::Int(3),
            Value::Array(fields),
        ])
    }

    fn good() -> Vec<Value> {
        vec![
            Value::Int(0),
            Value::Int(4),
            Value::Int(1),
            Value::Int(1_700_000_030_000),
            Value::Int(1),
            Value::Int(0),
            Value::Int(0),
            Value::Int(0),
            Value::BulkString(b"r1".to_vec()),
            Value::Int(1),
            Value::BulkString(b"00ff".to_vec()),
            Value::Array(vec![]),
            Value::Int(0),
        ]
    }

    #[test]
    fn a_good_reply_parses() {
        let r = parse(Op::Flush, item(good()), 1).unwrap();
        assert_eq!(r.server_now_ms, 1_700_000_000_000);
        assert_eq!(r.items[0].state.state, State::Open);
        assert_eq!(r.items[0].state.deadline_ms, Some(1_700_000_030_000));
        assert_eq!(r.items[0].state.caused_by.as_ref().unwrap().as_str(), "r1");
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        let cases: Vec<(usize, Value, &str)> = vec![
            (2, Value::Int(9), "state"),
            (1, Value::Int(-1), "generation"),
            (1, Value::BulkString(b"4".to_vec()), "generation"),
            (3, Value::Int(0), "deadline 0"),
            (4, Value::Int(256), "open streak"),
            (8, Value::BulkString(b"a b".to_vec()), "caused by"),
            (9, Value::Int(6), "reason"),
            (11, Value::Int(0), "granted"),
            (0, Value::Nil, "code"),
        ];
        for (at, v, what) in cases {
            let mut f = good();
            f[at] = v;
            let e = parse(Op::Flush, item(f), 1).unwrap_err();
            assert!(
                matches!(&e, StoreError::Malformed { what: w, .. } if w.contains(what)),
                "field {at}: {e}"
            );
        }
        assert!(parse(Op::Flush, Value::Nil, 1).is_err());
        assert!(parse(Op::Flush, item(good()), 2).is_err(), "item count");
        let mut f = good();
        f.pop();
        assert!(parse(Op::Flush, item(f), 1).is_err(), "field count");
        let mut f = good();
        f[11] = Value::Array(vec![Value::BulkString(b"3:x:1:r1".to_vec())]);
        f[12] = Value::Int(5);
        assert!(
            parse(Op::Flush, item(f), 1).is_err(),
            "lease of another generation"
        );
    }

    #[test]
    fn published_messages_are_checked() {
        let p = parse_published(b"brk1|up#h%3A1|7|1|1700000030000|1700000000000|r-1|1|2").unwrap();
        assert_eq!(p.state.streak, 2);
        assert_eq!(p.id.as_str(), "up#h%3A1");
        assert_eq!(p.state.generation, 7);
        assert_eq!(p.state.reason, Reason::FailureRate);
        for bad in [
            &b"brk2|a|1|0|0|1|r|1|0"[..],
            b"brk1|a b|1|0|0|1|r|1|0",
            b"brk1|a|1|1|0|1|r|1|0",
            b"brk1|a|1|0|0|1|r|1|0|x",
            b"brk1|a|-1|0|0|1|r|1|0",
            b"brk1|a|1|7|0|1|r|1|0",
            b"brk1|a|1|0|0|1|r|1|256",
            b"brk1|a|1|0|0|1|r|1",
            b"\xff",
        ] {
            assert!(parse_published(bad).is_none(), "{bad:?}");
        }
    }
}
