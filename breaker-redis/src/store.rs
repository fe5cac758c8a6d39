//! The store handle and its coordinator: one task per store connection, for all breakers.
//!
//! # Why one task per connection
//! A million keyed breakers must not cost a million tasks or timers. The coordinator owns the
//! connection and every registered breaker's view of the shared state; breakers reach it only
//! through their [`Link`] (an atomic flag per flush interval, a queue for the rare urgent
//! operations). It wakes for:
//!
//! - the flush timer (every `flush_interval`, jittered): the counts of the breakers that were
//!   *active* since the last flush, plus the breakers whose shared state is not closed (so a
//!   lost push costs at most one interval), go to the store in **one** operation (a pipeline
//!   when more than 512). Idle breakers are not touched and cost nothing;
//! - urgent operations (a local trip, a probe-lease request, a probe's end, an early flush):
//!   sent at once, concurrently, one round trip for the batch; probe requests of one breaker
//!   queued together are merged into one operation;
//! - published transitions (pub/sub on the same RESP3 connection, resubscribed after a
//!   reconnect);
//! - commands of the [`Store`] handle (flush now, force, reset, sync).
//!
//! Every operation runs under the configured timeout, is counted by the store's own breaker
//! (see [`crate::health`]), and its reply is checked before anything is applied.
//! Deadlines are converted on receipt: `local deadline = local now at receipt + (server
//! deadline - server now)`, both server readings from the same reply, so replicas' clocks are
//! never compared and a replica's clock offset changes no decision.

use crate::config::{OnStoreError, StoreConfig};
use crate::error::StoreError;
use crate::health::{self, add, Change, Stats, StoreBreaker, StoreStats};
use crate::link::{
    Deltas, Link, LinkState, PolicyMismatch, ProbeGrant, RemoteUpdate, Shared, SharedBreaker,
    StoreStatus, Urgent,
};
use crate::names::{BreakerId, Namespace, ReplicaId};
use crate::policy::{CompiledPolicy, PolicyError, SharedPolicy};
use crate::protocol::{
    Code, FlushItem, ForceTarget, HighWater, ItemReply, Protocol, SharedState, Target,
};
use breaker_core::breaker::State;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Why a breaker could not be registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// A breaker with this id is already registered with this store.
    #[error("shared breaker `{0}` is already registered with this store")]
    Duplicate(BreakerId),
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The breaker's name (or key) is not a valid shared breaker id.
    #[error("cannot share this breaker: {0}")]
    Name(crate::names::NameError),
}

enum Command {
    FlushNow(oneshot::Sender<Result<usize, StoreError>>),
    Sync(oneshot::Sender<()>),
    Force {
        id: BreakerId,
        policy: Option<CompiledPolicy>,
        to: ForceTarget,
        reply: oneshot::Sender<Result<SharedState, StoreError>>,
    },
}

struct Registration {
    idx: u32,
    target: Target,
    breaker: Arc<dyn SharedBreaker>,
    link: Arc<LinkState>,
}

struct Inner {
    config: StoreConfig,
    shared: Arc<Shared>,
    stats: Arc<Stats>,
    ids: Arc<Mutex<HashSet<BreakerId>>>,
    next_idx: AtomicU32,
    commands: mpsc::UnboundedSender<Command>,
    registrations: mpsc::UnboundedSender<Registration>,
    status: watch::Receiver<StoreStatus>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A connected store: the handle breakers register with, and fleet-wide manual control.
/// Cloning is cheap; the coordinator stops when the last clone is dropped.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.inner.config.redacted_url())
            .field("namespace", &self.inner.config.namespace)
            .field("replica", &self.inner.config.replica)
            .field("status", &*self.inner.status.borrow())
            .finish()
    }
}

