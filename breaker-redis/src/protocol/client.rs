//! [`Protocol`]: the protocol client of one replica, which builds each op's keys and
//! arguments, sends it (function or `EVALSHA`, reloading a lost library) and checks its reply.

use super::parse::{check, is_lost_function, is_noscript, malformed, parse};
use super::*;

/// The protocol client of one replica in one namespace. Stateless apart from the script mode,
/// so one instance serves any number of connections.
pub(crate) struct Protocol {
    replica: ReplicaId,
    ns: NamespaceKeys,
    ns_ttl_ms: u64,
    live_ms: u64,
    mode: AtomicU8,
    script: redis::Script,
    redactor: Redactor,
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

/// One script call: its op, keys and arguments, and how many items it carries.
struct Call {
    op: Op,
    keys: Vec<String>,
    args: Vec<String>,
    items: usize,
}

impl Protocol {
    /// The protocol client of `replica` in `namespace`. `live` is how long a replica counts as
    /// live after its last flush (about three flush intervals); `ns_ttl` the expiry of the
    /// namespace-wide keys.
    pub(crate) fn new(
        namespace: &Namespace,
        replica: ReplicaId,
        live: std::time::Duration,
        ns_ttl: std::time::Duration,
    ) -> Self {
        Protocol {
            replica,
            ns: namespace.keys(),
            ns_ttl_ms: ms(ns_ttl).max(1),
            live_ms: ms(live).max(1),
            mode: AtomicU8::new(0),
            script: redis::Script::new(eval_script()),
            redactor: Redactor::default(),
        }
    }

    /// Uses `redactor` for every error message.
    pub(crate) fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// This replica's id.
    pub(crate) fn replica(&self) -> &ReplicaId {
        &self.replica
    }

    /// The namespace's keys and channel.
    pub(crate) fn namespace_keys(&self) -> &NamespaceKeys {
        &self.ns
    }

    /// The script mode found by [`load`](Self::load), `None` before.
    pub(crate) fn mode(&self) -> Option<ScriptMode> {
        match self.mode.load(Ordering::Acquire) {
            1 => Some(ScriptMode::Function),
            2 => Some(ScriptMode::Eval),
            _ => None,
        }
    }

    /// Forces the script mode (tests of the `EVALSHA` path on a server that has functions).
    pub(crate) fn set_mode(&self, mode: ScriptMode) {
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
    pub(crate) async fn load<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<ScriptMode, StoreError> {
        let r: redis::RedisResult<String> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(library())
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

    /// The server's clock (`TIME`), ms since the Unix epoch: the first estimate of the
    /// server's time, before any reply carries one.
    ///
    /// # Errors
    /// [`StoreError`] if the server cannot be reached or answers something else.
    pub(crate) async fn server_time<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<u64, StoreError> {
        let (s, us): (u64, u64) = redis::cmd("TIME")
            .query_async(conn)
            .await
            .map_err(|e| self.redactor.error("time", &e))?;
        Ok(s.saturating_mul(1000).saturating_add(us / 1000))
    }

    fn header(&self, n: usize, valid_until: u64) -> (Vec<String>, Vec<String>) {
        let keys = vec![self.ns.replicas.clone(), self.ns.version.clone()];
        let args = vec![
            self.replica.as_str().to_owned(),
            self.ns.channel.clone(),
            valid_until.min(MAX_SAFE).to_string(),
            self.live_ms.to_string(),
            self.ns_ttl_ms.to_string(),
            n.to_string(),
        ];
        (keys, args)
    }

    /// One call per chunk of [`MAX_ITEMS_PER_CALL`] items, each item's arguments from `args`.
    fn calls<T>(
        &self,
        op: Op,
        items: &[T],
        valid_until: u64,
        target: impl Fn(&T) -> &Target,
        args: impl Fn(&T) -> Vec<String>,
    ) -> Vec<Call> {
        items
            .chunks(MAX_ITEMS_PER_CALL)
            .map(|chunk| {
                let (mut keys, mut a) = self.header(chunk.len(), valid_until);
                for item in chunk {
                    let t = target(item);
                    keys.extend([
                        t.keys.state.clone(),
                        t.keys.window.clone(),
                        t.keys.leases.clone(),
                        t.keys.votes.clone(),
                    ]);
                    a.push(t.id.as_str().to_owned());
                    a.extend(args(item));
                }
                Call {
                    op,
                    keys,
                    args: a,
                    items: chunk.len(),
                }
            })
            .collect()
    }

    fn cmd(&self, c: &Call) -> redis::Cmd {
        if self.mode() == Some(ScriptMode::Eval) {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.get_hash())
                .arg(c.keys.len())
                .arg(&c.keys);
            cmd.arg(c.op.as_str()).arg(&c.args);
            cmd
        } else {
            let mut cmd = redis::cmd("FCALL");
            cmd.arg(c.op.function())
                .arg(c.keys.len())
                .arg(&c.keys)
                .arg(&c.args);
            cmd
        }
    }

    fn eval_cmd(c: &Call) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(eval_script()).arg(c.keys.len()).arg(&c.keys);
        cmd.arg(c.op.as_str()).arg(&c.args);
        cmd
    }

