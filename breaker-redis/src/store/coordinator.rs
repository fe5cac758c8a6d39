//! The coordinator's loop: its wake-ups, its connection, registrations, the store's health,
//! and the operations it launches (each a future beside the loop; see the module docs of
//! [`store`](super)).

use super::*;
use crate::plan::Write;
use crate::protocol::{AddItem, CasItem, MAX_ITEMS_PER_ROUND_TRIP, MAX_SAFE};
use futures_util::StreamExt;

enum Event {
    Command(Command),
    Stopped,
    Wake,
    Push(redis::PushInfo),
    Connected(Result<Connected, StoreError>),
    Done(Done),
    Flush,
    Retry,
}

impl Coordinator {
    pub(super) async fn run(mut self) {
        loop {
            self.maybe_connect();
            let retry_at = self.wake_for_health();
            let event = {
                let connecting = &mut self.connecting;
                let ops = &mut self.ops;
                tokio::select! {
                    biased;
                    c = self.cmd_rx.recv() => match c {
                        Some(c) => Event::Command(c),
                        None => Event::Stopped,
                    },
                    Some(d) = ops.next(), if !ops.is_empty() => Event::Done(d),
                    _ = self.shared.wake.notified() => Event::Wake,
                    Some(p) = self.push_rx.recv() => Event::Push(p),
                    r = async {
                        match connecting.as_mut() {
                            Some(h) => h.await,
                            None => std::future::pending().await,
                        }
                    } => Event::Connected(r.unwrap_or_else(|_| Err(StoreError::Closed))),
                    _ = tokio::time::sleep_until(self.next_flush) => Event::Flush,
                    _ = async {
                        match retry_at {
                            Some(t) => tokio::time::sleep_until(t).await,
                            None => std::future::pending().await,
                        }
                    } => Event::Retry,
                }
            };
            match event {
                Event::Stopped => return,
                Event::Command(c) => self.command(c),
                Event::Done(d) => self.done(d),
                Event::Wake => self.urgent(),
                Event::Push(p) => self.push(p),
                Event::Connected(r) => {
                    self.connecting = None;
                    match r {
                        Ok(c) => {
                            self.connected(c);
                            self.record_success(true);
                        }
                        Err(e) => self.record_failure(&e),
                    }
                }
                Event::Flush => {
                    self.early_used = false;
                    self.schedule_flush();
                    self.flush(Vec::new(), false);
                }
                Event::Retry => self.grace_check(),
            }
            self.answer_syncs();
        }
    }

    /// Takes a made connection: the server's clock read on it is the first estimate.
    pub(super) fn connected(&mut self, c: Connected) {
        self.conn = Some(c.conn);
        self.observe_clock(c.server_ms, c.local_nanos);
    }

    /// The next time the loop must wake for the store's health: a retry of the store's breaker
    /// (to connect) or the end of the `closed(grace)` grace.
    pub(super) fn wake_for_health(&self) -> Option<Instant> {
        let mut at = None;
        if self.conn.is_none() && self.connecting.is_none() {
            at = self.health.retry_at();
        }
        if let (OnStoreError::Closed { grace }, Some(since)) =
            (self.cfg.on_error, self.health.degraded_since())
        {
            if self.status != StoreStatus::DegradedRejectAll {
                let g = since + grace;
                at = Some(at.map_or(g, |a: Instant| a.min(g)));
            }
        }
        at
    }

    pub(super) fn grace_check(&mut self) {
        if let (OnStoreError::Closed { grace }, Some(since)) =
            (self.cfg.on_error, self.health.degraded_since())
        {
            if Instant::now() >= since + grace {
                self.set_status(StoreStatus::DegradedRejectAll);
            }
        }
    }

    pub(super) fn maybe_connect(&mut self) {
        if self.conn.is_none() && self.connecting.is_none() && self.health.allows(Instant::now()) {
            let fut = connect(
                self.cfg.clone(),
                Arc::clone(&self.proto),
                self.push_tx.clone(),
            );
            self.connecting = Some(tokio::spawn(fut));
        }
    }

    pub(super) fn schedule_flush(&mut self) {
        use rand::Rng;
        let j = self.cfg.flush_jitter;
        let f = if j > 0.0 {
            self.rng.gen_range(1.0 - j..=1.0 + j)
        } else {
            1.0
        };
        self.next_flush = Instant::now() + self.cfg.flush_interval.mul_f64(f);
    }