impl Store {
    /// Connects (bounded by the connect timeout), loads the scripts, subscribes to the
    /// namespace's channel and starts the coordinator.
    ///
    /// # Errors
    /// [`StoreError`] if the first connection cannot be made; see [`Store::start`] to start
    /// degraded and connect in the background instead.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect(config: StoreConfig) -> Result<Store, StoreError> {
        let (proto, push_tx, push_rx) = Self::parts(&config);
        let conn = connect(config.clone(), Arc::clone(&proto), push_tx.clone()).await?;
        Ok(Self::spawn(config, proto, push_tx, push_rx, Some(conn)))
    }

    /// Starts the coordinator at once and connects in the background; until connected, the
    /// store is degraded (breakers follow the store-error mode).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(config: StoreConfig) -> Store {
        let (proto, push_tx, push_rx) = Self::parts(&config);
        Self::spawn(config, proto, push_tx, push_rx, None)
    }

    #[allow(clippy::type_complexity)]
    fn parts(
        config: &StoreConfig,
    ) -> (
        Arc<Protocol>,
        mpsc::UnboundedSender<redis::PushInfo>,
        mpsc::UnboundedReceiver<redis::PushInfo>,
    ) {
        let live = config.flush_interval * 3 + config.op_timeout;
        let proto = Protocol::new(
            &config.namespace,
            config.replica.clone(),
            live,
            Duration::from_secs(86_400),
        )
        .with_redactor(config.redactor.clone());
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        (Arc::new(proto), push_tx, push_rx)
    }

    fn spawn(
        config: StoreConfig,
        proto: Arc<Protocol>,
        push_tx: mpsc::UnboundedSender<redis::PushInfo>,
        push_rx: mpsc::UnboundedReceiver<redis::PushInfo>,
        conn: Option<ConnectionManager>,
    ) -> Store {
        use rand::SeedableRng;
        let shared = Arc::new(Shared::new());
        let stats = Arc::new(Stats::default());
        let ids = Arc::new(Mutex::new(HashSet::new()));
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (reg_tx, reg_rx) = mpsc::unbounded_channel();
        let initial = if conn.is_some() {
            StoreStatus::Healthy
        } else {
            degraded_status(config.on_error)
        };
        let (status_tx, status_rx) = watch::channel(initial);
        let mut health = StoreBreaker::new(
            config.store_failures,
            config.store_cooldown,
            config.store_cooldown_max,
        );
        let now = Instant::now();
        if conn.is_none() {
            health.degrade_now(now);
        }
        let coordinator = Coordinator {
            cfg: config.clone(),
            ns: config.namespace.as_str().to_owned(),
            proto,
            shared: Arc::clone(&shared),
            stats: Arc::clone(&stats),
            ids: Arc::clone(&ids),
            status_tx,
            status: initial,
            entries: HashMap::new(),
            by_id: HashMap::new(),
            reg_rx,
            cmd_rx,
            push_rx,
            push_tx,
            conn,
            connecting: None,
            health,
            next_flush: now + config.flush_interval,
            early_used: false,
            fresh: Vec::new(),
            rng: rand::rngs::SmallRng::from_entropy(),
        };
        let task = tokio::spawn(coordinator.run());
        Store {
            inner: Arc::new(Inner {
                config,
                shared,
                stats,
                ids,
                next_idx: AtomicU32::new(0),
                commands: cmd_tx,
                registrations: reg_tx,
                status: status_rx,
                task,
            }),
        }
    }

    /// Registers a local breaker as the shared breaker `id` under `policy`; the returned
    /// [`Link`] is the breaker's handle (dropping it unregisters the breaker).
    ///
    /// # Errors
    /// [`RegisterError::Duplicate`] if `id` is registered already, [`RegisterError::Policy`]
    /// if `policy` is invalid.
    pub fn register(
        &self,
        id: BreakerId,
        policy: &SharedPolicy,
        breaker: Arc<dyn SharedBreaker>,
    ) -> Result<Link, RegisterError> {
        let compiled = policy.compile()?;
        {
            let mut ids = self.inner.ids.lock().unwrap_or_else(|e| e.into_inner());
            if !ids.insert(id.clone()) {
                return Err(RegisterError::Duplicate(id));
            }
        }
        let idx = self.inner.next_idx.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(LinkState {
            idx,
            active: Default::default(),
            shared: Arc::clone(&self.inner.shared),
        });
        let target = Target::new(&self.inner.config.namespace, id.clone(), compiled);
        let _ = self.inner.registrations.send(Registration {
            idx,
            target,
            breaker,
            link: Arc::clone(&state),
        });
        // The coordinator reads the fleet's state of a new breaker at once (a replica that
        // just started must know of an outage the others detected).
        self.inner.shared.wake.notify_one();
        Ok(Link { state, id })
    }

    /// Flushes now (instead of waiting for the timer): the number of breakers sent, 0 when no
    /// breaker was active.
    ///
    /// # Errors
    /// The store's error; [`StoreError::Degraded`] when its breaker is open.
    pub async fn flush_now(&self) -> Result<usize, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::FlushNow(tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Waits until every urgent operation queued before this call has been answered.
    ///
    /// # Errors
    /// [`StoreError::Closed`] if the coordinator has stopped.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Sync(tx))?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    /// Fleet-wide manual control of the registered breaker `id`: every replica sees it (push,
    /// or its next flush). Re-pins this replica's policy.
    ///
    /// # Errors
    /// The store's error; [`StoreError::Config`] if `id` is not registered here (see
    /// [`force_with_policy`](Self::force_with_policy)).
    pub async fn force(&self, id: &BreakerId, to: ForceTarget) -> Result<SharedState, StoreError> {
        self.force_inner(id, None, to).await
    }

    /// Fleet-wide reset of the registered breaker `id`: closed, window and streak cleared.
    ///
    /// # Errors
    /// As [`force`](Self::force).
    pub async fn reset(&self, id: &BreakerId) -> Result<SharedState, StoreError> {
        self.force_inner(id, None, ForceTarget::Reset).await
    }

    /// Manual control of a breaker that is not registered with this store (an operator's
    /// tool), pinning `policy`.
    ///
    /// # Errors
    /// The store's error, or [`StoreError::Config`] for an invalid policy.
    pub async fn force_with_policy(
        &self,
        id: &BreakerId,
        policy: &SharedPolicy,
        to: ForceTarget,
    ) -> Result<SharedState, StoreError> {
        let compiled = policy.compile().map_err(|e| StoreError::Config {
            message: e.to_string(),
        })?;
        self.force_inner(id, Some(compiled), to).await
    }

    async fn force_inner(
        &self,
        id: &BreakerId,
        policy: Option<CompiledPolicy>,
        to: ForceTarget,
    ) -> Result<SharedState, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Force {
            id: id.clone(),
            policy,
            to,
            reply: tx,
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    fn send(&self, c: Command) -> Result<(), StoreError> {
        self.inner.commands.send(c).map_err(|_| StoreError::Closed)
    }

    /// The store's counters.
    pub fn stats(&self) -> StoreStats {
        self.inner.stats.snapshot()
    }

    /// How breakers should treat the shared state now.
    pub fn status(&self) -> StoreStatus {
        *self.inner.status.borrow()
    }

    /// A receiver of every status change.
    pub fn status_changes(&self) -> watch::Receiver<StoreStatus> {
        self.inner.status.clone()
    }

    /// The namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.inner.config.namespace
    }

    /// This replica's id.
    pub fn replica(&self) -> &ReplicaId {
        &self.inner.config.replica
    }

    /// The clock deadlines are given on.
    pub fn clock(&self) -> &breaker_core::Clock {
        &self.inner.config.clock
    }
}