    /// Sends one call; reloads the library (or the script) once when the server lost it.
    async fn invoke<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        c: &Call,
    ) -> Result<Value, StoreError> {
        let op = c.op.as_str();
        match self.cmd(c).query_async(conn).await {
            Ok(v) => Ok(v),
            Err(e) if is_noscript(&e) => Self::eval_cmd(c)
                .query_async(conn)
                .await
                .map_err(|e| self.redactor.error(op, &e)),
            Err(e) if is_lost_function(&e) => {
                self.load(conn).await?;
                self.cmd(c)
                    .query_async(conn)
                    .await
                    .map_err(|e| self.redactor.error(op, &e))
            }
            Err(e) => Err(self.redactor.error(op, &e)),
        }
    }

    /// Sends `calls` in one round trip (a pipeline when more than one) and parses each reply.
    async fn send<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        calls: &[Call],
    ) -> Result<Vec<Reply>, StoreError> {
        let Some(first) = calls.first() else {
            return Err(StoreError::Config {
                message: "a store operation of no breakers".into(),
            });
        };
        let op = first.op;
        if self.mode().is_none() {
            self.load(conn).await?;
        }
        let values = if calls.len() == 1 {
            vec![self.invoke(conn, first).await?]
        } else {
            let mut pipe = redis::pipe();
            for c in calls {
                pipe.add_command(self.cmd(c));
            }
            let r: redis::RedisResult<Vec<Value>> = pipe.query_async(conn).await;
            match r {
                Ok(v) => v,
                // A lost library or script: reload, and send the calls one by one.
                Err(e) if is_noscript(&e) || is_lost_function(&e) => {
                    let mut out = Vec::with_capacity(calls.len());
                    for c in calls {
                        out.push(self.invoke(conn, c).await?);
                    }
                    out
                }
                Err(e) => return Err(self.redactor.error(op.as_str(), &e)),
            }
        };
        if values.len() != calls.len() {
            return Err(malformed(op, "pipeline answered the wrong number of calls"));
        }
        values
            .into_iter()
            .zip(calls)
            .map(|(v, c)| parse(c.op, v, c.items, &self.redactor))
            .collect()
    }

    /// Merges the replies of one round trip's calls into one.
    fn merge(replies: Vec<Reply>) -> Reply {
        let mut it = replies.into_iter();
        let mut merged = it.next().expect("at least one call");
        for r in it {
            merged.server_now_ms = merged.server_now_ms.max(r.server_now_ms);
            merged.live_replicas = merged.live_replicas.max(r.live_replicas);
            merged.version = merged.version.max(r.version);
            merged.epoch = r.epoch;
            merged.items.extend(r.items);
        }
        merged
    }

    /// The words of `targets` (nothing written but housekeeping).
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub(crate) async fn read<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        targets: &[&Target],
        valid_until: u64,
    ) -> Result<Reply, StoreError> {
        let calls = self.calls(Op::Read, targets, valid_until, |t| t, |_| Vec::new());
        Ok(Self::merge(self.send(conn, &calls).await?))
    }

    /// A flush, in one round trip: adds each of `adds`' counts to its window if the store
    /// still holds the word they were recorded under (answering the window's totals), and
    /// reads the words of `reads`. The reply's items are the adds', then the reads'.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub(crate) async fn flush<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        adds: &[AddItem<'_>],
        reads: &[&Target],
        valid_until: u64,
    ) -> Result<Reply, StoreError> {
        let mut calls = self.calls(
            Op::Add,
            adds,
            valid_until,
            |i| i.target,
            |i| {
                let p = &i.target.params;
                vec![
                    wire_word(i.expect),
                    u8::from(i.create).to_string(),
                    i.successes.min(MAX_SAFE).to_string(),
                    i.failures.min(MAX_SAFE).to_string(),
                    i.slow
                        .min(i.successes + i.failures)
                        .min(MAX_SAFE)
                        .to_string(),
                    p.window_ms.to_string(),
                    p.buckets.to_string(),
                    p.ttl_ms.to_string(),
                ]
            },
        );
        calls.extend(self.calls(Op::Read, reads, valid_until, |t| t, |_| Vec::new()));
        let reply = Self::merge(self.send(conn, &calls).await?);
        for (it, req) in reply.items.iter().zip(adds) {
            check::add(it, req)?;
        }
        Ok(reply)
    }

    /// Records this replica's vote for `expect`'s period of `target` (`create`: the breaker
    /// was never seen in the store, it is created as `expect` if missing); answers the
    /// distinct votes within the window.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub(crate) async fn vote<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        target: &Target,
        expect: Word,
        create: bool,
        valid_until: u64,
    ) -> Result<Reply, StoreError> {
        let p = &target.params;
        let args = vec![
            wire_word(expect),
            u8::from(create).to_string(),
            p.window_ms.to_string(),
            p.ttl_ms.to_string(),
        ];
        let calls = self.calls(Op::Vote, &[target], valid_until, |t| t, |_| args.clone());
        let reply = Self::merge(self.send(conn, &calls).await?);
        for it in &reply.items {
            check::vote(it, expect)?;
        }
        Ok(reply)
    }

    /// The fenced compare-and-set of each item.
    ///
    /// # Errors
    /// [`StoreError`] if the store fails or a reply breaks the protocol.
    pub(crate) async fn cas<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        items: &[CasItem<'_>],
        valid_until: u64,
    ) -> Result<Reply, StoreError> {
        let calls = self.calls(
            Op::Cas,
            items,
            valid_until,
            |i| i.target,
            |i| {
                let p = &i.target.params;
                vec![
                    i.expect.map(wire_word).unwrap_or_default(),
                    wire_word(i.next),
                    u8::from(i.is_transition()).to_string(),
                    u8::from(i.join).to_string(),
                    i.not_before.min(MAX_SAFE).to_string(),
                    i.cooldown_ms
                        .map(|c| c.min(MAX_SAFE).to_string())
                        .unwrap_or_default(),
                    i.want.min(MAX_LEASES_PER_GRANT).to_string(),
                    p.cap.to_string(),
                    p.lease_ms.max(1).to_string(),
                    i.release.as_deref().unwrap_or("").to_owned(),
                    reason_code(i.reason).to_string(),
                    p.fingerprint.to_string(),
                    p.ttl_ms.to_string(),
                ]
            },
        );
        let reply = Self::merge(self.send(conn, &calls).await?);
        let now = reply.server_now_ms;
        for (it, req) in reply.items.iter().zip(items) {
            check::cas(it, req, now)?;
        }
        Ok(reply)
    }
}
