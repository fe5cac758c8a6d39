//! [`Admin`] and its builder: what is shown, who may act, and the sampler's task.

use crate::auth::Tokens;
use crate::catalog::{Item, Keys, PipelineRef, Sources};
use crate::events::{Bus, Event};
use crate::latency::Histogram;
use crate::sampler::{lock, Sampler};
use crate::service::{AdminService, Body};
use crate::transitions::Transitions;
use breaker_core::breaker::{CircuitBreaker, Watch};
use breaker_core::clock::Clock;
use breaker_core::config::{LivePipeline, PolicyRegistry};
use breaker_core::pipeline::Pipeline;
use breaker_core::record::Recorder;
use breaker_core::registry::Registry;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use std::convert::Infallible;
use std::fmt::{self, Display};
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tower::util::BoxCloneSyncService;
use tower_layer::Layer;
use tower_service::Service;

/// The default sampling interval ([`AdminBuilder::sample_every`]).
pub const DEFAULT_SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The default history kept per breaker ([`AdminBuilder::history`]).
pub const DEFAULT_HISTORY: Duration = Duration::from_secs(120);
/// The default size of the event ring ([`AdminBuilder::event_buffer`]).
pub const DEFAULT_EVENT_BUFFER: usize = 256;
/// The default bound on event-stream readers ([`AdminBuilder::max_event_readers`]).
pub const DEFAULT_MAX_EVENT_READERS: usize = 4096;
/// The largest request body an admin action may have, in bytes; a larger one gets
/// `413 Payload Too Large` without being read.
pub const MAX_BODY_BYTES: usize = 4096;

/// An admin action on one breaker (or one key's breaker), as named in the API
/// (`{"action": "force-open"}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// `force-open`: reject every call until `reset` or `force-closed`
    /// ([`CircuitBreaker::force_open`]).
    ForceOpen,
    /// `force-closed`: admit every call and record nothing until `reset` or `force-open`
    /// ([`CircuitBreaker::force_closed`]).
    ForceClosed,
    /// `disable`: the breaker stops protecting: the same state as `force-closed` (admits every
    /// call, records nothing), named as Resilience4j's `DISABLED` for operators who look for it.
    Disable,
    /// `reset`: back to a fresh closed state, every count cleared ([`CircuitBreaker::reset`]).
    Reset,
}

impl Action {
    /// Every action, in the order the API lists them.
    pub const ALL: [Action; 4] = [
        Action::ForceOpen,
        Action::ForceClosed,
        Action::Disable,
        Action::Reset,
    ];

    /// The API name: `force-open`, `force-closed`, `disable`, `reset`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::ForceOpen => "force-open",
            Action::ForceClosed => "force-closed",
            Action::Disable => "disable",
            Action::Reset => "reset",
        }
    }

    /// The action named `name` (an API name).
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Applies the action to the local breaker.
    pub fn apply(self, breaker: &CircuitBreaker) {
        match self {
            Action::ForceOpen => breaker.force_open(),
            Action::ForceClosed | Action::Disable => breaker.force_closed(),
            Action::Reset => breaker.reset(),
        }
    }
}

impl Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The service a user-supplied auth layer wraps: it carries out admin requests (actions and
/// reloads) that reached it, with the caller named by a [`Principal`](crate::Principal) extension if the layer
/// set one. See [`AdminBuilder::admin_layer`].
#[derive(Clone)]
pub struct Actions {
    /// Set when the admin is built (the layer is given before).
    pub(crate) inner: Arc<OnceLock<Weak<Inner>>>,
}

impl fmt::Debug for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Actions").finish_non_exhaustive()
    }
}

impl Service<Request<Full<Bytes>>> for Actions {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Full<Bytes>>) -> Self::Future {
        let inner = self.inner.get().and_then(Weak::upgrade);
        Box::pin(async move {
            Ok(match inner {
                Some(inner) => crate::service::act(inner, req).await,
                None => crate::service::gone(),
            })
        })
    }
}