fn degraded_status(mode: OnStoreError) -> StoreStatus {
    match mode {
        OnStoreError::Local => StoreStatus::DegradedLocal,
        OnStoreError::Open => StoreStatus::DegradedIgnoreShared,
        OnStoreError::Closed { grace } if grace.is_zero() => StoreStatus::DegradedRejectAll,
        OnStoreError::Closed { .. } => StoreStatus::DegradedLocal,
    }
}

/// One connection: RESP3 (pub/sub on the same connection), reconnecting, resubscribing, the
/// library loaded, under the connect timeout.
async fn connect(
    cfg: StoreConfig,
    proto: Arc<Protocol>,
    push_tx: mpsc::UnboundedSender<redis::PushInfo>,
) -> Result<ConnectionManager, StoreError> {
    let op = "connect";
    let mut info =
        redis::IntoConnectionInfo::into_connection_info(cfg.url.as_str()).map_err(|e| {
            StoreError::Config {
                message: cfg.redactor.redact(&e.to_string()),
            }
        })?;
    info.redis.protocol = redis::ProtocolVersion::RESP3;
    let client = client(info, &cfg)?;
    let mcfg = ConnectionManagerConfig::new()
        .set_connection_timeout(cfg.connect_timeout)
        .set_response_timeout(cfg.op_timeout)
        .set_number_of_retries(2)
        .set_max_delay(500)
        .set_push_sender(push_tx)
        .set_automatic_resubscription();
    let channel = proto.namespace_keys().channel.clone();
    let fut = async {
        let mut m = ConnectionManager::new_with_config(client, mcfg)
            .await
            .map_err(|e| cfg.redactor.error(op, &e))?;
        m.subscribe(&channel)
            .await
            .map_err(|e| cfg.redactor.error(op, &e))?;
        proto.load(&mut m).await?;
        Ok(m)
    };
    match tokio::time::timeout(cfg.connect_timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::Timeout {
            op,
            after: cfg.connect_timeout,
        }),
    }
}

