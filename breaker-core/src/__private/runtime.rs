//! Run time: one pipeline per annotated function, created on first call, and the breakers
//! of its keys.

use super::InlinePolicy;
use crate::annotated;
use crate::breaker::{BreakerBuilder, BreakerFactory, CircuitBreaker};
use crate::classify::Classifier;
#[cfg(feature = "config")]
use crate::config::PolicyRegistry;
use crate::pipeline::{self, Layers, PipelineBuilder};
use crate::policy::Policy;
use crate::ratelimit::{RateLimitPolicy, RateLimiter, RateLimiters};
use crate::registry::{Registry, RegistryFull};
use crate::scope::Scope;
use crate::{Error, Rejection};
use arc_swap::ArcSwapOption;
#[cfg(feature = "config")]
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
#[cfg(feature = "config")]
use std::sync::Mutex;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

/// A `record = path`, as the function pointer [`Pipeline::recording`] takes.
pub fn recorder_fn(
    f: fn() -> Option<crate::record::Recorder>,
) -> fn() -> Option<crate::record::Recorder> {
    f
}

/// A `fallback = path`: an async function taking the pipeline's error and returning the
/// function's rewritten result.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a fallback of this function",
    label = "expected an async fn taking `breaker::Error<E>` and returning `Result<T, breaker::Error<E>>`",
    note = "a fallback has the signature `async fn(breaker::Error<E>) -> Result<T, breaker::Error<E>>`, where `Result<T, E>` is the annotated function's declared return type"
)]
pub trait Fallback<T, E> {
    /// The fallback's future.
    type Future: Future<Output = Result<T, Error<E>>>;
    /// Calls the fallback.
    fn __breaker_call(self, error: Error<E>) -> Self::Future;
}

impl<T, E, G, F> Fallback<T, E> for G
where
    G: FnOnce(Error<E>) -> F,
    F: Future<Output = Result<T, Error<E>>>,
{
    type Future = F;
    fn __breaker_call(self, error: Error<E>) -> F {
        self(error)
    }
}

/// Calls a fallback with the pipeline's error. The expansion spans the whole call at the
/// user's `fallback = path`, so a wrong signature is reported once, there.
pub fn run_fallback<T, E, G: Fallback<T, E>>(g: G, error: Error<E>) -> G::Future {
    g.__breaker_call(error)
}

/// The most breakers an annotated function keeps for `key = ..` unless `max_keys` says.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// How long a key's breaker may go unused (and closed) before it may be evicted, unless
/// `key_idle` says.
pub const DEFAULT_KEY_IDLE: Duration = Duration::from_secs(600);

/// The run-time state of one annotated function: its pipeline, and for `key = ..` one
/// breaker per key.
pub struct Pipeline {
    shared: Shared,
    policy: Policy,
    name: &'static str,
    /// Makes the breakers of keys: a named policy's factory (so keyed breakers follow a
    /// reload), or `None` to build one from `policy` on first use.
    factory: Option<BreakerFactory>,
    keyed: OnceLock<Registry<String>>,
    /// The rate limiters of keys, for a rate limit `per key`: made on first use from the
    /// current pipeline's rate policy, and again when a reload changes it.
    limiters: ArcSwapOption<RateLimiters<String>>,
    max_keys: usize,
    key_idle: Duration,
    /// Whether the named policy's config set `max_keys` / `key_idle` (which then win over the
    /// attribute's).
    configured_keys: (bool, bool),
    /// Where the breakers' state lives (`scope = ".."`, or the named policy's scope).
    scope: Scope,
}

/// The pipeline of an annotated function: its own, or its named policy's, which follows the
/// registry's reloads (one `ArcSwap` load per call).
///
/// There is one per annotated function, in its `static`, so the size of `Fixed` costs nothing
/// per call, while boxing it would add a pointer chase to every call of the common case.
#[allow(clippy::large_enum_variant)]
enum Shared {
    Fixed(pipeline::Pipeline),
    #[cfg(feature = "config")]
    Live(crate::config::LivePipeline),
}

impl Pipeline {
    /// The pipeline of an attribute's own options.
    ///
    /// # Panics
    /// Never for options the macro accepted (they were built at compile time).
    pub fn inline(policy: InlinePolicy<'static>, name: &'static str) -> Pipeline {
        let policy = policy
            .build()
            .expect("#[circuit_breaker]: the policy was validated at compile time");
        Pipeline::from_policy(policy, name)
    }

