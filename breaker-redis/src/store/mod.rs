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
//!   lost push costs at most one interval), go to the store in one operation (a pipeline
//!   when more than 512), or in several round trips of at most [`MAX_BREAKERS_PER_ROUND_TRIP`](crate::protocol::MAX_BREAKERS_PER_ROUND_TRIP) breakers
//!   each, one after another, each under the timeout: a flush of every breaker (the first
//!   after many registrations, or the health probe of a degraded store, below) must not fail
//!   for its size alone. Idle breakers are not touched and cost nothing;
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
//!
//! # Files
//! - `mod.rs`: the [`Store`] handle, connecting, and the coordinator's state (its views of
//!   the registered breakers).
//! - `coordinator.rs`: the coordinator's loop, its connection and the store's health.
//! - `ops.rs`: the coordinator's operations: flushes, urgent operations, the handle's
//!   commands and published transitions.

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
    Code, FlushItem, ForceTarget, HighWater, ItemReply, Protocol, Reason, SharedState, Target,
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

mod coordinator;
mod ops;

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
    /// The breaker cannot take the fleet hook: it is shared already (with another store), or
    /// it was made without room for one. The message shows the name escaped.
    #[error("cannot share breaker `{}`: {reason}", .breaker.escape_debug())]
    NotShareable {
        /// The breaker's name.
        breaker: String,
        /// Why.
        reason: breaker_core::breaker::HookError,
    },
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
    ids: Arc<Mutex<Ids>>,
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
    /// degraded and connect in the background instead:
    /// - as soon as the first attempt fails, its error: [`StoreError::Unavailable`] (`op`
    ///   `"connect"`, the client's words in `message`, credentials removed) when the store
    ///   cannot be reached (connection refused or reset, an unknown host, a failed TLS
    ///   handshake), [`StoreError::Auth`] when the server refused the URL's user name or
    ///   password, or what else the server answered;
    /// - [`StoreError::Timeout`] (`op` `"connect"`, `after` the connect timeout) when the
    ///   store is slow: connecting, the handshake and loading the scripts did not finish
    ///   within the connect timeout;
    /// - [`StoreError::Config`] for a URL or TLS settings the client cannot use.
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
        let ids = Arc::new(Mutex::new(HashMap::new()));
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
            watched: HashSet::new(),
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
            unsent_trips: Vec::new(),
            sweep: Vec::new(),
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
        let idx = self.inner.next_idx.fetch_add(1, Ordering::Relaxed);
        {
            let mut ids = self.inner.ids.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, old)) = ids.get(&id) {
                // A registration whose breaker nothing uses any more (a keyed breaker evicted
                // and made again before the sweep found it) ends now and is replaced; its
                // link's unregistration, queued, leaves this one alone.
                let ended = old.upgrade().map_or(true, |b| b.release_if_unused());
                if !ended {
                    return Err(RegisterError::Duplicate(id));
                }
            }
            ids.insert(id.clone(), (idx, Arc::downgrade(&breaker)));
        }
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
///
/// The first attempt is made alone, without the connection manager's retries: the manager
/// retries a failed connect twice with backoff (1 s, then 0.5 s, each plus up to as much
/// jitter), so a refused connection used to read as a `Timeout` at the end of a connect
/// timeout shorter than that (1 s by default). A failed first attempt is returned at once, as
/// what it is (`Unavailable` for a refusal); a made one loads the library and is closed, and
/// the manager then makes the connection it keeps, with its reconnection (backoff,
/// resubscription) for every loss after start-up.
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
        // One attempt per reconnection (the store's breaker is the backoff): a retried one
        // outlasted `op_timeout`, so a refused password read as a timeout.
        .set_number_of_retries(0)
        .set_max_delay(500)
        .set_push_sender(push_tx)
        .set_automatic_resubscription();
    // No timeouts of its own: the connect timeout bounds the connect, the handshake and the
    // load, so a slow store reads as `Timeout { op: "connect", after: connect_timeout }`.
    let first = redis::AsyncConnectionConfig::new();
    let channel = proto.namespace_keys().channel.clone();
    let fut = async {
        let mut probe = client
            .get_multiplexed_async_connection_with_config(&first)
            .await
            .map_err(|e| cfg.redactor.error(op, &e))?;
        proto.load(&mut probe).await?;
        drop(probe);
        let mut m = ConnectionManager::new_with_config(client, mcfg)
            .await
            .map_err(|e| cfg.redactor.error(op, &e))?;
        m.subscribe(&channel)
            .await
            .map_err(|e| cfg.redactor.error(op, &e))?;
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

/// The registered ids, with the registration in force of each.
type Ids = HashMap<BreakerId, (u32, Weak<dyn SharedBreaker>)>;

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
    ids: Arc<Mutex<Ids>>,
    status_tx: watch::Sender<StoreStatus>,
    status: StoreStatus,
    entries: HashMap<u32, Entry>,
    /// The entries whose view is not closed ([`View::watched`]): every flush carries them,
    /// and keeping them apart spares a healthy flush a walk of every entry.
    watched: HashSet<u32>,
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
    /// Local trips the store never received (it was unreachable, or the operation failed):
    /// sent again when it is back, one per breaker (the latest), so a trip made during an
    /// outage reaches the fleet after it (fenced by its generation like any other).
    unsent_trips: Vec<(u32, u64, Reason)>,
    /// The breakers still to visit in the current sweep for unused ones (see
    /// [`SharedBreaker::release_if_unused`]), refilled when empty.
    sweep: Vec<u32>,
    rng: rand::rngs::SmallRng,
}