#[cfg(feature = "tls")]
fn client(info: redis::ConnectionInfo, cfg: &StoreConfig) -> Result<redis::Client, StoreError> {
    let r = match &cfg.tls_root {
        Some(pem) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            },
        ),
        None => redis::Client::open(info),
    };
    r.map_err(|e| StoreError::Config {
        message: cfg.redactor.redact(&e.to_string()),
    })
}

#[cfg(not(feature = "tls"))]
fn client(info: redis::ConnectionInfo, cfg: &StoreConfig) -> Result<redis::Client, StoreError> {
    if cfg.tls_root.is_some() {
        return Err(StoreError::Config {
            message: "a TLS root certificate needs the `tls` feature of breaker-redis".into(),
        });
    }
    redis::Client::open(info).map_err(|e| StoreError::Config {
        message: cfg.redactor.redact(&e.to_string()),
    })
}

/// A breaker's newest known shared state, with the deadline as a local instant.
#[derive(Clone, Copy, Debug)]
struct View {
    generation: u64,
    state: State,
    deadline: Option<u64>,
    streak: u32,
}

impl View {
    fn high_water(&self, now: u64) -> HighWater {
        HighWater {
            generation: self.generation,
            state: self.state,
            remaining: Duration::from_nanos(self.deadline.map_or(0, |d| d.saturating_sub(now))),
            streak: self.streak,
        }
    }

    fn watched(&self) -> bool {
        self.state != State::Closed
    }
}

struct Entry {
    target: Target,
    /// Weak: the breaker owns its [`Link`], so a strong reference here would keep it alive.
    breaker: Weak<dyn SharedBreaker>,
    link: Arc<LinkState>,
    view: View,
    mismatch: bool,
}

/// A callback to a breaker, made after the coordinator's bookkeeping.
enum Call {
    Apply(Arc<dyn SharedBreaker>, RemoteUpdate),
    Grant(Arc<dyn SharedBreaker>, ProbeGrant),
    Mismatch(Arc<dyn SharedBreaker>, PolicyMismatch),
}

impl Call {
    fn run(self) {
        match self {
            Call::Apply(b, u) => b.apply_remote(&u),
            Call::Grant(b, g) => b.grant_probes(g),
            Call::Mismatch(b, m) => b.policy_mismatch(&m),
        }
    }
}

enum Event {
    Command(Command),
    Stopped,
    Wake,
    Push(redis::PushInfo),
    Connected(Result<ConnectionManager, StoreError>),
    Flush,
    Retry,
}

struct Coordinator {
    cfg: StoreConfig,
    ns: String,
    proto: Arc<Protocol>,
    shared: Arc<Shared>,
    stats: Arc<Stats>,
    ids: Arc<Mutex<HashSet<BreakerId>>>,
    status_tx: watch::Sender<StoreStatus>,
    status: StoreStatus,
    entries: HashMap<u32, Entry>,
    by_id: HashMap<BreakerId, u32>,
    reg_rx: mpsc::UnboundedReceiver<Registration>,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    push_rx: mpsc::UnboundedReceiver<redis::PushInfo>,
    push_tx: mpsc::UnboundedSender<redis::PushInfo>,
    conn: Option<ConnectionManager>,
    connecting: Option<tokio::task::JoinHandle<Result<ConnectionManager, StoreError>>>,
    health: StoreBreaker,
    next_flush: Instant,
    early_used: bool,
    /// Registered since the last poll: their shared state is read at once.
    fresh: Vec<u32>,
    rng: rand::rngs::SmallRng,
}

