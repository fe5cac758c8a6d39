//! [`Protocol`]: the protocol client of one replica, which builds each op's keys and
//! arguments, sends it (function or `EVALSHA`, reloading a lost library) and checks its reply.

use super::parse::{check_flush, is_lost_function, is_noscript, malformed, single};
use super::*;

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
