//! The store handle and its coordinator: one task per store connection, for all breakers.
//!
//! # Why one task per connection
//! A million keyed breakers must not cost a million tasks or timers. The coordinator owns the
//! connection and every registered breaker's view of the store; breakers reach it only through
//! their link (an atomic flag per flush interval, a queue for the rare urgent operations). It
//! wakes for:
//!
//! - the flush timer (every `flush_interval`, jittered): the counts of the breakers that were
//!   *active* since the last flush go to the store (`add`, in one operation, a pipeline when
//!   more than 512), with a `read` of the breakers whose fleet state is not closed (so a lost
//!   push costs at most one interval), in one round trip (several of at most
//!   4,096 breakers each, one
//!   after another, each under the timeout, for a batch that large). Idle breakers are not
//!   touched and cost nothing;
//! - urgent operations (a local trip, a probe-lease request, a probe's end, an early flush):
//!   sent at once, one round trip for the batch; probe requests of one breaker queued together
//!   are merged into one operation;
//! - published transitions (pub/sub on the same RESP3 connection, resubscribed after a
//!   reconnect);
//! - commands of the [`Store`] handle (flush now, force, reset, sync);
//! - the answers of its operations.
//!
//! # Nothing waits behind a hung store
//! The coordinator never awaits the store: every operation runs as its own future beside the
//! loop, under the operation timeout, and its answer comes back as an event. So a hung flush
//! delays no command (`sync`, `force`, `reset` are served at once, each bounded by its own
//! timeout), no urgent operation and no push; one flush is in flight at a time.
//!
//! # No late effects
//! Every operation carries `valid_until`: this replica's estimate of the store's clock plus the
//! operation timeout. The estimate is the newest reply's server time plus the local time since
//! it arrived (before the first reply of a connection, the server's `TIME` read when
//! connecting): it never runs ahead of the store's clock, so an operation the client gave up on
//! (timed out) never takes effect later, when a hung server resumes. `valid_until` is
//! exclusive: the script runs an operation only in a server millisecond *before* it, since the
//! estimate is floored to the millisecond while the client gives up at the exact timeout (a run
//! in the millisecond equal to `valid_until` may come after the client gave up). A call whose
//! every item answers `expired` is a failed operation, as its timeout would have been: the
//! store's breaker counts it, and a reconciliation after a fault that failed or expired is made
//! again with the next flush.
//!
//! A lease request is idempotent by a nonce: the leases it grants are named after it, and a
//! request that got no answer (timed out, failed) stays pending for its breaker. The next lease
//! request re-sends the same nonce and gets the leases it was granted, if its reply was lost
//! (and no more); any other compare-and-set of the breaker carries the nonce to release them
//! (the replica no longer wants a probe). A lost reply costs one retry, never a lease time of
//! rejections.
//!
//! # Reconciled after every store fault
//! Every answer is checked against this replica's view of the breaker (`plan.rs`): a word
//! missing while it was known, or older than the view, means the store lost it, and it is seeded
//! again from the local breaker's state *now*; a newer one is adopted. A new epoch of the
//! namespace (restarted empty, flushed) and the end of every degraded period reconcile every
//! registered breaker. Deadlines are converted on receipt: `local deadline = local now at
//! receipt + (server deadline - server now)`, both server readings from the same reply, so
//! replicas' clocks are never compared.
//!
//! # Files
//! - `mod.rs`: the [`Store`] handle, connecting, and the coordinator's state.
//! - `coordinator.rs`: the coordinator's loop, its connection, the store's health and the
//!   operations it launches.
//! - `ops.rs`: what the coordinator does with each answer, command and push.

use crate::config::{OnStoreError, StoreConfig};
use crate::error::StoreError;
use crate::health::{self, add, Change, Stats, StoreBreaker, StoreStats};
use crate::link::FleetView;
use crate::link::{Deltas, Link, LinkState, Shared, SharedBreaker, StoreStatus};
use crate::names::{BreakerId, Namespace, ReplicaId};
use crate::plan::View;
use crate::protocol::{Params, Protocol, Reply, Target};
use breaker_core::breaker::{BreakerPolicy, State, TransitionReason};
use futures_util::stream::FuturesUnordered;
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
    /// The breaker's policy cannot run in its scope (the one validator's errors, every one).
    #[error("cannot share breaker `{}`: {errors}", .breaker.escape_debug())]
    Policy {
        /// The breaker's name.
        breaker: String,
        /// What the validator found.
        errors: breaker_core::policy::ValidationError,
    },
    /// The breaker's name (or key) is not a valid shared breaker id.
    #[error("cannot share this breaker: {0}")]
    Name(crate::names::NameError),
    /// The breaker cannot take the fleet hook: it is shared already (with another store). The
    /// message shows the name escaped.
    #[error("cannot share breaker `{}`: {reason}", .breaker.escape_debug())]
    NotShareable {
        /// The breaker's name.
        breaker: String,
        /// Why.
        reason: breaker_core::breaker::HookError,
    },
}