    /// The pipeline of the named policy `policy`: from the registry installed with
    /// [`config::install`](crate::config::install), else from the config file the macro
    /// embedded (`config = ".."`), loaded on first use and shared by every function
    /// naming the same file. The breaker is the registry's breaker of that policy, shared
    /// by every function naming it.
    ///
    /// # Panics
    /// If no registry is installed and no file was embedded, or if the installed registry
    /// has no policy of that name.
    #[cfg(feature = "config")]
    pub fn named(
        policy: &'static str,
        name: &'static str,
        embedded: Option<EmbeddedConfig>,
    ) -> Pipeline {
        if let Some(registry) = crate::config::installed() {
            return Pipeline::from_registry(registry, policy, name, "the installed registry")
                .with_scope(registry.scope(policy));
        }
        let Some(embedded) = embedded else {
            panic!(
                "#[circuit_breaker]: `{name}` uses policy `{policy}`, but no policy registry \
                 is installed; call `breaker::config::install(..)` at start-up, or add \
                 `config = \"file\"` to the attribute"
            )
        };
        let registry = embedded_registry(embedded);
        Pipeline::from_registry(&registry, policy, name, embedded.file)
            .with_scope(embedded_scope(embedded, policy))
    }

    /// Without the `config` feature the macro's expansion is a compile error; this only
    /// keeps that error the only one.
    #[cfg(not(feature = "config"))]
    pub fn named(_: &'static str, _: &'static str, _: Option<EmbeddedConfig>) -> Pipeline {
        unreachable!("`policy = \"..\"` is a compile error without the `config` feature")
    }

    /// The function runs through the policy's [`LivePipeline`](crate::config::LivePipeline),
    /// so a reload of the registry reaches its retry, timeout, deadline and bulkhead for the
    /// calls that start after it; `max_keys` and `key_idle` from the policy's config win over
    /// the attribute's.
    #[cfg(feature = "config")]
    fn from_registry(
        registry: &PolicyRegistry,
        policy: &str,
        name: &'static str,
        source: &str,
    ) -> Pipeline {
        let (Some(found), Some(live)) = (registry.get(policy), registry.pipeline_for(policy, name))
        else {
            let names: Vec<String> = registry.names().iter().map(|n| format!("`{n}`")).collect();
            panic!(
                "#[circuit_breaker]: `{name}` uses policy `{policy}`, which is not in {source}; \
                 available: {}",
                names.join(", ")
            )
        };
        if let Some(breaker) = registry.breaker(policy) {
            annotated::register(name, &breaker);
        }
        annotated::register_registry(name, registry);
        let keys = registry.key_bounds(policy);
        Pipeline {
            shared: Shared::Live(live),
            policy: (*found).clone(),
            name,
            factory: registry.factory(policy),
            keyed: OnceLock::new(),
            limiters: ArcSwapOption::empty(),
            max_keys: keys.max_keys.unwrap_or(DEFAULT_MAX_KEYS),
            key_idle: keys.key_idle.unwrap_or(DEFAULT_KEY_IDLE),
            configured_keys: (keys.max_keys.is_some(), keys.key_idle.is_some()),
            scope: Scope::Local,
        }
    }

    fn from_policy(policy: Policy, name: &'static str) -> Pipeline {
        annotated::register_policy(name, &policy);
        let breaker = policy.breaker.as_ref().map(|b| {
            let breaker = breaker_builder(b.clone(), name)
                .build()
                .expect("#[circuit_breaker]: validated at compile time");
            crate::observe::track(&breaker);
            breaker
        });
        Pipeline::assemble(policy, name, breaker, None)
    }

    /// The pipeline of a validated `policy` with the function's `breaker` (recorded for
    /// [`annotated::breaker`]) and the `factory` of its keyed breakers (`None`: from `policy`).
    fn assemble(
        policy: Policy,
        name: &'static str,
        breaker: Option<CircuitBreaker>,
        factory: Option<BreakerFactory>,
    ) -> Pipeline {
        // The rate limit, adaptive limit and throttling read the breaker's clock (tokio's, so a
        // paused test drives them too) and count under the function's name.
        let mut builder = PipelineBuilder::from_policy(&policy)
            .clock(default_clock())
            .name(name);
        if let Some(breaker) = breaker {
            annotated::register(name, &breaker);
            builder = builder.breaker(breaker);
        }
        let shared = builder
            .build()
            .expect("#[circuit_breaker]: the policy was validated when it was compiled or loaded");
        Pipeline {
            shared: Shared::Fixed(shared),
            policy,
            name,
            factory,
            keyed: OnceLock::new(),
            limiters: ArcSwapOption::empty(),
            max_keys: DEFAULT_MAX_KEYS,
            key_idle: DEFAULT_KEY_IDLE,
            configured_keys: (false, false),
            scope: Scope::Local,
        }
    }

