//! The coordinator's operations: flushes, urgent operations (trips, probe leases, probe ends),
//! the handle's commands and published transitions, each folded into the breakers' views.

use super::*;

impl Coordinator {
    /// Folds one checked reply item into the breaker's view; returns the callbacks to make.
    pub(super) fn absorb(&mut self, idx: u32, it: &ItemReply, recv: u64, calls: &mut Vec<Call>) {
        match it.code {
            Code::Stale => add(&self.stats.stale, 1),
            Code::Repaired => add(&self.stats.repairs, 1),
            _ => {}
        }
        let replica = self.proto.replica().clone();
        let Some(e) = self.entries.get_mut(&idx) else {
            return;
        };
        let Some(breaker) = e.breaker.upgrade() else {
            return;
        };
        if it.policy_mismatch && !e.mismatch {
            calls.push(Call::Mismatch(
                Arc::clone(&breaker),
                PolicyMismatch {
                    id: e.target.id.clone(),
                    ours: e.target.policy.fingerprint().to_owned(),
                    pinned: it.pinned_fingerprint.clone(),
                },
            ));
            tracing::warn!(
                target: "breaker_redis",
                breaker = e.target.id.as_str(),
                ours = e.target.policy.fingerprint(),
                pinned = %it.pinned_fingerprint,
                "policy_mismatch: this replica's shared policy differs from the pinned one"
            );
        }
        e.mismatch = it.policy_mismatch;
        if let Some(u) = update(&mut e.view, &it.state, it.server_now_ms, recv, &replica) {
            add(&self.stats.applied, 1);
            calls.push(Call::Apply(breaker, u));
            let watched = e.view.watched();
            self.set_watched(idx, watched);
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

    /// A flush while the store is degraded and its own breaker allows no attempt: nothing can
    /// be sent, so only the breakers that counted since the last flush (`active`) are visited,
    /// their counts dropped as a failed flush's are, not every registered breaker each interval.
    fn drop_counts(&mut self, active: Vec<u32>) -> Result<usize, StoreError> {
        let mut counted = false;
        let mut gone = Vec::new();
        for idx in active {
            let Some(e) = self.entries.get(&idx) else {
                continue;
            };
            e.link.active.store(false, Ordering::Release);
            match e.breaker.upgrade() {
                Some(breaker) => counted |= !breaker.take_deltas().is_empty(),
                None => gone.push(idx),
            }
        }
        for idx in gone {
            self.unregister(idx);
        }
        if self.entries.is_empty() {
            return Ok(0);
        }
        if counted {
            add(&self.stats.dropped_flushes, 1);
            health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
        }
        Err(StoreError::Degraded { op: "flush" })
    }

    pub(super) async fn flush(&mut self) -> Result<usize, StoreError> {
        self.drain_registrations();
        self.sweep_unused();
        let now = self.cfg.clock.now_nanos();
        let mut idxs =
            std::mem::take(&mut *self.shared.active.lock().unwrap_or_else(|e| e.into_inner()));
        let fresh: HashSet<u32> = self.fresh.drain(..).collect();
        idxs.extend(fresh.iter().copied());
        // While the store is degraded, every flush carries every breaker: it is the store's
        // health probe (whenever the store's own breaker allows one), and its reply re-adopts
        // the fleet's state, so the replicas agree again within a flush interval of the
        // store's return even when nothing was counted meanwhile (an open breaker records
        // nothing, and a trip reported during the outage was lost with it).
        let degraded = self.status != StoreStatus::Healthy;
        if degraded && (self.conn.is_none() || !self.health.allows(Instant::now())) {
            return self.drop_counts(idxs);
        }
        if degraded {
            idxs.extend(self.entries.keys().copied());
        } else {
            idxs.extend(self.watched.iter().copied());
        }
        idxs.sort_unstable();
        idxs.dedup();
        let mut batch: Vec<(u32, Deltas, HighWater)> = Vec::with_capacity(idxs.len());
        let mut gone = Vec::new();
        for idx in idxs {
            let Some(e) = self.entries.get(&idx) else {
                continue;
            };
            e.link.active.store(false, Ordering::Release);
            let Some(breaker) = e.breaker.upgrade() else {
                gone.push(idx);
                continue;
            };
            let d = breaker.take_deltas();
            if d.is_empty() && !e.view.watched() && !fresh.contains(&idx) && !degraded {
                continue;
            }
            batch.push((idx, d, e.view.high_water(now)));
        }
        for idx in gone {
            self.unregister(idx);
        }
        if batch.is_empty() {
            return Ok(0);
        }
        let counted = batch.iter().any(|(_, d, _)| !d.is_empty());
        let Some(mut conn) = self.ready() else {
            if counted {
                add(&self.stats.dropped_flushes, 1);
                health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
            }
            return Err(StoreError::Degraded { op: "flush" });
        };
        let items: Vec<FlushItem<'_>> = batch
            .iter()
            .map(|(idx, d, hw)| FlushItem {
                target: &self.entries[idx].target,
                generation: d.generation,
                successes: d.successes,
                failures: d.failures,
                slow: d.slow,
                high_water: *hw,
            })
            .collect();
        let (answers, failed) = self.flush_items(&mut conn, &items).await;
        drop(items);
        // The round trips that succeeded delivered their breakers' counts: their answers are
        // applied whether or not a later round trip failed.
        let delivered = answers.len().min(batch.len());
        let calls = delivered.div_ceil(crate::protocol::MAX_BREAKERS_PER_CALL) as u64;
        add(&self.stats.flushes, calls);
        health::metrics_count(&self.ns, "breaker_store_flushes_total", calls);
        if failed.is_none() {
            self.record_success();
        }
        let recv = self.cfg.clock.now_nanos();
        let mut cbs = Vec::new();
        for ((idx, _, _), it) in batch.iter().zip(&answers) {
            self.absorb(*idx, it, recv, &mut cbs);
        }
        cbs.into_iter().for_each(Call::run);
        match failed {
            None => Ok(batch.len()),
            Some(e) => {
                if batch[delivered..].iter().any(|(_, d, _)| !d.is_empty()) {
                    add(&self.stats.dropped_flushes, 1);
                    health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
                }
                self.record_failure(&e);
                Err(e)
            }
        }
    }

    /// Reads the shared state of newly registered breakers (one operation for all of them).
    pub(super) async fn poll_fresh(&mut self) {
        let fresh = std::mem::take(&mut self.fresh);
        let Some(mut conn) = self.ready() else {
            return;
        };
        let items: Vec<FlushItem<'_>> = fresh
            .iter()
            .filter_map(|idx| self.entries.get(idx).map(|e| (idx, e)))
            .map(|(_, e)| FlushItem {
                target: &e.target,
                generation: e.view.generation,
                successes: 0,
                failures: 0,
                slow: 0,
                high_water: HighWater::NONE,
            })
            .collect();
        if items.is_empty() {
            return;
        }
        let idxs: Vec<u32> = fresh
            .into_iter()
            .filter(|i| self.entries.contains_key(i))
            .collect();
        let (answers, failed) = self.flush_items(&mut conn, &items).await;
        drop(items);
        if failed.is_none() {
            self.record_success();
        }
        let recv = self.cfg.clock.now_nanos();
        let mut cbs = Vec::new();
        for (idx, it) in idxs.iter().zip(&answers) {
            self.absorb(*idx, it, recv, &mut cbs);
        }
        cbs.into_iter().for_each(Call::run);
        if let Some(e) = failed {
            self.record_failure(&e);
        }
    }

    pub(super) async fn urgent(&mut self) {
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
                Urgent::Trip {
                    idx,
                    generation,
                    reason,
                } => trips.push((idx, generation, reason)),
                Urgent::Acquire { idx, want } => match acquires.iter_mut().find(|(i, _)| *i == idx)
                {
                    Some((_, w)) => *w = (*w).max(want),
                    None => acquires.push((idx, want)),
                },
                Urgent::End {
                    idx,
                    lease,
                    outcome,
                } => ends.push((idx, lease, outcome)),
            }
        }
        if flush_soon && !self.early_used {
            self.early_used = true;
            // The early flush replaces the next regular one.
            self.schedule_flush();
            let _ = self.flush().await;
        } else if !self.fresh.is_empty() {
            self.poll_fresh().await;
        }
        trips.retain(|(i, _, _)| self.entries.contains_key(i));
        acquires.retain(|(i, _)| self.entries.contains_key(i));
        ends.retain(|(i, _, _)| self.entries.contains_key(i));
        let n = trips.len() + acquires.len() + ends.len();
        if n == 0 {
            return;
        }
        let Some(conn) = self.ready() else {
            self.keep_unsent(trips);
            let cbs: Vec<_> = acquires
                .iter()
                .filter_map(|(i, _)| self.entries[i].breaker.upgrade())
                .map(|b| Call::Grant(b, ProbeGrant::StoreUnavailable))
                .collect();
            cbs.into_iter().for_each(Call::run);
            return;
        };
        enum Done {
            Item(u32, Result<ItemReply, StoreError>),
            Trip((u32, u64, Reason), Result<ItemReply, StoreError>),
            Acquire(u32, Result<ItemReply, StoreError>),
        }
        let proto = &self.proto;
        let entries = &self.entries;
        let timeout = self.cfg.op_timeout;
        let timed = |op: &'static str| {
            move |r: Result<_, tokio::time::error::Elapsed>| {
                r.unwrap_or(Err(StoreError::Timeout { op, after: timeout }))
            }
        };
        let mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Done> + Send + '_>>> =
            Vec::with_capacity(n);
        for (idx, generation, reason) in trips {
            let mut c = conn.clone();
            let t = &entries[&idx].target;
            futs.push(Box::pin(async move {
                let r =
                    tokio::time::timeout(timeout, proto.trip(&mut c, t, generation, reason)).await;
                Done::Trip((idx, generation, reason), timed("trip")(r))
            }));
        }
        for (idx, want) in acquires {
            let mut c = conn.clone();
            let t = &entries[&idx].target;
            futs.push(Box::pin(async move {
                let r = tokio::time::timeout(timeout, proto.acquire_probe(&mut c, t, want)).await;
                Done::Acquire(idx, timed("acquire_probe")(r))
            }));
        }
        for (idx, lease, outcome) in ends {
            let mut c = conn.clone();
            let t = &entries[&idx].target;
            futs.push(Box::pin(async move {
                let r = tokio::time::timeout(timeout, proto.end_probe(&mut c, t, &lease, outcome))
                    .await;
                Done::Item(idx, timed("end_probe")(r))
            }));
        }
        let sent = Instant::now();
        let results = futures_util::future::join_all(futs).await;
        add(&self.stats.operations, n as u64);
        add(&self.stats.round_trips, 1);
        let recv = self.cfg.clock.now_nanos();
        let mut cbs = Vec::new();
        let mut answered = false;
        for d in results {
            match d {
                Done::Item(idx, Ok(it)) => {
                    answered = true;
                    self.absorb(idx, &it, recv, &mut cbs);
                }
                Done::Acquire(idx, Ok(it)) => {
                    answered = true;
                    add(&self.stats.acquires, 1);
                    self.absorb(idx, &it, recv, &mut cbs);
                    let grant = if it.granted.is_empty() {
                        ProbeGrant::Denied
                    } else {
                        ProbeGrant::Leases(it.granted.clone())
                    };
                    if let Some(b) = self.entries.get(&idx).and_then(|e| e.breaker.upgrade()) {
                        cbs.push(Call::Grant(b, grant));
                    }
                }
                Done::Trip((idx, _, _), Ok(it)) => {
                    answered = true;
                    self.absorb(idx, &it, recv, &mut cbs);
                }
                Done::Trip(trip, Err(e)) => {
                    self.record_failure(&e);
                    self.keep_unsent(vec![trip]);
                }
                Done::Item(_, Err(e)) => self.record_failure(&e),
                Done::Acquire(idx, Err(e)) => {
                    add(&self.stats.acquires, 1);
                    self.record_failure(&e);
                    if let Some(b) = self.entries.get(&idx).and_then(|e| e.breaker.upgrade()) {
                        cbs.push(Call::Grant(b, ProbeGrant::StoreUnavailable));
                    }
                }
            }
        }
        if answered {
            self.rtt(sent.elapsed());
            self.record_success();
        }
        cbs.into_iter().for_each(Call::run);
    }

    /// Keeps `trips` to send when the store is back (the latest of each breaker).
    fn keep_unsent(&mut self, trips: Vec<(u32, u64, Reason)>) {
        for trip in trips {
            self.unsent_trips.retain(|(i, _, _)| *i != trip.0);
            self.unsent_trips.push(trip);
        }
    }

    /// Queues the trips the store never received, now that it answers again.
    pub(super) fn resend_unsent_trips(&mut self) {
        for (idx, generation, reason) in std::mem::take(&mut self.unsent_trips) {
            if self.entries.contains_key(&idx) {
                self.shared.push(Urgent::Trip {
                    idx,
                    generation,
                    reason,
                });
            }
        }
    }

    pub(super) async fn command(&mut self, c: Command) {
        match c {
            Command::FlushNow(tx) => {
                // Urgent operations queued before go first.
                self.urgent().await;
                let r = self.flush().await;
                let _ = tx.send(r);
            }
            Command::Sync(tx) => {
                self.urgent().await;
                let _ = tx.send(());
            }
            Command::Force {
                id,
                policy,
                to,
                reply,
            } => {
                self.drain_registrations();
                let idx = self.by_id.get(&id).copied();
                let target = match (&policy, idx) {
                    (Some(p), _) => Target::new(&self.cfg.namespace, id.clone(), p.clone()),
                    (None, Some(i)) => self.entries[&i].target.clone(),
                    (None, None) => {
                        let _ = reply.send(Err(StoreError::Config {
                            message: format!(
                                "shared breaker `{id}` is not registered with this store"
                            ),
                        }));
                        return;
                    }
                };
                let Some(mut conn) = self.ready() else {
                    let _ = reply.send(Err(StoreError::Degraded { op: "force" }));
                    return;
                };
                let sent = Instant::now();
                let r = self
                    .timed("force", self.proto.force(&mut conn, &target, to))
                    .await;
                add(&self.stats.operations, 1);
                add(&self.stats.round_trips, 1);
                match r {
                    Ok(it) => {
                        self.rtt(sent.elapsed());
                        self.record_success();
                        let mut cbs = Vec::new();
                        if let Some(i) = idx {
                            let recv = self.cfg.clock.now_nanos();
                            self.absorb(i, &it, recv, &mut cbs);
                        }
                        cbs.into_iter().for_each(Call::run);
                        let _ = reply.send(Ok(it.state));
                    }
                    Err(e) => {
                        self.record_failure(&e);
                        let _ = reply.send(Err(e));
                    }
                }
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
        let Some(&idx) = self.by_id.get(&msg.id) else {
            return;
        };
        let recv = self.cfg.clock.now_nanos();
        let replica = self.proto.replica().clone();
        let Some(e) = self.entries.get_mut(&idx) else {
            return;
        };
        if let Some(u) = update(&mut e.view, &msg.state, msg.server_now_ms, recv, &replica) {
            add(&self.stats.applied, 1);
            let watched = e.view.watched();
            if let Some(b) = e.breaker.upgrade() {
                b.apply_remote(&u);
            }
            self.set_watched(idx, watched);
        }
    }
}

/// Moves `view` to `s` if `s` is newer; the update for the breaker, if any.
fn update(
    view: &mut View,
    s: &SharedState,
    server_now_ms: u64,
    recv: u64,
    me: &ReplicaId,
) -> Option<RemoteUpdate> {
    if s.generation <= view.generation {
        return None;
    }
    let deadline = s.deadline_ms.map(|dl| {
        let left = dl.saturating_sub(server_now_ms);
        recv.saturating_add(left.saturating_mul(1_000_000))
    });
    *view = View {
        generation: s.generation,
        state: s.state,
        deadline,
        streak: s.streak,
    };
    Some(RemoteUpdate {
        generation: s.generation,
        state: s.state,
        deadline,
        streak: s.streak,
        by_this_replica: s.caused_by.as_ref() == Some(me),
        caused_by: s.caused_by.clone(),
        reason: s.reason,
    })
}