    /// The connection, if the store's breaker allows an operation now.
    pub(super) fn ready(&self) -> Option<ConnectionManager> {
        if self.health.allows(Instant::now()) {
            self.conn.clone()
        } else {
            None
        }
    }

    pub(super) fn drain_registrations(&mut self) {
        while let Ok(r) = self.reg_rx.try_recv() {
            self.unread.insert(r.idx);
            self.by_id.insert(r.target.id.clone(), r.idx);
            self.entries.insert(
                r.idx,
                Entry {
                    target: r.target,
                    breaker: Arc::downgrade(&r.breaker),
                    link: r.link,
                    view: View::INITIAL,
                    carry: Deltas::default(),
                    mismatch: false,
                    nonce: None,
                    acquiring: 0,
                },
            );
        }
    }

    pub(super) fn unregister(&mut self, idx: u32) {
        self.watched.remove(&idx);
        self.unread.remove(&idx);
        if let Some(e) = self.entries.remove(&idx) {
            // Only this registration's: a newer one of the same id may have replaced it.
            if self.by_id.get(&e.target.id) == Some(&idx) {
                self.by_id.remove(&e.target.id);
            }
            let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
            if ids.get(&e.target.id).is_some_and(|(i, _)| *i == idx) {
                ids.remove(&e.target.id);
            }
        }
    }

    pub(super) fn set_status(&mut self, s: StoreStatus) {
        if s == self.status {
            return;
        }
        self.status = s;
        let _ = self.status_tx.send(s);
        let breakers: Vec<_> = self
            .entries
            .values()
            .filter_map(|e| e.breaker.upgrade())
            .collect();
        for b in breakers {
            b.store_status(s);
        }
    }

    /// An operation was answered. After a degraded period, every breaker is reconciled once
    /// (`reconcile`: unless the answer that ended it was that reconciliation's read).
    pub(super) fn record_success(&mut self, reconcile: bool) {
        let change = self.health.success(Instant::now());
        if let Change::Recovered { .. } = change {
            health::report(
                &self.stats,
                &self.ns,
                self.proto.replica().as_str(),
                &change,
                None,
            );
            self.set_status(StoreStatus::Healthy);
            if reconcile {
                self.reconcile_all();
            }
        }
    }

    pub(super) fn record_failure(&mut self, e: &StoreError) {
        if matches!(e, StoreError::Auth { .. }) {
            // The client keeps a refused reconnection's error and never retries it.
            self.conn = None;
        }
        add(&self.stats.errors, 1);
        health::metrics_count(&self.ns, "breaker_store_errors_total", 1);
        if !e.is_health_failure() {
            return;
        }
        let change = self.health.failure(Instant::now());
        if change == Change::Degraded {
            health::report(
                &self.stats,
                &self.ns,
                self.proto.replica().as_str(),
                &change,
                Some(e),
            );
            self.set_status(degraded_status(self.cfg.on_error));
            self.grace_check();
        }
    }

    /// A reply's server time, received at local time `local_nanos`: the newer estimate of the
    /// store's clock is kept.
    pub(super) fn observe_clock(&mut self, server_ms: u64, local_nanos: u64) {
        let c = ServerClock {
            server_ms,
            local_nanos,
        };
        match self.server {
            Some(old) if old.estimate(local_nanos) >= server_ms => {}
            _ => self.server = Some(c),
        }
    }

    /// The `valid_until` of an operation sent now: the estimate of the store's clock plus the
    /// operation timeout (no bound before any estimate, which a connection always makes).
    pub(super) fn valid_until(&self) -> u64 {
        match self.server {
            Some(c) => c
                .estimate(self.cfg.clock.now_nanos())
                .saturating_add(u64::try_from(self.cfg.op_timeout.as_millis()).unwrap_or(0)),
            None => MAX_SAFE,
        }
    }