    /// The bounds of the breakers of keys: `max_keys = N` and `key_idle = "D"`, as written
    /// (checked at compile time); `None` keeps [`DEFAULT_MAX_KEYS`] / [`DEFAULT_KEY_IDLE`].
    /// A named policy's config setting one wins over the attribute's.
    ///
    /// # Panics
    /// Never for values the macro accepted.
    pub fn key_bounds(mut self, max_keys: Option<u64>, key_idle: Option<&'static str>) -> Self {
        if let (Some(n), false) = (max_keys, self.configured_keys.0) {
            self.max_keys = usize::try_from(n).unwrap_or(usize::MAX).max(1);
        }
        if let (Some(src), false) = (key_idle, self.configured_keys.1) {
            self.key_idle = crate::dsl::parse_duration(src)
                .expect("#[circuit_breaker]: `key_idle` was validated at compile time");
        }
        self
    }

    /// `scope = ".."` (checked at compile time): under `shared` or `quorum(k)`, the
    /// function's breaker is shared with the fleet now (the function's first call), through
    /// the sharer a fleet backend installed with its store (`breaker_redis::install`), and
    /// so is each key's breaker as it is made. `local` changes nothing.
    ///
    /// # Panics
    /// Under a shared scope with no store installed (a clear message naming the function and
    /// the fix: never a silent local breaker), or if the store refuses the breaker (an
    /// invalid name). The function's next call tries again.
    pub fn scoped(self, scope: &'static str) -> Pipeline {
        let scope: Scope = scope
            .parse()
            .expect("#[circuit_breaker]: `scope` was validated at compile time");
        self.with_scope(scope)
    }

    fn with_scope(mut self, scope: Scope) -> Pipeline {
        if !scope.is_shared() {
            return self;
        }
        self.scope = scope;
        let breaker = match &self.shared {
            Shared::Fixed(p) => p.breaker().cloned(),
            #[cfg(feature = "config")]
            Shared::Live(live) => live.current().breaker().cloned(),
        };
        if let Some(breaker) = breaker {
            if let Err(e) = crate::breaker::share_in_scope(&breaker, scope) {
                panic!("#[circuit_breaker]: {e}");
            }
        }
        self
    }

    /// `record = path`: the pipeline records its calls in the recorder `f` returns, asked
    /// once, when the pipeline is built (the function's first call); `None` records nothing.
    pub fn recording(mut self, f: fn() -> Option<crate::record::Recorder>) -> Pipeline {
        if let Some(recorder) = f() {
            match &mut self.shared {
                Shared::Fixed(p) => p.set_recorder(recorder),
                #[cfg(feature = "config")]
                Shared::Live(live) => live.set_recorder(recorder),
            }
        }
        self
    }