/// Who may carry out admin actions.
pub(crate) enum Guard {
    /// Nobody: admin routes answer 403.
    Off,
    /// Requests with one of these bearer tokens.
    Tokens(Tokens),
    /// Whatever the user's layer lets through to [`Actions`].
    Layer(BoxCloneSyncService<Request<Full<Bytes>>, Response<Body>, Infallible>),
}

/// Everything an [`Admin`] shares with its services and its sampler task.
pub(crate) struct Inner {
    /// What is shown; the builder fills it, [`Admin::add_breaker`] and its kin add to it.
    pub(crate) sources: std::sync::RwLock<Sources>,
    pub(crate) guard: Guard,
    pub(crate) sampler: Sampler,
    pub(crate) bus: Arc<Bus>,
    /// The breakers' own transitions, queued until the sampler's task publishes them.
    transitions: Arc<Transitions>,
    /// Keeps the watcher that fills `transitions` registered while the admin lives.
    _watch: Watch,
    started: tokio::time::Instant,
}

impl Inner {
    /// Milliseconds on the admin's clock (tokio's) since it was built.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn items(&self) -> Vec<Item> {
        self.sources().list()
    }

    pub(crate) fn sources(&self) -> std::sync::RwLockReadGuard<'_, Sources> {
        self.sources.read().unwrap_or_else(|e| e.into_inner())
    }

    fn sources_mut(&self) -> std::sync::RwLockWriteGuard<'_, Sources> {
        self.sources.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn publish(&self, event: Event) {
        self.bus.publish(event);
    }

    /// Publishes the transitions queued so far (those an admin action just made), then
    /// `event`: a reader sees a transition before the action that caused it, not a tick later.
    pub(crate) fn publish_after_transitions(&self, event: Event) {
        let items = self.items();
        self.transitions.forward(&items, &self.bus, self.now_ms());
        self.bus.publish(event);
    }

    /// Publishes the transitions queued since the last call, one event each, then what a
    /// reading of every row shows; returns how many events it published.
    fn sample(&self) -> usize {
        let items = self.items();
        self.transitions.show(self.sources().names(&items));
        let now = self.now_ms();
        self.transitions.forward(&items, &self.bus, now) + self.sampler.tick(&items, &self.bus, now)
    }

    /// Queues the transitions of every breaker shown now (after a breaker is added).
    fn show_names(&self) {
        let items = self.items();
        self.transitions.show(self.sources().names(&items));
    }
}

/// The status API, event stream, dashboard and admin actions of a process's circuit breakers.
/// Cloning is cheap; clones share everything. See the [crate docs](crate).
#[derive(Clone)]
pub struct Admin {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admin")
            .field("sample_every", &self.inner.sampler.every)
            .field("admin", &!matches!(self.inner.guard, Guard::Off))
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// Starts configuring an admin: every policy of the installed registry and every
    /// `#[circuit_breaker]` function are shown; nothing else until added; admin actions off.
    pub fn builder() -> AdminBuilder {
        AdminBuilder {
            sources: Sources {
                annotated: true,
                ..Sources::default()
            },
            tokens: Tokens::default(),
            layer: None,
            slot: Arc::default(),
            every: DEFAULT_SAMPLE_EVERY,
            history: DEFAULT_HISTORY,
            buffer: DEFAULT_EVENT_BUFFER,
            max_readers: DEFAULT_MAX_EVENT_READERS,
        }
    }

    /// The tower [`Service`] of the status API, the event stream, the dashboard and the admin
    /// actions, to mount in a server the program already has (axum's `nest_service`, a hyper
    /// `service_fn`, tonic's `add_optional_service`...). Mount it under a path that ends with
    /// `/` (the dashboard's links are relative).
    pub fn service(&self) -> AdminService {
        AdminService {
            inner: Arc::clone(&self.inner),
        }
    }

    /// A [`Recorder`] that feeds the latency percentiles of the row named `name` (a breaker's
    /// name, or the id of a row): give it to the pipeline that runs the breaker
    /// ([`PipelineBuilder::recorder`](breaker_core::pipeline::PipelineBuilder::recorder), or
    /// `record = path` on `#[circuit_breaker]`, where `path` returns it). Each attempt costs
    /// two clock reads and one relaxed atomic add; without a recorder a row shows no latency.
    /// Recorders for one name share one histogram.
    pub fn recorder(&self, name: &str) -> Recorder {
        self.recorder_with_clock(name, Clock::system())
    }