/// The targets of [`Store::force`]: a fleet-wide manual change.
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

impl ForceTarget {
    fn state(self) -> State {
        match self {
            ForceTarget::Reset => State::Closed,
            ForceTarget::Open => State::Open,
            ForceTarget::ForcedOpen => State::ForcedOpen,
            ForceTarget::ForcedClosed => State::ForcedClosed,
        }
    }
}

enum Command {
    FlushNow(oneshot::Sender<Result<usize, StoreError>>),
    Sync(oneshot::Sender<Result<(), StoreError>>),
    Force {
        id: BreakerId,
        policy: Option<Arc<BreakerPolicy>>,
        to: ForceTarget,
        reply: oneshot::Sender<Result<FleetView, StoreError>>,
    },
}

struct Registration {
    idx: u32,
    target: Arc<Target>,
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

/// A connected store: the handle breakers are shared through, and fleet-wide manual control.
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
        conn: Option<Connected>,
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
        let mut coordinator = Coordinator {
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
            conn: None,
            connecting: None,
            health,
            next_flush: now + config.flush_interval,
            early_used: false,
            early_pending: false,
            unread: HashSet::new(),
            reading_unread: false,
            sync_error: None,
            unread_error: None,
            unsent_trips: Vec::new(),
            reconcile_again: false,
            sweep: Vec::new(),
            rng: rand::rngs::SmallRng::from_entropy(),
            // Random, so a restarted process with the same replica id reuses no nonce.
            next_nonce: rand::Rng::gen_range(&mut rand::thread_rng(), 0..1u64 << 48),
            server: None,
            epoch: None,
            ops: FuturesUnordered::new(),
            flushing: false,
            flush_again: Vec::new(),
            urgent_in_flight: 0,
            syncs: Vec::new(),
        };
        if let Some(c) = conn {
            coordinator.connected(c);
        }
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

