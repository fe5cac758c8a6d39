//! Run time: one pipeline per annotated function, created on first call, and the breakers
//! of its keys; each recorded in [`crate::annotated`], the public handle.

use super::InlinePolicy;
use crate::annotated;
use crate::breaker::{BreakerBuilder, BreakerFactory, CircuitBreaker};
use crate::classify::Outcome;
#[cfg(feature = "config")]
use crate::config::PolicyRegistry;
use crate::pipeline::{self, ErrorClassifier, PipelineBuilder};
use crate::policy::Policy;
use crate::registry::Registry;
use crate::Error;
#[cfg(feature = "config")]
use std::collections::HashMap;
use std::future::Future;
use std::ops::Deref;
#[cfg(feature = "config")]
use std::sync::Arc;
#[cfg(feature = "config")]
use std::sync::Mutex;
use std::sync::OnceLock;

/// The error classifier of an annotated function: `classify` and `retry_if` as function
/// pointers, so that a path of the wrong signature is one type error, at that path (and
/// the classifier's type stays valid, so no further errors follow from it).
pub fn classify<E>(
    outcome: fn(&E) -> Outcome,
    transient: fn(&E) -> bool,
) -> impl ErrorClassifier<E> {
    pipeline::classifier(outcome, transient)
}

/// A `classify = path`, as the function pointer [`classify`] takes.
pub fn outcome_fn<E>(f: fn(&E) -> Outcome) -> fn(&E) -> Outcome {
    f
}

/// A `retry_if = path`, as the function pointer [`classify`] takes.
pub fn transient_fn<E>(f: fn(&E) -> bool) -> fn(&E) -> bool {
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
            return Pipeline::from_registry(registry, policy, name, "the installed registry");
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
    }

    /// Without the `config` feature the macro's expansion is a compile error; this only
    /// keeps that error the only one.
    #[cfg(not(feature = "config"))]
    pub fn named(_: &'static str, _: &'static str, _: Option<EmbeddedConfig>) -> Pipeline {
        unreachable!("`policy = \"..\"` is a compile error without the `config` feature")
    }

    #[cfg(feature = "config")]
    fn from_registry(
        registry: &PolicyRegistry,
        policy: &str,
        name: &'static str,
        source: &str,
    ) -> Pipeline {
        let Some(live) = registry.pipeline_for(policy, name) else {
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
        let found = registry.get(policy).expect("the pipeline's policy");
        Pipeline {
            shared: Shared::Live(live),
            policy: (*found).clone(),
            name,
            factory: registry.factory(policy),
            keyed: OnceLock::new(),
        }
    }

    fn from_policy(policy: Policy, name: &'static str) -> Pipeline {
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
        let mut builder = PipelineBuilder::from_policy(&policy);
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
        }
    }

    /// The pipeline with the function's one breaker.
    pub fn breaker(&self) -> Target<'_> {
        match &self.shared {
            Shared::Fixed(p) => Target::Shared(p),
            #[cfg(feature = "config")]
            Shared::Live(live) => Target::Live(live.current()),
        }
    }

    /// The pipeline with the breaker of `key`, created on first use. The other layers
    /// (the bulkhead, the retry budget and jitter source) are the function's own, shared
    /// by every key; see [`pipeline::Pipeline::call_with_breaker`].
    ///
    /// # Panics
    /// If the registry of keys is full (it is unbounded by default).
    pub fn keyed(&self, key: String) -> Target<'_> {
        let target = self.breaker();
        if target.breaker().is_none() {
            // A named policy without a breaker: nothing to key.
            return target;
        }
        let registry = self.keyed.get_or_init(|| {
            let factory = self.factory.clone().unwrap_or_else(|| {
                let b = self.policy.breaker.clone().unwrap_or_default();
                breaker_builder(b, self.name)
                    .build_factory()
                    .expect("#[circuit_breaker]: validated at compile time")
            });
            let registry = Registry::builder(factory).state_gauge(true).build();
            annotated::register_keyed(self.name, &registry);
            registry
        });
        let breaker = registry
            .get_or_create(&key)
            .expect("#[circuit_breaker]: the registry of keyed breakers is full");
        match target {
            Target::Shared(p) | Target::Keyed(p, _) => Target::Keyed(p, breaker),
            #[cfg(feature = "config")]
            Target::Live(p) | Target::LiveKeyed(p, _) => Target::LiveKeyed(p, breaker),
        }
    }
}

/// The pipeline of an annotated function: its own, or its named policy's, which follows the
/// registry's reloads (one `ArcSwap` load per call).
enum Shared {
    Fixed(pipeline::Pipeline),
    #[cfg(feature = "config")]
    Live(crate::config::LivePipeline),
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

/// The builder of an annotated function's breakers: named after the function, with its
/// metrics, on [`default_clock`], with the listeners registered for its name
/// ([`annotated::on_transition`]).
fn breaker_builder(policy: crate::breaker::BreakerPolicy, name: &str) -> BreakerBuilder {
    let builder = CircuitBreaker::builder(policy)
        .name(name)
        .clock(default_clock());
    annotated::attach(crate::observe::instrument(builder), name)
}

/// The breaker clock of annotated functions: tokio's, so a paused test runtime drives
/// cooldowns as it drives timeouts and backoff sleeps.
fn default_clock() -> crate::clock::Clock {
    crate::clock::Clock::tokio()
}

/// The pipeline one call runs through, and the breaker it runs with.
pub enum Target<'a> {
    /// The function's own pipeline and breaker.
    Shared(&'a pipeline::Pipeline),
    /// The function's own pipeline with the breaker of one key.
    Keyed(&'a pipeline::Pipeline, CircuitBreaker),
    /// The named policy's pipeline current when the call started.
    #[cfg(feature = "config")]
    Live(Arc<pipeline::Pipeline>),
    /// The named policy's current pipeline with the breaker of one key.
    #[cfg(feature = "config")]
    LiveKeyed(Arc<pipeline::Pipeline>, CircuitBreaker),
}

impl Deref for Target<'_> {
    type Target = pipeline::Pipeline;
    fn deref(&self) -> &pipeline::Pipeline {
        match self {
            Target::Shared(p) | Target::Keyed(p, _) => p,
            #[cfg(feature = "config")]
            Target::Live(p) | Target::LiveKeyed(p, _) => p,
        }
    }
}

/// The default breaker verdict: every error is a failure.
pub fn failure<E>(_: &E) -> Outcome {
    Outcome::Failure
}

/// The default retry predicate: every error is transient.
pub fn transient<E>(_: &E) -> bool {
    true
}

/// Runs one call. Not an `async fn`: that would nest the pipeline's future in another
/// and move the result through both.
pub fn call<'a, T: 'a, E: 'a, F, Fut, C>(
    target: &'a Target<'_>,
    classifier: &'a C,
    op: F,
) -> impl Future<Output = Result<T, Error<E>>> + 'a
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<T, E>> + 'a,
    C: ErrorClassifier<E>,
{
    match target {
        Target::Shared(p) => p.run(p.breaker(), classifier, op),
        Target::Keyed(p, b) => p.run(p.layer_breaker(b), classifier, op),
        #[cfg(feature = "config")]
        Target::Live(p) => p.run(p.breaker(), classifier, op),
        #[cfg(feature = "config")]
        Target::LiveKeyed(p, b) => p.run(p.layer_breaker(b), classifier, op),
    }
}