    /// As [`recorder`](Self::recorder), timing attempts with `clock` (tests use the tokio
    /// clock on a paused runtime, or a manual clock).
    pub fn recorder_with_clock(&self, name: &str, clock: Clock) -> Recorder {
        let histogram = Arc::clone(
            lock(&self.inner.sampler.histograms)
                .entry(name.to_owned())
                .or_insert_with(|| Arc::new(Histogram::new())),
        );
        Recorder::builder()
            .clock(clock)
            .to_sink(move |e| histogram.record(e))
    }

    /// Does now what the sampler does every interval: publishes the transitions the breakers
    /// made since (one event each), then reads every breaker and publishes what changed
    /// (rejections, keyed groups' counts); returns how many events it published.
    pub fn sample_now(&self) -> usize {
        self.inner.sample()
    }

    /// The event-stream readers connected now.
    pub fn event_readers(&self) -> usize {
        self.inner.bus.readers()
    }

    /// Shows `breaker` as `name` from now on, as [`AdminBuilder::breaker_named`] does, for a
    /// breaker made after the admin (one built on demand, say).
    pub fn add_breaker(&self, name: impl Into<String>, breaker: &CircuitBreaker) {
        self.inner
            .sources_mut()
            .breakers
            .push((name.into(), breaker.clone()));
        self.inner.show_names();
    }

    /// Shows the breaker of `pipeline` as `name` from now on, as [`AdminBuilder::pipeline`]
    /// does.
    pub fn add_pipeline(&self, name: impl Into<String>, pipeline: &Pipeline) {
        self.inner
            .sources_mut()
            .pipelines
            .push((name.into(), PipelineRef::Fixed(Box::new(pipeline.clone()))));
        self.inner.show_names();
    }

    /// Shows the breakers of a keyed registry as one group named `name` from now on, as
    /// [`AdminBuilder::keyed`] does.
    pub fn add_keyed<K, S>(&self, name: impl Into<String>, registry: &Registry<K, S>)
    where
        K: Hash + Eq + Clone + Send + Sync + Display + 'static,
        S: BuildHasher + Send + Sync + 'static,
    {
        self.inner
            .sources_mut()
            .keyed
            .push((name.into(), Arc::new(registry.clone()) as Arc<dyn Keys>));
        self.inner.show_names();
    }
}

/// Configures an [`Admin`]; from [`Admin::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct AdminBuilder {
    sources: Sources,
    tokens: Tokens,
    layer: Option<BoxCloneSyncService<Request<Full<Bytes>>, Response<Body>, Infallible>>,
    /// Where the [`Actions`] behind `layer` find the admin once built.
    slot: Arc<OnceLock<Weak<Inner>>>,
    every: Duration,
    history: Duration,
    buffer: usize,
    max_readers: usize,
}

impl fmt::Debug for AdminBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminBuilder")
            .field("sample_every", &self.every)
            .finish_non_exhaustive()
    }
}

impl AdminBuilder {
    /// Shows `breaker` under its own name (a name shown already gets `#2`, `#3`...).
    pub fn breaker(self, breaker: &CircuitBreaker) -> Self {
        let name = breaker.name().to_owned();
        self.breaker_named(name, breaker)
    }

    /// Shows `breaker` as `name`.
    pub fn breaker_named(mut self, name: impl Into<String>, breaker: &CircuitBreaker) -> Self {
        self.sources.breakers.push((name.into(), breaker.clone()));
        self
    }

    /// Shows the breaker of `pipeline` as `name`, with the pipeline's layers (the breaker's row
    /// when it is shown already, such as a named policy's).
    pub fn pipeline(mut self, name: impl Into<String>, pipeline: &Pipeline) -> Self {
        self.sources
            .pipelines
            .push((name.into(), PipelineRef::Fixed(Box::new(pipeline.clone()))));
        self
    }