    /// The pipeline with the function's one breaker.
    pub fn breaker(&self) -> Target<'_> {
        match &self.shared {
            Shared::Fixed(p) => Target::Shared(p),
            #[cfg(feature = "config")]
            Shared::Live(live) => Target::Live(live.current()),
        }
    }

    /// The pipeline with the breaker of `key` and, for a rate limit `per key`, its rate
    /// limiter, each created on first use. The other layers (the bulkhead, the adaptive limit,
    /// throttling, the retry budget and jitter source, a rate limit not `per key`) are the
    /// function's own, shared by every key; see [`pipeline::Pipeline::call_keyed`].
    ///
    /// Each registry of keys holds at most `max_keys` breakers or limiters; the breakers have
    /// no lifetime totals and name their key in their events and rejections; a closed breaker
    /// unused for `key_idle`, and a limiter unused for `key_idle` and its refill time, may be
    /// evicted. A new key of a full registry (none of its entries evictable) gets
    /// [`Target::Refused`]: the call is rejected with [`Rejection::Keys`].
    pub fn keyed(&self, key: String) -> Target<'_> {
        let target = self.breaker();
        let pipeline: &pipeline::Pipeline = match &target {
            Target::Shared(p) => p,
            #[cfg(feature = "config")]
            Target::Live(p) => p,
            _ => return target,
        };
        let per_key = pipeline.rate_limiter().filter(|r| r.policy().per_key);
        let breaker = match pipeline.breaker() {
            None => None,
            Some(_) => match self.key_breakers().get_or_create(&key) {
                Ok(b) => Some(b),
                Err(full) => return Target::Refused(full),
            },
        };
        let rate = match per_key {
            None => None,
            Some(own) => match self.key_limiter(own, &key) {
                Ok(l) => Some(l),
                Err(full) => return Target::Refused(full),
            },
        };
        if breaker.is_none() && rate.is_none() {
            // Nothing to key: a named policy without a breaker or a rate limit per key.
            return target;
        }
        let key = Key { breaker, rate };
        match target {
            Target::Shared(p) => Target::Keyed(p, key),
            #[cfg(feature = "config")]
            Target::Live(p) => Target::LiveKeyed(p, key),
            other => other,
        }
    }

    /// The registry of the keys' breakers, made on first use.
    fn key_breakers(&self) -> &Registry<String> {
        self.keyed.get_or_init(|| {
            let factory = self.factory.clone().unwrap_or_else(|| {
                let b = self.policy.breaker.clone().unwrap_or_default();
                breaker_builder(b, self.name)
                    .build_factory()
                    .expect("#[circuit_breaker]: validated at compile time")
            });
            if self.scope.is_shared() {
                crate::breaker::share_created(&factory, self.scope, None);
            }
            let registry = Registry::builder(factory)
                .max_keys(self.max_keys)
                .idle_ttl(self.key_idle)
                .totals(false)
                .state_gauge(true)
                .build_tagged();
            annotated::register_keyed(self.name, &registry);
            registry
        })
    }

    /// The rate limiter of `key` for the pipeline's limiter `own` (a policy `per key`), from
    /// the keys' registry of `own`'s policy: the one made before while the policy is the same,
    /// else a new one (a reload that changes the rate starts every key afresh, as it starts a
    /// new shared limiter). A lookup moves no reference count of the registry.
    fn key_limiter(&self, own: &RateLimiter, key: &str) -> Result<RateLimiter, RegistryFull> {
        let policy: RateLimitPolicy = own.policy();
        let same = |c: &Option<Arc<RateLimiters<String>>>| {
            c.as_ref().filter(|c| c.policy() == policy).cloned()
        };
        if let Some(current) = self.limiters.load().as_ref() {
            if current.policy() == policy {
                return current.get_or_create(key);
            }
        }
        // First use, or a reload changed the policy: one registry for the new policy even when
        // calls race here (the first stored is kept and the others use it).
        self.limiters.rcu(|current| {
            same(current).or_else(|| {
                let made = RateLimiters::builder(policy)
                    .clock(own.clock().clone())
                    .name(self.name)
                    .max_keys(self.max_keys)
                    .idle_ttl(self.key_idle)
                    .build()
                    .expect("the pipeline's rate limiter has a valid policy");
                Some(Arc::new(made))
            })
        });
        match same(&self.limiters.load_full()) {
            Some(current) => current.get_or_create(key),
            // A reload raced this call: its limiter, from a registry of its own.
            None => self.key_limiter(own, key),
        }
    }
}

/// The config file a `config = ".."` option embedded with `include_str!`: its name as
/// written and its text as it was when the function compiled (and was checked).
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedConfig {
    /// The name as written in the attribute; its extension gives the format.
    pub file: &'static str,
    /// The file's contents.
    pub text: &'static str,
}

/// The registry of an embedded file, loaded once per distinct text in the process, with
/// breakers on the tokio clock like those of inline policies.
#[cfg(feature = "config")]
fn embedded_registry(embedded: EmbeddedConfig) -> Arc<PolicyRegistry> {
    use crate::config::{Format, Loader};
    static LOADED: OnceLock<Mutex<HashMap<&'static str, Arc<PolicyRegistry>>>> = OnceLock::new();
    let mut loaded = LOADED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let registry = loaded.entry(embedded.text).or_insert_with(|| {
        let EmbeddedConfig { file, text } = embedded;
        let format = Format::from_path(std::path::Path::new(file))
            .expect("#[circuit_breaker]: the format was checked at compile time");
        let registry =
            PolicyRegistry::load_with_clock(Loader::text(text, format), Some(default_clock()))
                .unwrap_or_else(|e| {
                    panic!("#[circuit_breaker]: {file} was checked at compile time: {e}")
                });
        Arc::new(registry)
    });
    Arc::clone(registry)
}

/// The scope of policy `policy` in an embedded file (`local` if it sets none). A registry
/// installed with `config::install` is shared by `breaker_redis::share_policies` instead.
#[cfg(feature = "config")]
fn embedded_scope(embedded: EmbeddedConfig, policy: &str) -> Scope {
    use crate::config::{Format, Loader};
    let EmbeddedConfig { file, text } = embedded;
    let format = Format::from_path(std::path::Path::new(file))
        .expect("#[circuit_breaker]: the format was checked at compile time");
    Loader::text(text, format)
        .load()
        .map(|p| p.scope(policy))
        .unwrap_or_default()
}

