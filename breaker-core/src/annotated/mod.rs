//! The circuit breakers of `#[circuit_breaker]` functions: look one up by the function's name,
//! and add listeners to it before it is built.
//!
//! # Why
//! An annotated function has no breaker value in the program's hands: the attribute builds it
//! on the function's first call and keeps it for the life of the process (one per function, or
//! one per key with `key = ..`). A program still needs it: to read its state for a health
//! check, to force it open during maintenance, to count or log its transitions, and tests need
//! it to assert what happened.
//!
//! # Names
//! A function's breaker is found under the function's name: its `name = ".."` if given, else
//! its module path and name (`app::client::get_stock`). The breaker itself carries the same
//! name (in its events, rejections and metrics), except for a `policy = ".."` function: that
//! one uses its policy registry's breaker, which is shared by every function naming the policy
//! and is named after the policy.
//!
//! # Listeners
//! [`on_transition`] registers a listener for a **breaker name**. It is attached to every
//! breaker of that name built afterwards by the attribute (on the function's first call; for
//! `key = ..`, to the breaker of every key) or by a
//! [`PolicyRegistry`](crate::config::PolicyRegistry) (when it loads the policy of that name).
//! A breaker's listeners are fixed when it is built, so registering for a name whose breaker
//! exists already is an error ([`AlreadyBuilt`]) rather than a listener that never runs:
//! register at start-up, before the first call (for a named policy, before the registry is
//! installed).
//!
//! # Examples
//! ```
//! # use breaker_core as breaker;
//! use breaker::annotated;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//!
//! let opened = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&opened);
//! annotated::on_transition("app::get_stock", move |t| {
//!     if t.to == breaker::State::Open {
//!         counter.fetch_add(1, Ordering::Relaxed);
//!     }
//! })?;
//! // Before `get_stock` is first called there is no breaker to look up.
//! assert!(annotated::breaker("app::get_stock").is_none());
//! # Ok::<(), annotated::AlreadyBuilt>(())
//! ```

pub(crate) mod registered;

#[cfg(any(feature = "tokio", feature = "config", test))]
use crate::breaker::BreakerBuilder;
use crate::breaker::{CircuitBreaker, Listener, Transition};
use crate::policy::Policy;
use crate::registry::Registry;
use registered::{Registered, REGISTERED};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A listener was registered for a breaker that is already built, so it would never run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the breaker `{name}` is already built, so a listener added now would never run; \
     register it before the function's first call (for a named policy, before its registry \
     is loaded)"
)]
pub struct AlreadyBuilt {
    /// The breaker's name.
    pub name: String,
}

