//! What the coordinator does: flushes, urgent operations (trips, probe leases, probe ends),
//! the handle's commands and published transitions, and with every answer, the breaker's view
//! reconciled with the store's word (`plan.rs`).

use super::*;
use crate::link::{ProbeGrant, Update, Urgent};
use crate::plan::{self, Reconcile};
use crate::protocol::{Code, Extra, ItemReply, Stored};
use breaker_core::breaker::decide::{self, Word};
use breaker_core::breaker::WindowCounts;

/// Whether an item's answer tells the store's word (`expired` and `bad` items carry none: an
/// expired one is not a missing breaker).
fn tells(code: Code) -> bool {
    !matches!(code, Code::Expired | Code::Bad)
}

/// Whether every item of `reply` answers `expired` (the call ran after its `valid_until`).
fn all_expired(reply: &Reply) -> bool {
    !reply.items.is_empty() && reply.items.iter().all(|it| it.code == Code::Expired)
}

/// How many times a compare-and-set that lost to another replica's is decided again on the
/// word that won.
const MAX_TRIES: u8 = 3;

impl Coordinator {
    /// The cooldown of an opening of streak `streak` of a breaker of `policy`, ms: the core's
    /// one formula, with this replica's jitter draw.
    fn cooldown_ms(&mut self, policy: &BreakerPolicy) -> impl Fn(u32) -> u64 + '_ {
        use rand::Rng;
        let draw: f64 = self.rng.gen();
        let policy = policy.clone();
        move |streak| {
            u64::try_from(decide::cooldown(&policy, streak, draw).as_millis()).unwrap_or(u64::MAX)
        }
    }

    /// Folds the store's answer for breaker `idx` (`stored`: its word, `None` when it holds
    /// none) into its view, and does what [`plan::reconcile`] decides. `server_now`: the
    /// reply's server time; `recv`: the local time it arrived.
    pub(super) fn absorb(
        &mut self,
        idx: u32,
        stored: Option<&Stored>,
        server_now: u64,
        recv: u64,
        after_fault: bool,
    ) {
        let Some(e) = self.entries.get_mut(&idx) else {
            return;
        };
        let Some(breaker) = e.breaker.upgrade() else {
            return;
        };
        // An answer older than the view (a reply handled after a newer push) tells nothing,
        // its policy neither: only the newest word says who made the fleet's last transition.
        if let Some(s) =
            stored.filter(|s| !decide::newer(e.view.word.generation, s.word.generation))
        {
            let theirs = &s.fingerprint;
            // A word with no fingerprint (none has made a transition yet) tells nothing of the
            // policies: it neither reports a mismatch nor ends one, so a mismatch answered
            // again after it is not reported twice.
            if !theirs.is_empty() {
                let differs = **theirs != *e.target.params.fingerprint;
                if differs && !e.mismatch {
                    let m = crate::link::PolicyMismatch {
                        id: e.target.id.clone(),
                        ours: e.target.params.fingerprint.to_string(),
                        theirs: theirs.clone(),
                    };
                    breaker.policy_mismatch(&m);
                }
                e.mismatch = differs;
            }
        }
        let local = breaker.local_now();
        let passed = stored.is_some_and(|s| s.deadline_ms <= server_now);
        let decision = plan::reconcile(
            stored.map(|s| &s.word),
            server_now,
            passed,
            &e.view,
            &local,
            after_fault,
        );
        let update = |s: &Stored| Update {
            word: s.word,
            deadline: (s.word.state == State::Open).then(|| {
                let left = s.deadline_ms.saturating_sub(server_now);
                recv.saturating_add(left.saturating_mul(1_000_000))
            }),
            by: s.by.clone(),
            reason: s.reason,
        };
        match decision {
            Reconcile::Adopt | Reconcile::Keep => {
                let Some(s) = stored else {
                    return;
                };
                e.view = View {
                    word: s.word,
                    deadline_ms: s.deadline_ms,
                    known: true,
                    seen_ms: e.view.seen_ms.max(server_now),
                };
                let watched = s.word.state != State::Closed;
                let apply = decision == Reconcile::Adopt;
                breaker.adopt(&update(s), apply);
                if apply {
                    add(&self.stats.applied, 1);
                }
                self.set_watched(idx, watched);
            }
            Reconcile::Write(write) => {
                if stored.is_none() || e.view.known {
                    add(&self.stats.repairs, 1);
                }
                let job =
                    CasJob::write(Some(idx), Arc::clone(&e.target), write, CasKind::Reconcile);
                if let Some(conn) = self.ready() {
                    self.launch_cas(conn, vec![job]);
                }
            }
            Reconcile::Trip => {
                if let Some(s) = stored {
                    e.view = View {
                        word: s.word,
                        deadline_ms: s.deadline_ms,
                        known: true,
                        seen_ms: e.view.seen_ms.max(server_now),
                    };
                }
                self.trip(idx, local.trip_reason);
            }
            Reconcile::Ignore => {}
        }
    }

    /// Keeps [`Coordinator::watched`] in step with entry `idx`'s view.
    fn set_watched(&mut self, idx: u32, watched: bool) {
        if watched {
            self.watched.insert(idx);
        } else {
            self.watched.remove(&idx);
        }
    }

    /// Visits a bounded batch of registered breakers (at least 256, and at least a 64th of
    /// them, so a full sweep takes at most 64 flushes) and lets those that nothing uses go;
    /// their links then unregister them.
    fn sweep_unused(&mut self) {
        if self.sweep.is_empty() {
            self.sweep.extend(self.entries.keys().copied());
        }
        let n = self.sweep.len().min(256.max(self.entries.len() / 64));
        let batch: Vec<u32> = self.sweep.drain(self.sweep.len() - n..).collect();
        for idx in batch {
            if let Some(b) = self.entries.get(&idx).and_then(|e| e.breaker.upgrade()) {
                b.release_if_unused();
            }
        }
    }

    /// The counts of `idxs` taken and dropped (the store is degraded: stale counts are worse
    /// than lost ones); whether any was counted.
    fn drop_counts(&mut self, idxs: &[u32]) -> bool {
        let mut counted = false;
        let mut gone = Vec::new();
        for idx in idxs {
            let Some(e) = self.entries.get_mut(idx) else {
                continue;
            };
            e.link.active.store(false, Ordering::Release);
            e.carry = Deltas::default();
            match e.breaker.upgrade() {
                Some(breaker) => counted |= !breaker.take_deltas().is_empty(),
                None => gone.push(*idx),
            }
        }
        for idx in gone {
            self.unregister(idx);
        }
        if counted {
            add(&self.stats.dropped_flushes, 1);
            health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
        }
        counted
    }

    /// A flush: the counts of the breakers active since the last one, and a read of those not
    /// closed and of those registered since. While the store is degraded it is the store's
    /// health probe: every breaker is read (its answer reconciles them all) and the counts are
    /// dropped.
    pub(super) fn flush(
        &mut self,
        waiters: Vec<oneshot::Sender<Result<usize, StoreError>>>,
        urgent: bool,
    ) {
        if self.flushing {
            self.flush_again.extend(waiters);
            return;
        }
        self.drain_registrations();
        self.sweep_unused();
        let mut idxs =
            std::mem::take(&mut *self.shared.active.lock().unwrap_or_else(|e| e.into_inner()));
        let degraded = self.status != StoreStatus::Healthy;
        let Some(conn) = self.ready() else {
            self.drop_counts(&idxs);
            let r = if self.entries.is_empty() {
                Ok(0)
            } else {
                Err(StoreError::Degraded { op: "flush" })
            };
            for tx in waiters {
                let _ = tx.send(r.clone());
            }
            return;
        };
        if degraded {
            self.drop_counts(&idxs);
            let mut all: Vec<u32> = self.entries.keys().copied().collect();
            if all.is_empty() {
                for tx in waiters {
                    let _ = tx.send(Ok(0));
                }
                return;
            }
            all.sort_unstable();
            self.launch_flush(conn, Vec::new(), all, waiters, true, urgent);
            return;
        }
        for (idx, reason) in std::mem::take(&mut self.unsent_trips) {
            self.trip(idx, reason);
        }
        if std::mem::take(&mut self.reconcile_again) {
            self.reconcile_all();
        }
        idxs.extend(self.unread.iter().copied());
        idxs.extend(self.watched.iter().copied());
        idxs.extend(
            self.entries
                .iter()
                .filter(|(_, e)| !e.carry.is_empty())
                .map(|(i, _)| *i),
        );
        idxs.sort_unstable();
        idxs.dedup();
        let mut adds = Vec::new();
        let mut reads = Vec::new();
        let mut gone = Vec::new();
        let mut dropped = false;
        for idx in idxs {
            let Some(e) = self.entries.get_mut(&idx) else {
                continue;
            };
            e.link.active.store(false, Ordering::Release);
            let Some(breaker) = e.breaker.upgrade() else {
                gone.push(idx);
                continue;
            };
            let taken = breaker.take_deltas();
            let carry = std::mem::take(&mut e.carry);
            let d = Deltas {
                successes: taken.successes + carry.successes,
                failures: taken.failures + carry.failures,
                slow: taken.slow + carry.slow,
            };
            let closed = e.view.word.state == State::Closed;
            if !d.is_empty() && closed {
                adds.push((idx, d, e.view.word, !e.view.known));
            } else {
                // Counts of a closed period that has ended are the store's to drop.
                dropped |= !d.is_empty();
                if !closed || self.unread.contains(&idx) {
                    reads.push(idx);
                }
            }
        }
        for idx in gone {
            self.unregister(idx);
        }
        let _ = dropped;
        if adds.is_empty() && reads.is_empty() {
            for tx in waiters {
                let _ = tx.send(Ok(0));
            }
            return;
        }
        self.launch_flush(conn, adds, reads, waiters, false, urgent);
    }

    /// A local trip of `idx` for `reason`, decided on its view: a compare-and-set of the
    /// core's trip, or under quorum a vote.
    pub(super) fn trip(&mut self, idx: u32, reason: TransitionReason) {
        let Some(e) = self.entries.get(&idx) else {
            return;
        };
        let Some(breaker) = e.breaker.upgrade() else {
            return;
        };
        let view = e.view;
        let target = Arc::clone(&e.target);
        let Some(conn) = self.ready() else {
            if self.status == StoreStatus::Healthy {
                self.keep_unsent(idx, reason);
            }
            return;
        };
        if target.params.quorum > 1 {
            if view.word.state == State::Closed {
                self.launch_vote(conn, idx, view.word);
            }
            return;
        }
        let policy = breaker.policy();
        let cooldown = self.cooldown_ms(&policy);
        let Some(mut write) = plan::plan_trip(view.word, reason, cooldown) else {
            return; // the fleet's closed period has ended already: a late trip
        };
        write.expect = view.expect();
        self.launch_cas(
            conn,
            vec![CasJob::write(Some(idx), target, write, CasKind::Trip)],
        );
    }

    /// Keeps a trip the store never received, to send with the next flush (the latest per
    /// breaker).
    fn keep_unsent(&mut self, idx: u32, reason: TransitionReason) {
        self.unsent_trips.retain(|(i, _)| *i != idx);
        self.unsent_trips.push((idx, reason));
    }

    /// The lease request of `idx` for `want` leases, decided on its view; `None` when the
    /// fleet has no probe to lease (closed, forced).
    fn acquire_job(&self, idx: u32, want: u32, tries: u8) -> Option<CasJob> {
        let e = self.entries.get(&idx)?;
        let ask = plan::plan_acquire(&e.view, want)?;
        Some(CasJob {
            idx: Some(idx),
            target: Arc::clone(&e.target),
            write: ask.write,
            not_before: ask.not_before,
            join: ask.join,
            want: ask.want,
            release: None,
            nonce: None,
            kind: CasKind::Acquire,
            tries,
        })
    }

    /// The end of a leased probe of `idx`, decided on `w` (its view, or the word that won
    /// over it); `None` when the probe belongs to an earlier period (or a lost store's).
    fn end_job(
        &mut self,
        idx: u32,
        w: Option<Word>,
        lease: crate::protocol::Lease,
        end: decide::ProbeEnd,
        tries: u8,
    ) -> Option<CasJob> {
        let e = self.entries.get(&idx)?;
        let breaker = e.breaker.upgrade()?;
        if self.epoch.as_deref() != Some(&*lease.epoch) {
            return None;
        }
        let target = Arc::clone(&e.target);
        let known = e.view.known;
        let w = w.unwrap_or(e.view.word);
        let policy = breaker.policy();
        let cooldown = self.cooldown_ms(&policy);
        let mut write = plan::plan_end(w, lease.generation, end, &policy, cooldown)?;
        write.expect = known.then_some(w);
        Some(CasJob {
            release: Some(Arc::clone(&lease.member)),
            tries,
            ..CasJob::write(Some(idx), target, write, CasKind::End { lease, end })
        })
    }

    pub(super) fn urgent(&mut self) {
        let ops =
            std::mem::take(&mut *self.shared.urgent.lock().unwrap_or_else(|e| e.into_inner()));
        self.drain_registrations();
        let mut trips = Vec::new();
        let mut acquires: Vec<(u32, u32)> = Vec::new();
        let mut ends = Vec::new();
        let mut flush_soon = false;
        for op in ops {
            match op {
                Urgent::Unregister { idx } => self.unregister(idx),
                Urgent::FlushSoon => flush_soon = true,
                Urgent::Trip { idx, reason } => trips.push((idx, reason)),
                Urgent::Acquire { idx, want } => match acquires.iter_mut().find(|(i, _)| *i == idx)
                {
                    Some((_, w)) => *w = (*w).max(want),
                    None => acquires.push((idx, want)),
                },
                Urgent::End { idx, lease, end } => ends.push((idx, lease, end)),
            }
        }
        if flush_soon && !self.early_used && self.flushing {
            // After the flush in flight (it may not carry the failures that crossed the bound).
            self.early_pending = true;
        } else if flush_soon && !self.early_used {
            self.early_flush();
        } else {
            self.read_unread(true);
        }
        for (idx, reason) in trips {
            self.trip(idx, reason);
        }
        let Some(conn) = self.ready() else {
            for (idx, _) in acquires {
                self.grant(idx, ProbeGrant::StoreUnavailable);
            }
            return;
        };
        let mut jobs = Vec::new();
        for (idx, want) in acquires {
            match self.acquire_job(idx, want, 0) {
                Some(job) => jobs.push(job),
                None => self.grant(idx, ProbeGrant::Denied { retry_ms: 0 }),
            }
        }
        for (idx, lease, end) in ends {
            if let Some(job) = self.end_job(idx, None, lease, end, 0) {
                jobs.push(job);
            }
        }
        self.launch_cas(conn, jobs);
    }

    /// The early flush: pending failures crossed a breaker's bound. It replaces the next
    /// regular one (at most one per interval), and is urgent: `sync` waits for it, as for the
    /// trips it leads to.
    fn early_flush(&mut self) {
        self.early_used = true;
        self.early_pending = false;
        self.schedule_flush();
        self.flush(Vec::new(), true);
    }

    fn grant(&self, idx: u32, grant: ProbeGrant) {
        if let Some(b) = self.entries.get(&idx).and_then(|e| e.breaker.upgrade()) {
            b.grant_probes(grant);
        }
    }

    /// A finished operation: its answers folded in, its follow-ups launched, the store's health
    /// updated.
    pub(super) fn done(&mut self, d: Done) {
        if d.urgent {
            self.urgent_in_flight = self.urgent_in_flight.saturating_sub(1);
        }
        add(&self.stats.operations, d.calls);
        add(&self.stats.round_trips, d.round_trips);
        let recv = self.cfg.clock.now_nanos();
        let (mut replies, mut error) = d.result;
        if !replies.is_empty() {
            self.rtt(d.sent.elapsed());
        }
        for r in &replies {
            self.observe_clock(r.server_now_ms, recv);
        }
        // A call whose every item answers `expired` ran after its `valid_until`: the store was
        // slower than the timeout, and the call is a failed operation as its timeout would
        // have been (the rest of the operation is not taken either). Taken as a success, the
        // write it did not make was forgotten and nothing reconciled (model finding F3).
        if let Some(k) = replies.iter().position(all_expired) {
            replies.truncate(k);
            error.get_or_insert(StoreError::Timeout {
                op: d.what.op(),
                after: self.cfg.op_timeout,
            });
        }
        let reconciling = matches!(
            d.what,
            What::Read {
                after_fault: true,
                ..
            } | What::Flush {
                after_fault: true,
                ..
            }
        );
        if !replies.is_empty() || error.is_none() {
            self.record_success(!reconciling);
        }
        // Every reply's epoch is observed (no short circuit).
        let mut epoch_changed = false;
        for r in &replies {
            epoch_changed |= self.observe_epoch(&r.epoch);
        }
        if epoch_changed && !reconciling {
            self.reconcile_all();
        }
        let first_read = matches!(
            d.what,
            What::Read {
                after_fault: false,
                ..
            }
        );
        match d.what {
            What::Flush {
                adds,
                reads,
                rounds,
                waiters,
                after_fault,
            } => self.flush_done(
                adds,
                reads,
                rounds,
                waiters,
                after_fault,
                &replies,
                &error,
                recv,
            ),
            What::Read { idxs, after_fault } => {
                if !after_fault {
                    self.reading_unread = false;
                    if error.is_none() {
                        self.unread_error = None;
                    }
                }
                let items = replies.iter().flat_map(|r| {
                    r.items
                        .iter()
                        .map(move |it| (r.server_now_ms, it.code, it.stored.clone()))
                });
                let pairs: Vec<_> = idxs.into_iter().zip(items).collect();
                for (idx, (now, code, stored)) in pairs {
                    self.unread.remove(&idx);
                    if tells(code) {
                        self.absorb(idx, stored.as_ref(), now, recv, after_fault);
                    }
                }
            }
            What::Vote { idx, expect } => {
                if let Some(r) = replies.first() {
                    if let Some(it) = r.items.first() {
                        self.vote_done(idx, expect, it, r.server_now_ms, recv);
                    }
                }
            }
            What::Cas(jobs) => self.cas_done(jobs, replies.first(), error.as_ref(), recv),
        }
        if let Some(e) = &error {
            if reconciling {
                // The reconciliation after a fault did not answer: read everything again.
                self.reconcile_again = true;
            }
            if first_read {
                self.unread_error = Some(e.clone());
            } else if d.urgent {
                self.sync_error.get_or_insert_with(|| e.clone());
            }
            self.record_failure(e);
            // A first read the store did not answer is sent again at once while the store's
            // breaker allows (its failures open it, which bounds the retries), then with each
            // flush and the reconciliation when the fault ends.
            if e.is_health_failure() {
                self.read_unread(false);
            }
        } else if first_read {
            // Breakers registered while it was in flight.
            self.read_unread(d.urgent);
        }
    }

    /// A reply's epoch: whether it differs from the one known (the store lost its data).
    fn observe_epoch(&mut self, epoch: &Arc<str>) -> bool {
        if epoch.is_empty() {
            return false;
        }
        match &self.epoch {
            Some(e) if e == epoch => false,
            known => {
                let changed = known.is_some();
                self.epoch = Some(Arc::clone(epoch));
                if changed {
                    add(&self.stats.epochs, 1);
                }
                changed
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn flush_done(
        &mut self,
        adds: Vec<(u32, Deltas)>,
        reads: Vec<u32>,
        rounds: Vec<(usize, usize)>,
        waiters: Vec<oneshot::Sender<Result<usize, StoreError>>>,
        after_fault: bool,
        replies: &[Reply],
        error: &Option<StoreError>,
        recv: u64,
    ) {
        self.flushing = false;
        let (mut ai, mut ri) = (0, 0);
        let mut rates = Vec::new();
        for (reply, (na, nr)) in replies.iter().zip(&rounds) {
            add(
                &self.stats.flushes,
                (na.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL)
                    + nr.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL)) as u64,
            );
            for (k, it) in reply.items.iter().enumerate() {
                let now = reply.server_now_ms;
                if k < *na {
                    let (idx, d) = adds[ai + k];
                    match it.code {
                        Code::Stale => add(&self.stats.stale, 1),
                        Code::Missing => {
                            // The store lost the breaker: seeded from the local breaker, and
                            // the counts sent again with the next flush.
                            if let Some(e) = self.entries.get_mut(&idx) {
                                e.carry = d;
                            }
                        }
                        _ => {}
                    }
                    self.unread.remove(&idx);
                    if tells(it.code) {
                        self.absorb(idx, it.stored.as_ref(), now, recv, after_fault);
                    }
                    if let (Code::Applied, Extra::Totals { .. }) = (it.code, &it.extra) {
                        rates.push((idx, it.clone()));
                    }
                } else {
                    let idx = reads[ri + k - na];
                    self.unread.remove(&idx);
                    if tells(it.code) {
                        self.absorb(idx, it.stored.as_ref(), now, recv, after_fault);
                    }
                }
            }
            ai += na;
            ri += nr;
        }
        let delivered = ai + ri;
        if error.is_some()
            && adds[ai.min(adds.len())..]
                .iter()
                .any(|(_, d)| !d.is_empty())
        {
            add(&self.stats.dropped_flushes, 1);
            health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
        }
        let calls: u64 = rounds[..replies.len()]
            .iter()
            .map(|(na, nr)| {
                (na.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL)
                    + nr.div_ceil(crate::protocol::MAX_ITEMS_PER_CALL)) as u64
            })
            .sum();
        health::metrics_count(&self.ns, "breaker_store_flushes_total", calls);
        for (idx, it) in rates {
            self.rate(idx, &it);
        }
        let r = match error {
            None => Ok(delivered),
            Some(e) => Err(e.clone()),
        };
        for tx in waiters {
            let _ = tx.send(r.clone());
        }
        let again = std::mem::take(&mut self.flush_again);
        if !again.is_empty() {
            self.flush(again, false);
        } else if self.early_pending && !self.early_used {
            self.early_flush();
        }
    }

    /// The fleet window's totals of `idx` after a flush: the core's rate rules decide.
    fn rate(&mut self, idx: u32, it: &ItemReply) {
        let (
            Some(s),
            Extra::Totals {
                successes,
                failures,
                slow,
            },
        ) = (&it.stored, &it.extra)
        else {
            return;
        };
        let Some(e) = self.entries.get(&idx) else {
            return;
        };
        let Some(breaker) = e.breaker.upgrade() else {
            return;
        };
        let target = Arc::clone(&e.target);
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let totals = WindowCounts {
            calls: clamp(successes + failures),
            failures: clamp(*failures),
            slow: clamp(*slow),
        };
        let policy = breaker.policy();
        let cooldown = self.cooldown_ms(&policy);
        let Some(write) = plan::plan_rate(s.word, totals, &policy, cooldown) else {
            return;
        };
        if let Some(conn) = self.ready() {
            self.launch_cas(
                conn,
                vec![CasJob::write(Some(idx), target, write, CasKind::Trip)],
            );
        }
    }

    fn vote_done(&mut self, idx: u32, expect: Word, it: &ItemReply, now: u64, recv: u64) {
        if tells(it.code) {
            self.absorb(idx, it.stored.as_ref(), now, recv, false);
        }
        let (Code::Applied, Extra::Votes(votes)) = (it.code, &it.extra) else {
            return;
        };
        let Some(e) = self.entries.get(&idx) else {
            return;
        };
        if *votes < u64::from(e.target.params.quorum) {
            return;
        }
        let Some(breaker) = e.breaker.upgrade() else {
            return;
        };
        let target = Arc::clone(&e.target);
        let policy = breaker.policy();
        let reason = breaker.local_now().trip_reason;
        let cooldown = self.cooldown_ms(&policy);
        let Some(write) = plan::plan_trip(expect, reason, cooldown) else {
            return;
        };
        if let Some(conn) = self.ready() {
            self.launch_cas(
                conn,
                vec![CasJob::write(Some(idx), target, write, CasKind::Trip)],
            );
        }
    }

    fn cas_done(
        &mut self,
        jobs: Vec<CasJob>,
        reply: Option<&Reply>,
        error: Option<&StoreError>,
        recv: u64,
    ) {
        let mut again = Vec::new();
        for (i, job) in jobs.into_iter().enumerate() {
            self.lease_request_ended(&job);
            let Some((reply, it)) = reply.and_then(|r| r.items.get(i).map(|it| (r, it))) else {
                let e = error.cloned().unwrap_or(StoreError::Closed);
                self.cas_failed(job, e);
                continue;
            };
            let now = reply.server_now_ms;
            if it.code == Code::Stale {
                add(&self.stats.stale, 1);
            }
            self.nonce_answered(&job, it.code);
            if let (Some(idx), true) = (job.idx, tells(it.code)) {
                self.absorb(idx, it.stored.as_ref(), now, recv, false);
            }
            match it.code {
                Code::Applied => self.cas_applied(job, it, now, recv),
                Code::Stale | Code::Missing if job.tries + 1 < MAX_TRIES => {
                    if let Some(next) = self.retry(job, it.stored.as_ref().map(|s| s.word)) {
                        again.push(next);
                    }
                }
                Code::Early => {
                    if let (Some(idx), CasKind::Acquire) = (job.idx, &job.kind) {
                        let retry_ms = job.not_before.saturating_sub(now).max(1);
                        self.grant(idx, ProbeGrant::Denied { retry_ms });
                    }
                }
                Code::Bad => {
                    tracing::error!(
                        target: "breaker_redis",
                        breaker = job.target.id.as_str(),
                        "the store refused an argument of this breaker's operation (a bug): \
                         nothing was written for it"
                    );
                    self.cas_failed(
                        job,
                        StoreError::Config {
                            message: "an argument was refused by the store".into(),
                        },
                    );
                }
                _ => {
                    let e = StoreError::Timeout {
                        op: "cas",
                        after: self.cfg.op_timeout,
                    };
                    self.cas_failed(job, e);
                }
            }
        }
        if !again.is_empty() {
            if let Some(conn) = self.ready() {
                self.launch_cas(conn, again);
            }
        }
    }

    /// Job `job` was answered `code`: its nonce is no longer pending once its leases are
    /// known (a lease request applied, or the store lost the breaker) or released (a
    /// compare-and-set wanting none releases them whatever the compare's outcome).
    fn nonce_answered(&mut self, job: &CasJob, code: Code) {
        let (Some(idx), Some(n)) = (job.idx, job.nonce) else {
            return;
        };
        let Some(e) = self.entries.get_mut(&idx) else {
            return;
        };
        let settled = if job.want == 0 {
            !matches!(code, Code::Bad | Code::Expired)
        } else {
            matches!(code, Code::Applied | Code::Missing)
        };
        // A release settles the nonce only while no lease request carrying it is in flight
        // (one sent after the release was may be granted again under it).
        if settled && e.nonce == Some(n) && (job.want > 0 || e.acquiring == 0) {
            e.nonce = None;
        }
    }

    /// Job `job`'s answer (or failure) arrived: a lease request carrying a nonce is no longer
    /// in flight.
    fn lease_request_ended(&mut self, job: &CasJob) {
        if !matches!(job.kind, CasKind::Acquire) || job.nonce.is_none() {
            return;
        }
        if let Some(e) = job.idx.and_then(|idx| self.entries.get_mut(&idx)) {
            e.acquiring = e.acquiring.saturating_sub(1);
        }
    }

    /// An applied compare-and-set: a lease request's grant, a force's answer.
    fn cas_applied(&mut self, job: CasJob, it: &ItemReply, now: u64, recv: u64) {
        match job.kind {
            CasKind::Acquire => {
                add(&self.stats.acquires, 1);
                let Some(idx) = job.idx else { return };
                let grant = match &it.extra {
                    Extra::Granted(leases) if !leases.is_empty() => {
                        ProbeGrant::Leases(leases.clone())
                    }
                    _ => ProbeGrant::Denied { retry_ms: 0 },
                };
                self.grant(idx, grant);
            }
            CasKind::Force { reply, .. } => {
                if let (Some(tx), Some(s)) = (reply, &it.stored) {
                    let _ = tx.send(Ok(FleetView::of(s, now, recv)));
                }
            }
            CasKind::Trip | CasKind::End { .. } | CasKind::Reconcile => {}
        }
    }

    /// A compare-and-set that lost to another replica's write: decided again on the word that
    /// won (`None`: the store holds none), or given up when there is nothing left to do.
    fn retry(&mut self, job: CasJob, won: Option<Word>) -> Option<CasJob> {
        let tries = job.tries + 1;
        match job.kind {
            CasKind::Acquire => {
                let idx = job.idx?;
                let next = self.acquire_job(idx, job.want, tries);
                if next.is_none() {
                    self.grant(idx, ProbeGrant::Denied { retry_ms: 0 });
                }
                next
            }
            CasKind::End { lease, end } => self.end_job(job.idx?, won, lease, end, tries),
            CasKind::Force { to, policy, reply } => {
                let cooldown = self.cooldown_ms(&policy);
                let write = plan::plan_force(won, to.state(), cooldown);
                Some(CasJob {
                    write,
                    kind: CasKind::Force { to, policy, reply },
                    tries,
                    ..job
                })
            }
            // A trip that lost to a write of the same closed period trips the word that won; a
            // trip of a period that has ended is late.
            CasKind::Trip => {
                let policy = self.entries.get(&job.idx?)?.breaker.upgrade()?.policy();
                let cooldown = self.cooldown_ms(&policy);
                let write = plan::plan_retrip(&job.write, won?, cooldown)?;
                Some(CasJob {
                    write,
                    tries,
                    ..job
                })
            }
            // A reconciliation's write that lost is settled by the word that won (adopted
            // above).
            CasKind::Reconcile => None,
        }
    }

    fn cas_failed(&mut self, job: CasJob, e: StoreError) {
        match job.kind {
            CasKind::Acquire => {
                add(&self.stats.acquires, 1);
                if let Some(idx) = job.idx {
                    self.grant(idx, ProbeGrant::StoreUnavailable);
                }
            }
            CasKind::Force { reply, .. } => {
                if let Some(tx) = reply {
                    let _ = tx.send(Err(e));
                }
            }
            CasKind::Trip => {
                if let (Some(idx), Some(b)) = (
                    job.idx,
                    job.idx
                        .and_then(|i| self.entries.get(&i))
                        .and_then(|e| e.breaker.upgrade()),
                ) {
                    self.keep_unsent(idx, b.local_now().trip_reason);
                }
            }
            // A lost end costs at most the lease; a lost seed is made again at the next look.
            CasKind::End { .. } | CasKind::Reconcile => {}
        }
    }

    pub(super) fn command(&mut self, c: Command) {
        match c {
            Command::FlushNow(tx) => {
                // Urgent operations queued before go first.
                self.urgent();
                self.flush(vec![tx], false);
            }
            Command::Sync(tx) => {
                self.urgent();
                let unread = self.unread.iter().copied().collect();
                self.syncs.push((tx, unread));
            }
            Command::Force {
                id,
                policy,
                to,
                reply,
            } => {
                self.drain_registrations();
                let idx = self.by_id.get(&id).copied();
                let (target, policy, expect) = match (policy, idx) {
                    (Some(p), _) => {
                        let params =
                            match crate::policy::params(&p, breaker_core::scope::Scope::Shared) {
                                Ok(params) => params,
                                Err(e) => {
                                    let _ = reply.send(Err(StoreError::Config {
                                        message: e.to_string(),
                                    }));
                                    return;
                                }
                            };
                        let t = Arc::new(Target::new(&self.cfg.namespace, id.clone(), params));
                        let expect = idx.and_then(|i| self.entries[&i].view.expect());
                        (t, p, expect)
                    }
                    (None, Some(i)) => {
                        let e = &self.entries[&i];
                        let Some(b) = e.breaker.upgrade() else {
                            let _ = reply.send(Err(StoreError::Config {
                                message: format!(
                                    "shared breaker `{id}` is not registered with this store"
                                ),
                            }));
                            return;
                        };
                        (Arc::clone(&e.target), b.policy(), e.view.expect())
                    }
                    (None, None) => {
                        let _ = reply.send(Err(StoreError::Config {
                            message: format!(
                                "shared breaker `{id}` is not registered with this store"
                            ),
                        }));
                        return;
                    }
                };
                let Some(conn) = self.ready() else {
                    let _ = reply.send(Err(StoreError::Degraded { op: "force" }));
                    return;
                };
                let cooldown = self.cooldown_ms(&policy);
                let write = plan::plan_force(expect, to.state(), cooldown);
                let job = CasJob::write(
                    idx,
                    target,
                    write,
                    CasKind::Force {
                        to,
                        policy,
                        reply: Some(reply),
                    },
                );
                self.launch_cas(conn, vec![job]);
            }
        }
    }

    pub(super) fn push(&mut self, p: redis::PushInfo) {
        if p.kind != redis::PushKind::Message {
            return;
        }
        let Some(redis::Value::BulkString(payload)) = p.data.get(1) else {
            return;
        };
        let Some(msg) = crate::protocol::parse_published(payload) else {
            return;
        };
        add(&self.stats.pushes, 1);
        self.drain_registrations();
        if self.observe_epoch(&msg.epoch) {
            self.reconcile_all();
        }
        let Some(&idx) = self.by_id.get(&msg.id) else {
            return;
        };
        let recv = self.cfg.clock.now_nanos();
        self.absorb(idx, Some(&msg.stored), msg.server_now_ms, recv, false);
    }
}