/// The breaker clock of annotated functions: tokio's, so a paused test runtime drives
/// cooldowns as it drives timeouts and backoff sleeps.
fn default_clock() -> crate::clock::Clock {
    crate::clock::Clock::tokio()
}

/// The builder of an annotated function's breakers: named after the function, with its
/// metrics, on [`default_clock`], with the listeners registered for its name
/// ([`annotated::on_transition`]), and with lifetime totals: a program reaches the function's
/// one breaker only through [`annotated::breaker`], with no builder to ask for them (its keys'
/// registry turns them off).
fn breaker_builder(policy: crate::breaker::BreakerPolicy, name: &str) -> BreakerBuilder {
    let builder = CircuitBreaker::builder(policy)
        .name(name)
        .clock(default_clock())
        .totals(true);
    annotated::attach(crate::observe::instrument(builder), name)
}

/// The pipeline one call runs through, and the breaker it runs with.
pub enum Target<'a> {
    /// The function's own pipeline and breaker.
    Shared(&'a pipeline::Pipeline),
    /// The function's own pipeline with the layers of one key.
    Keyed(&'a pipeline::Pipeline, Key),
    /// The key has no breaker and the registry of keys is full: the call is refused.
    Refused(RegistryFull),
    /// The named policy's pipeline current when the call started.
    #[cfg(feature = "config")]
    Live(Arc<pipeline::Pipeline>),
    /// The named policy's current pipeline with the layers of one key.
    #[cfg(feature = "config")]
    LiveKeyed(Arc<pipeline::Pipeline>, Key),
}

/// A key's own layers: its breaker (when the pipeline has one) and its rate limiter (for a
/// rate limit `per key`). Held for the call, so neither is evicted while it runs.
#[derive(Debug)]
pub struct Key {
    breaker: Option<CircuitBreaker>,
    rate: Option<RateLimiter>,
}

impl Key {
    fn layers(&self) -> pipeline::KeyLayers<'_> {
        pipeline::KeyLayers {
            breaker: self.breaker.as_ref(),
            rate: self.rate.as_ref(),
        }
    }
}

impl Target<'_> {
    /// Whether the function's fallback runs for `error`, by the function's classifier (its
    /// verdict on errors; `T` comes from the classifier's [`Attr`]); a refused key is a
    /// rejection, so it does.
    pub fn wants_fallback<T, E, C: Classifier<T, E>>(
        &self,
        error: &Error<E>,
        classifier: &C,
    ) -> bool {
        match self {
            Target::Shared(p) | Target::Keyed(p, _) => {
                p.wants_fallback_of::<T, E, C>(error, classifier)
            }
            #[cfg(feature = "config")]
            Target::Live(p) | Target::LiveKeyed(p, _) => {
                p.wants_fallback_of::<T, E, C>(error, classifier)
            }
            Target::Refused(_) => true,
        }
    }
}

/// Runs one call. Not an `async fn`: that would nest the pipeline's future in another
/// and move the result through both.
pub fn call<'a, T: 'a, E: 'a, F, Fut, C>(
    target: &'a Target<'_>,
    classifier: &'a C,
    op: F,
) -> Call<impl Future<Output = Result<T, Error<E>>> + 'a, Result<T, Error<E>>>
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<T, E>> + 'a,
    C: Classifier<T, E>,
{
    match target {
        Target::Shared(p) => Call::Run {
            fut: p.run(Layers::Own, classifier, op),
        },
        Target::Keyed(p, key) => Call::Run {
            fut: p.run(Layers::Key(p.keyed(key.layers())), classifier, op),
        },
        Target::Refused(full) => Call::Refused {
            result: Some(Err(Error::Rejected(Rejection::Keys(*full)))),
        },
        #[cfg(feature = "config")]
        Target::Live(p) => Call::Run {
            fut: p.run(Layers::Own, classifier, op),
        },
        #[cfg(feature = "config")]
        Target::LiveKeyed(p, key) => Call::Run {
            fut: p.run(Layers::Key(p.keyed(key.layers())), classifier, op),
        },
    }
}

pin_project_lite::pin_project! {
    /// The future of [`call`]: the pipeline's, or a refusal that is ready at once.
    #[project = CallProj]
    pub enum Call<F, R> {
        /// The pipeline runs the call.
        Run {
            #[pin]
            fut: F,
        },
        /// A refused key: the result without running anything.
        Refused {
            result: Option<R>,
        },
    }
}

impl<F: Future> Future for Call<F, F::Output> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.project() {
            CallProj::Run { fut } => fut.poll(cx),
            CallProj::Refused { result } => {
                Poll::Ready(result.take().expect("`Call` polled after completion"))
            }
        }
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").finish_non_exhaustive()
    }
}