    /// Launches an operation: `run` gets the protocol, a connection and `valid_until`, and
    /// returns its replies, the error that stopped it (if any), its calls and round trips.
    fn launch<F>(&mut self, what: What, urgent: bool, conn: ConnectionManager, run: F)
    where
        F: FnOnce(Arc<Protocol>, ConnectionManager, u64) -> OpFuture + Send + 'static,
    {
        if urgent {
            self.urgent_in_flight += 1;
        }
        let fut = run(Arc::clone(&self.proto), conn, self.valid_until());
        let sent = Instant::now();
        self.ops.push(Box::pin(async move {
            let (result, calls, round_trips) = fut.await;
            Done {
                what,
                urgent,
                result,
                sent,
                calls,
                round_trips,
            }
        }));
    }

    /// Sends a flush: the counts of `adds` (each with the word they were recorded under, and
    /// whether the breaker was never written) and a read of `reads`, in round trips of at most
    /// [`MAX_ITEMS_PER_ROUND_TRIP`] breakers, one after another, each under the timeout.
    pub(super) fn launch_flush(
        &mut self,
        conn: ConnectionManager,
        adds: Vec<(u32, Deltas, breaker_core::breaker::decide::Word, bool)>,
        reads: Vec<u32>,
        waiters: Vec<oneshot::Sender<Result<usize, StoreError>>>,
        after_fault: bool,
        urgent: bool,
    ) {
        self.flushing = true;
        let add_jobs: Vec<_> = adds
            .iter()
            .map(|(idx, d, w, create)| (Arc::clone(&self.entries[idx].target), *d, *w, *create))
            .collect();
        let read_jobs: Vec<_> = reads
            .iter()
            .map(|idx| Arc::clone(&self.entries[idx].target))
            .collect();
        // Round trips: the adds first, then the reads, at most MAX_ITEMS_PER_ROUND_TRIP each.
        let mut rounds = Vec::new();
        let (mut a, mut r) = (add_jobs.len(), read_jobs.len());
        while a + r > 0 {
            let na = a.min(MAX_ITEMS_PER_ROUND_TRIP);
            let nr = r.min(MAX_ITEMS_PER_ROUND_TRIP - na);
            rounds.push((na, nr));
            a -= na;
            r -= nr;
        }
        let timeout = self.cfg.op_timeout;
        let plan = rounds.clone();
        let what = What::Flush {
            adds: adds.iter().map(|(i, d, _, _)| (*i, *d)).collect(),
            reads,
            rounds,
            waiters,
            after_fault,
        };
        self.launch(what, urgent, conn, move |proto, mut conn, vu| {
            Box::pin(async move {
                let mut replies = Vec::new();
                let (mut ai, mut ri) = (0, 0);
                let (mut calls, mut trips) = (0, 0);
                for (na, nr) in plan {
                    let items: Vec<AddItem<'_>> = add_jobs[ai..ai + na]
                        .iter()
                        .map(|(t, d, w, create)| AddItem {
                            target: t,
                            expect: *w,
                            create: *create,
                            successes: d.successes,
                            failures: d.failures,
                            slow: d.slow,
                        })
                        .collect();
                    let targets: Vec<&Target> =
                        read_jobs[ri..ri + nr].iter().map(|t| &**t).collect();
                    calls += (na.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL)
                        + nr.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL))
                        as u64;
                    trips += 1;
                    let r = timed(
                        timeout,
                        "flush",
                        proto.flush(&mut conn, &items, &targets, vu),
                    )
                    .await;
                    match r {
                        Ok(reply) => replies.push(reply),
                        Err(e) => return ((replies, Some(e)), calls, trips),
                    }
                    ai += na;
                    ri += nr;
                }
                ((replies, None), calls, trips)
            })
        });
    }

    /// Reads the words of `idxs` (round trips of at most [`MAX_ITEMS_PER_ROUND_TRIP`]).
    pub(super) fn launch_read(
        &mut self,
        conn: ConnectionManager,
        idxs: Vec<u32>,
        after_fault: bool,
        urgent: bool,
    ) {
        let targets: Vec<_> = idxs
            .iter()
            .map(|idx| Arc::clone(&self.entries[idx].target))
            .collect();
        let timeout = self.cfg.op_timeout;
        self.launch(
            What::Read { idxs, after_fault },
            urgent,
            conn,
            move |proto, mut conn, vu| {
                Box::pin(async move {
                    let mut replies = Vec::new();
                    let (mut calls, mut trips) = (0, 0);
                    for chunk in targets.chunks(MAX_ITEMS_PER_ROUND_TRIP) {
                        let refs: Vec<&Target> = chunk.iter().map(|t| &**t).collect();
                        calls += refs.len().div_ceil(crate::protocol::MAX_ITEMS_PER_CALL) as u64;
                        trips += 1;
                        match timed(timeout, "read", proto.read(&mut conn, &refs, vu)).await {
                            Ok(reply) => replies.push(reply),
                            Err(e) => return ((replies, Some(e)), calls, trips),
                        }
                    }
                    ((replies, None), calls, trips)
                })
            },
        );
    }

    /// Sends the compare-and-sets of `jobs` in one call (one round trip). A manual change's
    /// errors name the operation the caller asked for (`force`).
    pub(super) fn launch_cas(&mut self, conn: ConnectionManager, jobs: Vec<CasJob>) {
        if jobs.is_empty() {
            return;
        }
        let op = if jobs.iter().any(|j| matches!(j.kind, CasKind::Force { .. })) {
            "force"
        } else {
            "cas"
        };
        let mut jobs = jobs;
        for j in &mut jobs {
            j.nonce = self.nonce_for(j);
        }
        let items: Vec<CasArgs> = jobs
            .iter()
            .map(|j| {
                (
                    Arc::clone(&j.target),
                    j.write,
                    j.not_before,
                    j.join,
                    j.want,
                    j.release.clone(),
                    j.nonce,
                )
            })
            .collect();
        let timeout = self.cfg.op_timeout;
        let n = items.len();
        self.launch(What::Cas(jobs), true, conn, move |proto, mut conn, vu| {
            Box::pin(async move {
                let cas: Vec<CasItem<'_>> = items
                    .iter()
                    .map(|(t, w, not_before, join, want, release, nonce)| CasItem {
                        target: t,
                        expect: w.expect,
                        next: w.next,
                        reason: w.reason,
                        join: *join,
                        not_before: *not_before,
                        cooldown_ms: w.cooldown_ms,
                        want: *want,
                        release: release.clone(),
                        nonce: *nonce,
                    })
                    .collect();
                let calls = n.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL) as u64;
                let r = timed(timeout, op, proto.cas(&mut conn, &cas, vu)).await;
                match r {
                    Ok(reply) => ((vec![reply], None), calls, 1),
                    Err(e) => ((Vec::new(), Some(named(e, op))), calls, 1),
                }
            })
        });
    }

    /// The lease request nonce job `j` carries: a lease request carries its breaker's pending
    /// nonce (one whose request got no answer: its leases, if it was granted, come back), or a
    /// fresh one that stays pending until an answer; any other compare-and-set of the breaker
    /// carries the pending nonce to release its leases (the replica no longer wants them), but
    /// only while no lease request carrying it is in flight: the store would run the release
    /// after the request and take back the lease it has just granted, which the replica then
    /// probes under uncounted (model finding F6; a request batched before it in the same call,
    /// as `urgent` sends them, is in flight too).
    fn nonce_for(&mut self, j: &CasJob) -> Option<u64> {
        let e = self.entries.get_mut(&j.idx?)?;
        match j.kind {
            CasKind::Acquire => {
                e.acquiring += 1;
                let fresh = &mut self.next_nonce;
                Some(*e.nonce.get_or_insert_with(|| {
                    *fresh = (*fresh + 1) % crate::protocol::MAX_SAFE;
                    *fresh
                }))
            }
            _ if j.want == 0 && e.acquiring == 0 => e.nonce,
            _ => None,
        }
    }

    /// Sends a quorum vote of `idx` for its word `expect`.
    pub(super) fn launch_vote(
        &mut self,
        conn: ConnectionManager,
        idx: u32,
        expect: breaker_core::breaker::decide::Word,
    ) {
        let target = Arc::clone(&self.entries[&idx].target);
        let create = !self.entries[&idx].view.known;
        let timeout = self.cfg.op_timeout;
        self.launch(
            What::Vote { idx, expect },
            true,
            conn,
            move |proto, mut conn, vu| {
                Box::pin(async move {
                    let r = timed(
                        timeout,
                        "vote",
                        proto.vote(&mut conn, &target, expect, create, vu),
                    )
                    .await;
                    match r {
                        Ok(reply) => ((vec![reply], None), 1, 1),
                        Err(e) => ((Vec::new(), Some(e)), 1, 1),
                    }
                })
            },
        );
    }

    /// Reads every registered breaker and reconciles it (a fault ended, or the namespace's
    /// epoch changed).
    pub(super) fn reconcile_all(&mut self) {
        self.drain_registrations();
        let Some(conn) = self.ready() else {
            return;
        };
        let mut idxs: Vec<u32> = self.entries.keys().copied().collect();
        if idxs.is_empty() {
            return;
        }
        idxs.sort_unstable();
        self.launch_read(conn, idxs, true, false);
    }

    /// Answers the `sync` callers once no urgent operation and no first read is in flight:
    /// the first urgent error since they asked, else an error if a breaker they waited for is
    /// still unread, else `Ok`.
    pub(super) fn answer_syncs(&mut self) {
        // A first read in flight is waited for too: it may be the one a caller's registration
        // asked for, sent again after a failure.
        if self.urgent_in_flight == 0 && !self.reading_unread {
            // An error no caller waited for is not a later caller's.
            let failed = self.sync_error.take();
            for (tx, unread) in std::mem::take(&mut self.syncs) {
                let still = unread.iter().any(|i| self.unread.contains(i));
                let r = match (&failed, still) {
                    (Some(e), _) => Err(e.clone()),
                    (None, true) => Err(self
                        .unread_error
                        .clone()
                        .unwrap_or(StoreError::Degraded { op: "read" })),
                    (None, false) => Ok(()),
                };
                let _ = tx.send(r);
            }
        }
    }

    /// Sends a read of the breakers whose fleet state is not known yet ([`Coordinator`]'s
    /// `unread`), unless one is in flight: `urgent` for the read a registration or a `sync`
    /// asks for. Without a connection the store allows, nothing is sent, and that is the
    /// waiting `sync` callers' error.
    pub(super) fn read_unread(&mut self, urgent: bool) {
        self.unread.retain(|i| self.entries.contains_key(i));
        if self.reading_unread || self.unread.is_empty() {
            return;
        }
        let Some(conn) = self.ready() else {
            // The reason now: an earlier read's timeout is not why this one was not sent.
            self.unread_error = Some(StoreError::Degraded { op: "read" });
            return;
        };
        let mut idxs: Vec<u32> = self.unread.iter().copied().collect();
        idxs.sort_unstable();
        self.reading_unread = true;
        self.launch_read(conn, idxs, false, urgent);
    }

    pub(super) fn rtt(&self, d: Duration) {
        self.stats.rtt(&self.ns, d);
    }
}