    /// As [`pipeline`](Self::pipeline), for a pipeline of a named policy that follows its
    /// registry's reloads.
    pub fn live_pipeline(mut self, name: impl Into<String>, pipeline: &LivePipeline) -> Self {
        self.sources
            .pipelines
            .push((name.into(), PipelineRef::Live(pipeline.clone())));
        self
    }

    /// Shows the breakers of a keyed registry as one group named `name`: its count by state,
    /// and its keys page by page, busiest first (`/api/v1/breakers/{name}/keys`), each key as
    /// its `Display` text.
    pub fn keyed<K, S>(mut self, name: impl Into<String>, registry: &Registry<K, S>) -> Self
    where
        K: Hash + Eq + Clone + Send + Sync + Display + 'static,
        S: BuildHasher + Send + Sync + 'static,
    {
        self.sources
            .keyed
            .push((name.into(), Arc::new(registry.clone()) as Arc<dyn Keys>));
        self
    }

    /// Shows a breaker shared by a fleet as `name`: its local state with the fleet's view
    /// beside it (`fleet` in the JSON), and admin actions on it carried out fleet-wide through
    /// the shared store (see [`fleet`](crate::fleet)).
    pub fn shared(mut self, name: impl Into<String>, shared: impl crate::fleet::Shared) -> Self {
        self.sources.shared.push((name.into(), Arc::new(shared)));
        self
    }

    /// Searches `store` for shared breakers too (the
    /// [installed](breaker_redis::installed) store is searched without this): each row whose
    /// breaker is shared through it shows the fleet's view beside the local one, its admin
    /// actions are carried out fleet-wide, and a breaker shared through it that no other
    /// source shows gets a row of its own (see [`fleet`](crate::fleet)).
    #[cfg(feature = "redis")]
    pub fn store(mut self, store: &breaker_redis::Store) -> Self {
        self.sources.stores.push(Arc::new(store.clone()));
        self
    }

    /// Shows the breakers of every named policy of `registry` (the
    /// [installed](breaker_core::config::install) registry is shown without this), with their
    /// policy's file and reload generation; `POST /api/v1/reload` reloads it.
    pub fn policies(mut self, registry: &PolicyRegistry) -> Self {
        self.sources.registries.push(registry.clone());
        self
    }

    /// Whether to show the `#[circuit_breaker]` functions (default `true`).
    pub fn annotated(mut self, on: bool) -> Self {
        self.sources.annotated = on;
        self
    }