impl Coordinator {
    async fn run(mut self) {
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
    fn wake_for_health(&self) -> Option<Instant> {
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

    fn grace_check(&mut self) {
        if let (OnStoreError::Closed { grace }, Some(since)) =
            (self.cfg.on_error, self.health.degraded_since())
        {
            if Instant::now() >= since + grace {
                self.set_status(StoreStatus::DegradedRejectAll);
            }
        }
    }

    fn maybe_connect(&mut self) {
        if self.conn.is_none() && self.connecting.is_none() && self.health.allows(Instant::now()) {
            let fut = connect(
                self.cfg.clone(),
                Arc::clone(&self.proto),
                self.push_tx.clone(),
            );
            self.connecting = Some(tokio::spawn(fut));
        }
    }

    fn schedule_flush(&mut self) {
        use rand::Rng;
        let j = self.cfg.flush_jitter;
        let f = if j > 0.0 {
            self.rng.gen_range(1.0 - j..=1.0 + j)
        } else {
            1.0
        };
        self.next_flush = Instant::now() + self.cfg.flush_interval.mul_f64(f);
    }

    fn ready(&self) -> Option<ConnectionManager> {
        if self.health.allows(Instant::now()) {
            self.conn.clone()
        } else {
            None
        }
    }

    fn drain_registrations(&mut self) {
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

    fn unregister(&mut self, idx: u32) {
        if let Some(e) = self.entries.remove(&idx) {
            self.by_id.remove(&e.target.id);
            self.ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&e.target.id);
        }
    }

    fn set_status(&mut self, s: StoreStatus) {
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

    fn record_success(&mut self) {
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
            // Re-adopt the shared state at once.
            self.next_flush = Instant::now();
        }
    }

    fn record_failure(&mut self, e: &StoreError) {
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

    fn rtt(&self, d: Duration) {
        self.stats.rtt(&self.ns, d);
    }

    async fn timed<T>(
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

    /// Folds one checked reply item into the breaker's view; returns the callbacks to make.
    fn absorb(&mut self, idx: u32, it: &ItemReply, recv: u64, calls: &mut Vec<Call>) {
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
        }
    }

    async fn flush(&mut self) -> Result<usize, StoreError> {
        self.drain_registrations();
        let now = self.cfg.clock.now_nanos();
        let mut idxs =
            std::mem::take(&mut *self.shared.active.lock().unwrap_or_else(|e| e.into_inner()));
        let fresh: HashSet<u32> = self.fresh.drain(..).collect();
        idxs.extend(fresh.iter().copied());
        idxs.extend(
            self.entries
                .iter()
                .filter(|(_, e)| e.view.watched())
                .map(|(i, _)| *i),
        );
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
            if d.is_empty() && !e.view.watched() && !fresh.contains(&idx) {
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
        let calls = items.len().div_ceil(crate::protocol::MAX_BREAKERS_PER_CALL) as u64;
        let sent = Instant::now();
        let r = self
            .timed("flush", self.proto.flush(&mut conn, &items))
            .await;
        drop(items);
        add(&self.stats.operations, calls);
        add(&self.stats.round_trips, 1);
        match r {
            Ok(reply) => {
                self.rtt(sent.elapsed());
                add(&self.stats.flushes, calls);
                health::metrics_count(&self.ns, "breaker_store_flushes_total", calls);
                self.record_success();
                let recv = self.cfg.clock.now_nanos();
                let mut cbs = Vec::new();
                for ((idx, _, _), it) in batch.iter().zip(&reply.items) {
                    self.absorb(*idx, it, recv, &mut cbs);
                }
                cbs.into_iter().for_each(Call::run);
                Ok(batch.len())
            }
            Err(e) => {
                if counted {
                    add(&self.stats.dropped_flushes, 1);
                    health::metrics_count(&self.ns, "breaker_store_dropped_flushes_total", 1);
                }
                self.record_failure(&e);
                Err(e)
            }
        }
    }

    /// Reads the shared state of newly registered breakers (one operation for all of them).
    async fn poll_fresh(&mut self) {
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
        let calls = items.len().div_ceil(crate::protocol::MAX_BREAKERS_PER_CALL) as u64;
        let sent = Instant::now();
        let r = self
            .timed("flush", self.proto.flush(&mut conn, &items))
            .await;
        drop(items);
        add(&self.stats.operations, calls);
        add(&self.stats.round_trips, 1);
        match r {
            Ok(reply) => {
                self.rtt(sent.elapsed());
                self.record_success();
                let recv = self.cfg.clock.now_nanos();
                let mut cbs = Vec::new();
                for (idx, it) in idxs.iter().zip(&reply.items) {
                    self.absorb(*idx, it, recv, &mut cbs);
                }
                cbs.into_iter().for_each(Call::run);
            }
            Err(e) => self.record_failure(&e),
        }
    }

    async fn urgent(&mut self) {
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
                Done::Item(idx, timed("trip")(r))
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

    async fn command(&mut self, c: Command) {
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

    fn push(&mut self, p: redis::PushInfo) {
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
            if let Some(b) = e.breaker.upgrade() {
                b.apply_remote(&u);
            }
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