/// The future of an operation: its replies and the error that stopped it, its calls and
/// round trips.
pub(super) type OpFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = ((Vec<Reply>, Option<StoreError>), u64, u64)> + Send>,
>;

/// What a compare-and-set's future needs of its job: the target, the write, `not_before`,
/// `join`, the leases wanted, the lease to release and the lease request nonce.
type CasArgs = (
    Arc<Target>,
    Write,
    u64,
    bool,
    u32,
    Option<Arc<str>>,
    Option<u64>,
);

/// `e` as an error of operation `op` (the protocol names its primitive; the caller asked for
/// `op`).
fn named(e: StoreError, op: &'static str) -> StoreError {
    match e {
        StoreError::Timeout { after, .. } => StoreError::Timeout { op, after },
        StoreError::Unavailable { message, .. } => StoreError::Unavailable { op, message },
        StoreError::Server { message, .. } => StoreError::Server { op, message },
        StoreError::Malformed { what, .. } => StoreError::Malformed { op, what },
        StoreError::Degraded { .. } => StoreError::Degraded { op },
        StoreError::Auth { message, .. } => StoreError::Auth { op, message },
        e @ (StoreError::Config { .. } | StoreError::Closed) => e,
    }
}

/// `fut` under the operation timeout.
async fn timed<T>(
    timeout: Duration,
    op: &'static str,
    fut: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, fut).await {
        // The client's own timeout (the same bound) says no duration.
        Ok(Err(StoreError::Timeout { op, after })) if after.is_zero() => {
            Err(StoreError::Timeout { op, after: timeout })
        }
        Ok(r) => r,
        Err(_) => Err(StoreError::Timeout { op, after: timeout }),
    }
}