    /// Turns admin actions on for requests with `Authorization: Bearer <token>`, logged as
    /// done by `name`. May be called more than once (one token per operator or system). A
    /// token shorter than 16 bytes is refused: it could be guessed.
    ///
    /// # Panics
    /// If `token` is shorter than 16 bytes or contains whitespace, or if
    /// [`admin_layer`](Self::admin_layer) was called.
    pub fn admin_token(mut self, name: impl Into<String>, token: &str) -> Self {
        assert!(
            self.layer.is_none(),
            "admin actions are guarded by the admin layer already; use one or the other"
        );
        assert!(
            token.len() >= 16,
            "an admin token must be at least 16 bytes long (this one has {}): generate one, \
             for example with `openssl rand -hex 32`",
            token.len()
        );
        assert!(
            !token
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control()),
            "an admin token must not contain whitespace or control characters"
        );
        self.tokens.add(name.into(), token);
        self
    }

    /// Turns admin actions on behind `layer`, the program's own tower authentication (mTLS
    /// identity, OAuth, a session store...): admin requests (a bounded body already read)
    /// reach [`Actions`] through it, and only what it lets through is carried out. The layer
    /// names the caller for the logs by inserting a [`Principal`](crate::Principal) extension. Read routes are
    /// not behind it; wrap the whole [`service`](Admin::service) for that.
    ///
    /// # Panics
    /// If [`admin_token`](Self::admin_token) was called.
    pub fn admin_layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<Actions>,
        L::Service: Service<Request<Full<Bytes>>, Response = Response<Body>>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as Service<Request<Full<Bytes>>>>::Future: Send + 'static,
        <L::Service as Service<Request<Full<Bytes>>>>::Error: Display,
    {
        assert!(
            self.tokens.is_empty(),
            "admin actions are guarded by bearer tokens already; use one or the other"
        );
        let service = layer.layer(Actions {
            inner: Arc::clone(&self.slot),
        });
        self.layer = Some(BoxCloneSyncService::new(ErrorsAsResponses(service)));
        self
    }

    /// How often the sampler reads every breaker (default [`DEFAULT_SAMPLE_EVERY`], 250 ms):
    /// a transition shows in the event stream and the dashboard within this interval.
    pub fn sample_every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// How much history each breaker keeps for the dashboard's band (default
    /// [`DEFAULT_HISTORY`], 2 minutes): 13 bytes per breaker per sample.
    pub fn history(mut self, history: Duration) -> Self {
        self.history = history;
        self
    }

    /// How many events the ring keeps for readers that fall behind (default
    /// [`DEFAULT_EVENT_BUFFER`]); a reader further behind loses the oldest and gets a
    /// `dropped` event.
    pub fn event_buffer(mut self, events: usize) -> Self {
        self.buffer = events;
        self
    }

    /// The most event-stream readers at once (default [`DEFAULT_MAX_EVENT_READERS`]); one more
    /// gets `503 Service Unavailable`.
    pub fn max_event_readers(mut self, readers: usize) -> Self {
        self.max_readers = readers;
        self
    }

    /// Builds the admin and starts its sampler, a tokio task that stops when the admin and
    /// every service made from it are dropped. The first reading (the baseline every later
    /// one is compared with) is taken here; the task's first is one interval later.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn build(self) -> Admin {
        let guard = match (self.layer, self.tokens.is_empty()) {
            (Some(layer), _) => Guard::Layer(layer),
            (None, false) => Guard::Tokens(self.tokens),
            (None, true) => Guard::Off,
        };
        let slot = self.slot;
        let started = tokio::time::Instant::now();
        // Room for a burst of transitions between two ticks; more are dropped and counted.
        let (transitions, watch) = Transitions::watch(self.buffer.max(1024), started);
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            let _ = slot.set(weak.clone());
            Inner {
                sources: std::sync::RwLock::new(self.sources),
                guard,
                sampler: Sampler::new(self.every, self.history),
                bus: Arc::new(Bus::new(self.buffer, self.max_readers)),
                transitions,
                _watch: watch,
                started,
            }
        });
        // The first reading is the baseline (it also sets the names whose transitions are
        // queued), taken here rather than on the task: a task that starts late (a busy runtime)
        // would otherwise take it concurrently with the program's first `sample_now` and
        // publish that call's events itself.
        inner.sample();
        let weak = Arc::downgrade(&inner);
        let every = inner.sampler.every;
        let first = tokio::time::Instant::now() + every;
        tokio::spawn(async move {
            let mut interval = tokio::time::interval_at(first, every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let quiet_ticks = (Duration::from_secs(15).as_nanos() / every.as_nanos()).max(1);
            let mut quiet = 0u128;
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                if inner.sample() == 0 {
                    quiet += 1;
                    if quiet >= quiet_ticks {
                        quiet = 0;
                        inner.publish(Event::Heartbeat {
                            at_ms: inner.now_ms(),
                        });
                    }
                } else {
                    quiet = 0;
                }
            }
        });
        Admin { inner }
    }
}

/// A user layer's service whose errors become `500 Internal Server Error` responses naming
/// the error, so the admin service itself never fails.
#[derive(Clone)]
struct ErrorsAsResponses<S>(S);

impl<S> Service<Request<Full<Bytes>>> for ErrorsAsResponses<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        // Each call drives a clone to readiness itself (`oneshot`).
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Full<Bytes>>) -> Self::Future {
        use tower::ServiceExt;
        let service = self.0.clone();
        Box::pin(async move {
            Ok(match service.oneshot(req).await {
                Ok(r) => r,
                Err(e) => crate::service::error(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the admin layer failed: {e}"),
                ),
            })
        })
    }
}