    /// Registers a local breaker as the shared breaker `id` with `params`; the returned link
    /// is the breaker's handle (dropping it unregisters the breaker).
    pub(crate) fn register(
        &self,
        id: BreakerId,
        params: Params,
        breaker: Arc<dyn SharedBreaker>,
    ) -> Result<Link, RegisterError> {
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
        let target = Arc::new(Target::new(
            &self.inner.config.namespace,
            id.clone(),
            params,
        ));
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

    /// The live registrations' fleet sides, by id (see `fleet/lookup.rs`).
    pub(crate) fn registered(&self) -> Vec<(BreakerId, Arc<dyn SharedBreaker>)> {
        let ids = self.inner.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter()
            .filter_map(|(id, (_, b))| Some((id.clone(), b.upgrade()?)))
            .collect()
    }

    /// The live registration of `id`'s fleet side.
    pub(crate) fn registered_as(&self, id: &BreakerId) -> Option<Arc<dyn SharedBreaker>> {
        let ids = self.inner.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.get(id).and_then(|(_, b)| b.upgrade())
    }

    /// Flushes now (instead of waiting for the timer): the number of breakers sent, 0 when no
    /// breaker was active. A flush in flight is waited for, then another one is sent.
    ///
    /// # Errors
    /// The store's error; [`StoreError::Degraded`] when its breaker is open.
    pub async fn flush_now(&self) -> Result<usize, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::FlushNow(tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Waits until every urgent operation (the first read of the fleet's state of a breaker
    /// shared before, local trips, probe leases and their ends, and what their answers lead
    /// to) queued before this call has been answered. It never waits for a flush.
    ///
    /// # Errors
    /// The first of those operations' errors, or why a first read is not answered yet:
    /// [`StoreError::Timeout`] for one the store did not answer in time, or
    /// [`StoreError::Degraded`] when the store's breaker is open or no connection is made yet,
    /// so it could not be sent. The breakers decide locally meanwhile (as [`OnStoreError`]
    /// says), and their first read is sent again until the store answers: at once after a
    /// failure while the store's breaker allows, then by every `sync` and flush once its
    /// breaker allows again (its cooldown: 1 s doubling to 30 s by default, see
    /// [`StoreConfig::store_breaker`]). `Ok` means every breaker shared before the call knows
    /// the fleet's state. [`StoreError::Closed`] if the coordinator has stopped.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Sync(tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Fleet-wide manual control of the registered breaker `id`: every replica sees it (push,
    /// or its next flush). Decided by the core's `force` on the store's word.
    ///
    /// # Errors
    /// The store's error; [`StoreError::Config`] if `id` is not registered here (see
    /// [`force_with_policy`](Self::force_with_policy)).
    pub async fn force(&self, id: &BreakerId, to: ForceTarget) -> Result<FleetView, StoreError> {
        self.force_inner(id, None, to).await
    }

    /// Fleet-wide reset of the registered breaker `id`: closed, window and streak cleared.
    ///
    /// # Errors
    /// As [`force`](Self::force).
    pub async fn reset(&self, id: &BreakerId) -> Result<FleetView, StoreError> {
        self.force_inner(id, None, ForceTarget::Reset).await
    }

    /// Manual control of a breaker that is not registered with this store (an operator's
    /// tool): `policy` gives its cooldown, probes and window.
    ///
    /// # Errors
    /// The store's error, or [`StoreError::Config`] for a policy the one validator refuses.
    pub async fn force_with_policy(
        &self,
        id: &BreakerId,
        policy: &BreakerPolicy,
        to: ForceTarget,
    ) -> Result<FleetView, StoreError> {
        crate::policy::params(policy, breaker_core::scope::Scope::Shared).map_err(|e| {
            StoreError::Config {
                message: e.to_string(),
            }
        })?;
        self.force_inner(id, Some(Arc::new(policy.clone())), to)
            .await
    }

    async fn force_inner(
        &self,
        id: &BreakerId,
        policy: Option<Arc<BreakerPolicy>>,
        to: ForceTarget,
    ) -> Result<FleetView, StoreError> {
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

/// A made connection with the server's clock read on it (the first estimate of the store's
/// time, for `valid_until`).
pub(crate) struct Connected {
    conn: ConnectionManager,
    server_ms: u64,
    local_nanos: u64,
}

/// One connection: RESP3 (pub/sub on the same connection), reconnecting, resubscribing, the
/// library loaded, the server's clock read, under the connect timeout.
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
) -> Result<Connected, StoreError> {
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
        let server_ms = proto.server_time(&mut m).await?;
        Ok(Connected {
            conn: m,
            server_ms,
            local_nanos: cfg.clock.now_nanos(),
        })
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

struct Entry {
    target: Arc<Target>,
    /// Weak: the breaker owns its [`Link`], so a strong reference here would keep it alive.
    breaker: Weak<dyn SharedBreaker>,
    link: Arc<LinkState>,
    view: View,
    /// Counts a flush could not deliver because the store had lost the breaker: sent with the
    /// next flush, once the breaker is seeded again.
    carry: Deltas,
    mismatch: bool,
    /// The nonce of a lease request that got no answer (timed out, failed): the next lease
    /// request re-sends it (and gets the leases it was granted, if its reply was lost), any
    /// other compare-and-set releases them.
    nonce: Option<u64>,
    /// Lease requests carrying `nonce` in flight (sent, their answer or failure not yet
    /// handled): while there is one, no other compare-and-set carries the nonce.
    acquiring: u32,
}

/// The store's clock as this replica estimates it: a server reading and the local reading
/// when it arrived.
#[derive(Clone, Copy, Debug)]
struct ServerClock {
    server_ms: u64,
    local_nanos: u64,
}

impl ServerClock {
    /// The server's time now by this estimate, ms: never ahead of the server's clock (the
    /// reply's own latency is left out).
    fn estimate(&self, local_nanos: u64) -> u64 {
        self.server_ms + local_nanos.saturating_sub(self.local_nanos) / 1_000_000
    }
}

/// A finished store operation, with what it was for.
struct Done {
    what: What,
    /// Whether it was an urgent operation (`sync` waits for those).
    urgent: bool,
    /// The replies of its round trips that were answered, and the error that stopped it.
    result: (Vec<Reply>, Option<StoreError>),
    /// When it was sent.
    sent: Instant,
    /// Calls and round trips it made.
    calls: u64,
    round_trips: u64,
}

/// What an operation was for.
enum What {
    /// A flush: `add` of `adds` (with the counts sent) and `read` of `reads`, in round trips
    /// of `rounds` (items per round trip: adds, reads).
    Flush {
        adds: Vec<(u32, Deltas)>,
        reads: Vec<u32>,
        rounds: Vec<(usize, usize)>,
        waiters: Vec<oneshot::Sender<Result<usize, StoreError>>>,
        /// The health probe of a degraded store: its reads reconcile every breaker.
        after_fault: bool,
    },
    /// A read of `idxs`; `after_fault`: the reconciliation after a fault.
    Read { idxs: Vec<u32>, after_fault: bool },
    /// A vote of `idx` for its word `expect`.
    Vote {
        idx: u32,
        expect: breaker_core::breaker::decide::Word,
    },
    /// Compare-and-sets, one per job.
    Cas(Vec<CasJob>),
}

impl What {
    /// The operation's name in errors.
    fn op(&self) -> &'static str {
        match self {
            What::Flush { .. } => "flush",
            What::Read { .. } => "read",
            What::Vote { .. } => "vote",
            What::Cas(_) => "cas",
        }
    }
}

/// One compare-and-set and what it was for.
struct CasJob {
    /// The registered breaker (`None`: an unregistered one, forced by an operator).
    idx: Option<u32>,
    target: Arc<Target>,
    write: crate::plan::Write,
    not_before: u64,
    join: bool,
    want: u32,
    release: Option<Arc<str>>,
    /// The lease request nonce it carries (set when it is sent).
    nonce: Option<u64>,
    kind: CasKind,
    /// Attempts so far (a compare-and-set that lost to another replica's is decided again on
    /// the word that won, a bounded number of times).
    tries: u8,
}

impl CasJob {
    /// A compare-and-set of `write` that asks for no lease and releases none: a trip, a
    /// reconciliation, a manual change (the others set their fields on it).
    fn write(
        idx: Option<u32>,
        target: Arc<Target>,
        write: crate::plan::Write,
        kind: CasKind,
    ) -> Self {
        CasJob {
            idx,
            target,
            write,
            not_before: 0,
            join: false,
            want: 0,
            release: None,
            nonce: None,
            kind,
            tries: 0,
        }
    }
}

enum CasKind {
    /// A local trip (or the fleet rate's, or a quorum's).
    Trip,
    /// A lease request for `want` leases.
    Acquire,
    /// A probe's end.
    End {
        lease: crate::protocol::Lease,
        end: breaker_core::breaker::decide::ProbeEnd,
    },
    /// A manual change.
    Force {
        to: ForceTarget,
        policy: Arc<BreakerPolicy>,
        reply: Option<oneshot::Sender<Result<FleetView, StoreError>>>,
    },
    /// A reconciliation's write (a seed, a close).
    Reconcile,
}

/// A `sync` caller: its answer, and the breakers not read when it asked.
type SyncWaiter = (oneshot::Sender<Result<(), StoreError>>, Vec<u32>);

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
    /// The entries whose view is not closed: every flush reads them, and keeping them apart
    /// spares a healthy flush a walk of every entry.
    watched: HashSet<u32>,
    by_id: HashMap<BreakerId, u32>,
    reg_rx: mpsc::UnboundedReceiver<Registration>,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    push_rx: mpsc::UnboundedReceiver<redis::PushInfo>,
    push_tx: mpsc::UnboundedSender<redis::PushInfo>,
    conn: Option<ConnectionManager>,
    connecting: Option<tokio::task::JoinHandle<Result<Connected, StoreError>>>,
    health: StoreBreaker,
    next_flush: Instant,
    early_used: bool,
    /// An early flush asked for while a flush was in flight: sent when it is answered.
    early_pending: bool,
    /// Registered breakers whose fleet state has not been read yet: read at once, and until
    /// the store answers for them (a read that failed is sent again, and every flush reads
    /// them), so a replica that joined during a fault learns of an open fleet when it ends.
    unread: HashSet<u32>,
    /// Whether a read of `unread` is in flight.
    reading_unread: bool,
    /// Local trips the store never received (the operation failed while the store was not
    /// degraded): sent again at the next flush.
    unsent_trips: Vec<(u32, TransitionReason)>,
    /// The reconciliation after a fault failed (or expired): every breaker is read again with
    /// the next flush.
    reconcile_again: bool,
    /// The breakers still to visit in the current sweep for unused ones (see
    /// [`SharedBreaker::release_if_unused`]), refilled when empty.
    sweep: Vec<u32>,
    rng: rand::rngs::SmallRng,
    /// The last lease request nonce drawn (below 2^53).
    next_nonce: u64,
    /// The store's clock as estimated from its newest reply.
    server: Option<ServerClock>,
    /// The namespace's epoch as last answered.
    epoch: Option<Arc<str>>,
    /// The operations in flight.
    ops: FuturesUnordered<std::pin::Pin<Box<dyn std::future::Future<Output = Done> + Send>>>,
    /// Whether a flush is in flight.
    flushing: bool,
    /// `flush_now` callers waiting for the next flush (one was in flight when they asked).
    flush_again: Vec<oneshot::Sender<Result<usize, StoreError>>>,
    /// Urgent operations (and the ones their answers led to) in flight.
    urgent_in_flight: usize,
    /// `sync` callers waiting until none is.
    syncs: Vec<SyncWaiter>,
    /// The first error of an urgent operation other than a first read since the waiting
    /// `sync` callers asked.
    sync_error: Option<StoreError>,
    /// Why the last first read failed or could not be sent (`None` after one answered).
    unread_error: Option<StoreError>,
}