#[derive(Default)]
struct Table {
    /// By function name: its breaker, once built.
    breakers: HashMap<String, CircuitBreaker>,
    /// By function name: the breakers of its keys (`key = ..`).
    keyed: HashMap<String, Registry<String>>,
    /// By breaker name: the listeners to attach when a breaker of that name is built.
    listeners: HashMap<String, Vec<Listener>>,
    /// The names of the breakers built with [`attach`].
    built: HashSet<String>,
    /// By function name: the policy written in its attribute, once it has been called.
    policies: HashMap<String, Policy>,
    /// By function name: the registry a `policy = ".."` function reads, once it has been
    /// called.
    #[cfg(feature = "config")]
    registries: HashMap<String, crate::config::PolicyRegistry>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The breaker of the annotated function `function` (its `name = ".."`, or its module path and
/// name), once the function has been called; `None` before that, or for a name no annotated
/// function has. Clones share the breaker's state.
///
/// For a `key = ..` function this is the breaker its keys do not use; see [`keyed`].
pub fn breaker(function: &str) -> Option<CircuitBreaker> {
    table().breakers.get(function).cloned()
}

/// The breaker of `key` of the `key = ..` function `function`, once a call with that key has
/// been made.
pub fn keyed(function: &str, key: &str) -> Option<CircuitBreaker> {
    table().keyed.get(function)?.get(key)
}

/// The registry of keyed breakers of the `key = ..` function `function` (its bounds, its
/// keys, their breakers), once a call with a key has been made.
pub fn keys(function: &str) -> Option<Registry<String>> {
    table().keyed.get(function).cloned()
}

/// Adds `listener` to the breakers named `name` built from now on (see the
/// [module docs](self)). It runs on the thread that made the transition, after the state
/// changed; keep it short and never call the breaker from it.
///
/// # Errors
/// [`AlreadyBuilt`] if a breaker named `name` has been built already: the listener would
/// never run.
pub fn on_transition(
    name: &str,
    listener: impl Fn(&Transition) + Send + Sync + 'static,
) -> Result<(), AlreadyBuilt> {
    let mut table = table();
    if table.built.contains(name) {
        return Err(AlreadyBuilt {
            name: name.to_owned(),
        });
    }
    table
        .listeners
        .entry(name.to_owned())
        .or_default()
        .push(Arc::new(listener));
    Ok(())
}

/// Adds the listeners registered for `name` to a breaker (or factory) about to be built, and
/// records that a breaker of that name exists.
#[cfg(any(feature = "tokio", feature = "config", test))]
pub(crate) fn attach(mut builder: BreakerBuilder, name: &str) -> BreakerBuilder {
    let mut table = table();
    table.built.insert(name.to_owned());
    for listener in table.listeners.get(name).into_iter().flatten() {
        let listener = Arc::clone(listener);
        builder = builder.on_transition(move |t| listener(t));
    }
    builder
}

/// Records the breaker of the annotated function `function`.
#[cfg(any(feature = "tokio", test))]
pub(crate) fn register(function: &str, breaker: &CircuitBreaker) {
    table()
        .breakers
        .insert(function.to_owned(), breaker.clone());
}

/// Records the policy written in the attribute of the annotated function `function`.
#[cfg(feature = "tokio")]
pub(crate) fn register_policy(function: &str, policy: &Policy) {
    table().policies.insert(function.to_owned(), policy.clone());
}

/// Records the registry the `policy = ".."` function `function` reads its policy from.
#[cfg(all(feature = "tokio", feature = "config"))]
pub(crate) fn register_registry(function: &str, registry: &crate::config::PolicyRegistry) {
    table()
        .registries
        .insert(function.to_owned(), registry.clone());
}

/// Records the registry of keyed breakers of the annotated function `function`.
#[cfg(feature = "tokio")]
pub(crate) fn register_keyed(function: &str, registry: &Registry<String>) {
    table().keyed.insert(function.to_owned(), registry.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::BreakerPolicy;
    use crate::State;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn listeners_attach_to_breakers_built_after_them() {
        let seen = Arc::new(AtomicU32::new(0));
        let s = Arc::clone(&seen);
        on_transition("annotated::tests::a", move |t| {
            assert_eq!(&*t.name, "annotated::tests::a");
            s.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let policy = BreakerPolicy {
            consecutive_failures: Some(1),
            ..BreakerPolicy::default()
        };
        let builder = CircuitBreaker::builder(policy).name("annotated::tests::a");
        let b = attach(builder, "annotated::tests::a").build().unwrap();
        register("annotated::tests::a", &b);
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Open);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(breaker("annotated::tests::a").unwrap().state(), State::Open);
        // Too late for the breaker that exists: an error, not a listener that never runs.
        assert_eq!(
            on_transition("annotated::tests::a", |_| {}),
            Err(AlreadyBuilt {
                name: "annotated::tests::a".into()
            })
        );
        assert!(breaker("annotated::tests::none").is_none());
    }
}

/// One `#[circuit_breaker]` function of the program: see [`functions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function(&'static Registered);

impl Function {
    /// The function's name, the one its breaker is found under ([`breaker`]): its
    /// `name = ".."`, else its module path and name (`app::client::get_stock`).
    pub fn name(&self) -> &'static str {
        self.0.function
    }

    /// The `policy = ".."` it names, if any (else its policy is written in the attribute).
    pub fn policy(&self) -> Option<&'static str> {
        self.0.policy
    }

    /// The `config = ".."` file it embeds, if any.
    pub fn config(&self) -> Option<&'static str> {
        self.0.config
    }

    /// Whether it keeps a breaker per key (`key = ..`); see [`keyed`].
    pub fn is_keyed(&self) -> bool {
        self.0.keyed
    }

    /// Its breaker, once the function has been called; as [`breaker`].
    pub fn breaker(&self) -> Option<CircuitBreaker> {
        breaker(self.0.function)
    }

    /// The policy written in its attribute (its layers, in their order, and their settings;
    /// `Display` of [`BreakerPolicy`](crate::breaker::BreakerPolicy) gives the breaker's DSL
    /// text), once the function has been called; `None` before that and for a
    /// `policy = ".."` function, whose policy is its [`registry`](Self::registry)'s.
    pub fn attribute_policy(&self) -> Option<Policy> {
        table().policies.get(self.0.function).cloned()
    }

    /// The registry a `policy = ".."` function reads its policy from (the
    /// [installed](crate::config::install) one, or the one of the file its `config = ".."`
    /// embeds), once the function has been called: its
    /// [`get`](crate::config::PolicyRegistry::get) of [`policy`](Self::policy) is the policy
    /// in force, [`generation`](crate::config::PolicyRegistry::generation) counts its reloads.
    /// `None` before the first call and for a function whose policy is in its attribute.
    #[cfg(feature = "config")]
    pub fn registry(&self) -> Option<crate::config::PolicyRegistry> {
        table().registries.get(self.0.function).cloned()
    }

    /// The keys' breakers of a `key = ..` function, once a call with a key has been made; as
    /// [`keys`].
    pub fn keys(&self) -> Option<Registry<String>> {
        keys(self.0.function)
    }
}

/// Every `#[circuit_breaker]` function linked into the program, called or not, sorted by
/// name. The attribute registers each at link time (with `linkme`), which is also how
/// [`config::install`](crate::config::install) checks every named policy before any function
/// runs.
///
/// ```
/// # use breaker_core as breaker;
/// // A program without annotated functions lists none.
/// assert!(breaker::annotated::functions().all(|f| !f.name().is_empty()));
/// ```
pub fn functions() -> impl Iterator<Item = Function> {
    let mut all: Vec<Function> = REGISTERED.iter().map(Function).collect();
    all.sort_by_key(|f| f.name());
    all.into_iter()
}
