//! The coordinator's loop: its wake-ups, its connection, registrations and the store's health.

use super::*;

impl Coordinator {
    pub(super) async fn run(mut self) {
        loop {
            self.maybe_connect();
            let retry_at = self.wake_for_health();
            let event = {
                let connecting = &mut self.connecting;
                tokio::select! {
                    biased;
                    c = self.cmd_rx.recv() => match c {
                        Some(c) => Event::Command(c),
                        None => Event::Stopped,
                    },
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
                Event::Command(c) => self.command(c).await,
                Event::Wake => self.urgent().await,
                Event::Push(p) => self.push(p),
                Event::Connected(r) => {
                    self.connecting = None;
                    match r {
                        Ok(conn) => {
                            self.conn = Some(conn);
                            self.record_success();
                        }
                        Err(e) => self.record_failure(&e),
                    }
                }
                Event::Flush => {
                    self.early_used = false;
                    self.schedule_flush();
                    let _ = self.flush().await;
                }
                Event::Retry => self.grace_check(),
            }
        }
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

    pub(super) fn ready(&self) -> Option<ConnectionManager> {
        if self.health.allows(Instant::now()) {
            self.conn.clone()
        } else {
            None
        }
    }

    pub(super) fn drain_registrations(&mut self) {
        while let Ok(r) = self.reg_rx.try_recv() {
            self.fresh.push(r.idx);
            self.by_id.insert(r.target.id.clone(), r.idx);
            self.entries.insert(
                r.idx,
                Entry {
                    target: r.target,
                    breaker: Arc::downgrade(&r.breaker),
                    link: r.link,
                    view: View {
                        generation: 0,
                        state: State::Closed,
                        deadline: None,
                        streak: 0,
                    },
                    mismatch: false,
                },
            );
        }
    }

    pub(super) fn unregister(&mut self, idx: u32) {
        self.watched.remove(&idx);
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

    pub(super) fn record_success(&mut self) {
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
            // Re-adopt the shared state at once, and tell the fleet of the trips it missed.
            self.next_flush = Instant::now();
            self.resend_unsent_trips();
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

    pub(super) fn rtt(&self, d: Duration) {
        self.stats.rtt(&self.ns, d);
    }

    /// Sends `items` to the store in round trips of at most [`MAX_BREAKERS_PER_ROUND_TRIP`](crate::protocol::MAX_BREAKERS_PER_ROUND_TRIP) breakers,
    /// one after another, each under the operation timeout, and stops at the first that fails.
    /// Returns the answers of the round trips that succeeded (one per item of a prefix of
    /// `items`, in order) and the error that stopped it, if any.
    pub(super) async fn flush_items(
        &self,
        conn: &mut ConnectionManager,
        items: &[FlushItem<'_>],
    ) -> (Vec<ItemReply>, Option<StoreError>) {
        let mut answers = Vec::with_capacity(items.len());
        for chunk in items.chunks(crate::protocol::MAX_BREAKERS_PER_ROUND_TRIP) {
            let calls = chunk.len().div_ceil(crate::protocol::MAX_BREAKERS_PER_CALL) as u64;
            let sent = Instant::now();
            let r = self.timed("flush", self.proto.flush(conn, chunk)).await;
            add(&self.stats.operations, calls);
            add(&self.stats.round_trips, 1);
            match r {
                Ok(reply) => {
                    self.rtt(sent.elapsed());
                    answers.extend(reply.items);
                }
                Err(e) => return (answers, Some(e)),
            }
        }
        (answers, None)
    }

    pub(super) async fn timed<T>(
        &self,
        op: &'static str,
        fut: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.cfg.op_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout {
                op,
                after: self.cfg.op_timeout,
            }),
        }
    }
}
