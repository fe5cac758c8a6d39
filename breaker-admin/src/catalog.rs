//! What the process knows: every breaker an [`Admin`](crate::Admin) can show, gathered from
//! its sources each time it is asked (a reload, a first call or a new key shows at once).
//!
//! Sources, in the order rows are named (a name already taken gets `#2`, `#3`, ...):
//! 1. the named policies of the [installed](breaker_core::config::install) policy registry and
//!    of the registries added with [`AdminBuilder::policies`](crate::AdminBuilder::policies);
//! 2. the `#[circuit_breaker]` functions ([`annotated::functions`]): a `policy = ".."`
//!    function is a user of its policy's row; a function with its policy in the attribute is
//!    a row of its own once called; a `key = ..` function is a keyed group;
//! 3. pipelines, plain breakers and keyed registries added to the builder;
//! 4. breakers shared through a fleet backend (with the `redis` feature: the
//!    [installed](https://docs.rs/breaker-redis/latest/breaker_redis/fn.installed.html) store
//!    and those added with `AdminBuilder::store`) that no source above shows. A row above
//!    whose breaker is shared there (an attribute's `scope = "shared"`, a config policy's
//!    scope) gets the fleet's view beside its own, whoever shared it.

use breaker_core::annotated;
use breaker_core::breaker::CircuitBreaker;
use breaker_core::config::{self, LivePipeline, PolicyRegistry};
use breaker_core::layer::Layer;
use breaker_core::pipeline::Pipeline;
use breaker_core::policy::Policy;
use breaker_core::registry::Registry;
use std::collections::HashMap;
use std::fmt::Display;
use std::hash::{BuildHasher, Hash};
use std::path::PathBuf;
use std::sync::Arc;

/// What kind of source a row comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    /// A named policy of a config registry.
    Policy,
    /// A `#[circuit_breaker]` function with its policy in the attribute.
    Function,
    /// A pipeline added to the builder.
    Pipeline,
    /// A breaker added to the builder.
    Plain,
    /// The breakers of a keyed registry (or a `key = ..` function).
    Keyed,
    /// A breaker shared by a fleet, with the fleet's view beside the local one.
    Shared,
}

/// Where the policy in force comes from.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum Source {
    /// Written in a `#[circuit_breaker]` attribute.
    Attribute { function: String },
    /// A named policy of a config file, at its reload generation.
    File { path: PathBuf, generation: u64 },
    /// A named policy of a registry loaded from text or from policies.
    Config { generation: u64 },
    /// Built in code.
    Code,
}

/// One breaker (or keyed group) row.
#[derive(Clone)]
pub(crate) struct Item {
    /// Unique among rows: the breaker's name, or the name given, with `#n` when taken.
    pub(crate) id: String,
    pub(crate) kind: Kind,
    /// The breaker (for a keyed group: none; see `keys`).
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) keys: Option<Arc<dyn Keys>>,
    /// The whole policy, when known (the breaker's own is always known).
    pub(crate) policy: Option<Policy>,
    pub(crate) source: Source,
    /// The layers of the pipeline that runs the breaker, outermost first (empty: none known).
    pub(crate) layers: Vec<Layer>,
    /// Annotated functions and pipelines that run through this breaker.
    pub(crate) used_by: Vec<String>,
    /// The fleet's side of a shared breaker.
    pub(crate) fleet: Option<Arc<dyn crate::fleet::Shared>>,
}

impl Item {
    /// The breaker's policy as DSL text (`5 consecutive, open 30s, ...`).
    pub(crate) fn breaker_dsl(&self) -> Option<String> {
        if let Some(b) = &self.breaker {
            return Some(b.policy().to_string());
        }
        self.keys.as_ref().map(|k| k.policy_dsl())
    }
}

/// The breakers of a keyed registry, whatever its key type.
pub(crate) trait Keys: Send + Sync {
    /// The name its breakers carry.
    fn name(&self) -> String;
    /// The registry's bound.
    fn max_keys(&self) -> usize;
    /// Every key (rendered) and its breaker, without counting as a use.
    fn for_each(&self, f: &mut dyn FnMut(String, &CircuitBreaker));
    /// The policy of its breakers, as DSL text.
    fn policy_dsl(&self) -> String;
    /// The breaker of the key rendered as `key`, without counting as a use.
    fn find(&self, key: &str) -> Option<CircuitBreaker> {
        let mut found = None;
        self.for_each(&mut |k, b| {
            if found.is_none() && k == key {
                found = Some(b.clone());
            }
        });
        found
    }
}

impl<K, S> Keys for Registry<K, S>
where
    K: Hash + Eq + Clone + Send + Sync + Display + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    fn name(&self) -> String {
        self.factory().name().to_owned()
    }
    fn max_keys(&self) -> usize {
        Registry::max_keys(self)
    }
    fn for_each(&self, f: &mut dyn FnMut(String, &CircuitBreaker)) {
        Registry::for_each(self, |k, b| f(k.to_string(), b));
    }
    fn policy_dsl(&self) -> String {
        self.factory().policy().to_string()
    }
}

/// A pipeline added to the builder.
#[derive(Clone)]
pub(crate) enum PipelineRef {
    /// Boxed: a pipeline is a few hundred bytes, a live one a pointer.
    Fixed(Box<Pipeline>),
    Live(LivePipeline),
}

impl PipelineRef {
    fn current(&self) -> Pipeline {
        match self {
            PipelineRef::Fixed(p) => (**p).clone(),
            PipelineRef::Live(l) => (*l.current()).clone(),
        }
    }
}

/// The sources added to the builder.
#[derive(Clone, Default)]
pub(crate) struct Sources {
    pub(crate) registries: Vec<PolicyRegistry>,
    pub(crate) annotated: bool,
    pub(crate) pipelines: Vec<(String, PipelineRef)>,
    pub(crate) breakers: Vec<(String, CircuitBreaker)>,
    pub(crate) keyed: Vec<(String, Arc<dyn Keys>)>,
    pub(crate) shared: Vec<(String, Arc<dyn crate::fleet::Shared>)>,
    /// Fleet backends searched for shared breakers besides the installed one.
    pub(crate) stores: Vec<Arc<dyn crate::fleet::Index>>,
}

/// Rows under construction, with unique ids.
#[derive(Default)]
struct Rows {
    items: Vec<Item>,
    /// Breaker name -> row index (the first row of that name).
    by_name: HashMap<String, usize>,
    ids: HashMap<String, usize>,
}

impl Rows {
    fn push(&mut self, mut item: Item, name: &str) -> usize {
        let base = item.id.clone();
        let mut n = 1;
        while self.ids.contains_key(&item.id) {
            n += 1;
            item.id = format!("{base}#{n}");
        }
        let i = self.items.len();
        self.ids.insert(item.id.clone(), i);
        self.by_name.entry(name.to_owned()).or_insert(i);
        self.items.push(item);
        i
    }
}

fn registry_source(r: &PolicyRegistry) -> Source {
    match r.source_file() {
        Some(path) => Source::File {
            path: path.to_owned(),
            generation: r.generation(),
        },
        None => Source::Config {
            generation: r.generation(),
        },
    }
}

impl Sources {
    /// The registries whose policies are listed: the installed one, then those added.
    pub(crate) fn all_registries(&self) -> Vec<PolicyRegistry> {
        let mut all: Vec<PolicyRegistry> = config::installed().into_iter().cloned().collect();
        all.extend(self.registries.iter().cloned());
        all
    }

    /// Every row, in the order of the [module docs](self).
    pub(crate) fn list(&self) -> Vec<Item> {
        let mut rows = Rows::default();
        for registry in self.all_registries() {
            for name in registry.names() {
                let (Some(breaker), Some(policy)) = (registry.breaker(&name), registry.get(&name))
                else {
                    continue;
                };
                rows.push(
                    Item {
                        id: name.clone(),
                        kind: Kind::Policy,
                        layers: policy.effective_order(),
                        policy: Some((*policy).clone()),
                        breaker: Some(breaker),
                        keys: None,
                        source: registry_source(&registry),
                        used_by: Vec::new(),
                        fleet: None,
                    },
                    &name,
                );
            }
        }
        if self.annotated {
            for f in annotated::functions() {
                self.function(&mut rows, f);
            }
        }
        for (name, pipeline) in &self.pipelines {
            let p = pipeline.current();
            let Some(breaker) = p.breaker().cloned() else {
                continue;
            };
            let layers = p.order().to_vec();
            if let Some(&i) = rows.by_name.get(breaker.name()) {
                let row = &mut rows.items[i];
                row.used_by.push(name.clone());
                if row.layers.is_empty() {
                    row.layers = layers;
                }
                if row.policy.is_none() {
                    row.policy = Some(p.policy());
                }
                continue;
            }
            let breaker_name = breaker.name().to_owned();
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Pipeline,
                    breaker: Some(breaker),
                    keys: None,
                    policy: Some(p.policy()),
                    source: Source::Code,
                    layers,
                    used_by: vec![name.clone()],
                    fleet: None,
                },
                &breaker_name,
            );
        }
        for (name, breaker) in &self.breakers {
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Plain,
                    breaker: Some(breaker.clone()),
                    keys: None,
                    policy: None,
                    source: Source::Code,
                    layers: Vec::new(),
                    used_by: Vec::new(),
                    fleet: None,
                },
                breaker.name(),
            );
        }
        for (name, shared) in &self.shared {
            let breaker = shared.local().clone();
            let breaker_name = breaker.name().to_owned();
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Shared,
                    breaker: Some(breaker),
                    keys: None,
                    policy: None,
                    source: Source::Code,
                    layers: Vec::new(),
                    used_by: Vec::new(),
                    fleet: Some(Arc::clone(shared)),
                },
                &breaker_name,
            );
        }
        for (name, keys) in &self.keyed {
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Keyed,
                    breaker: None,
                    keys: Some(Arc::clone(keys)),
                    policy: None,
                    source: Source::Code,
                    layers: Vec::new(),
                    used_by: Vec::new(),
                    fleet: None,
                },
                name,
            );
        }
        self.attach_fleet(&mut rows);
        rows.items
    }

    /// The breaker names whose transitions `items` (this source's rows) show, and those of
    /// rows not built yet: every annotated function (built on its first call) and every named
    /// policy of the registries listed.
    pub(crate) fn names(&self, items: &[Item]) -> std::collections::HashSet<String> {
        let mut names = std::collections::HashSet::new();
        for item in items {
            if let Some(b) = &item.breaker {
                names.insert(b.name().to_owned());
            }
            if let Some(k) = &item.keys {
                names.insert(k.name());
            }
        }
        if self.annotated {
            for f in annotated::functions() {
                names.insert(f.name().to_owned());
                if let Some(policy) = f.policy() {
                    names.insert(policy.to_owned());
                }
            }
        }
        for registry in self.all_registries() {
            names.extend(registry.names());
        }
        names
    }

    /// The fleet side of `breaker` (a keyed group's key, say), from the fleet backends.
    pub(crate) fn fleet_of(
        &self,
        breaker: &CircuitBreaker,
    ) -> Option<Arc<dyn crate::fleet::Shared>> {
        if !breaker.has_fleet_hook() {
            return None;
        }
        crate::fleet::indexes(&self.stores)
            .iter()
            .find_map(|ix| ix.of(breaker))
    }

    /// Gives every row whose breaker a fleet backend shares its fleet side, and adds a row
    /// for each breaker shared there that no source shows (shared by the program with
    /// `Store::share` and not added, say). Keyed breakers stay in their groups.
    fn attach_fleet(&self, rows: &mut Rows) {
        let indexes = crate::fleet::indexes(&self.stores);
        if indexes.is_empty() {
            return;
        }
        let mut by_name: std::collections::BTreeMap<String, Arc<dyn crate::fleet::Shared>> =
            std::collections::BTreeMap::new();
        for ix in &indexes {
            for shared in ix.all() {
                by_name
                    .entry(shared.local().name().to_owned())
                    .or_insert(shared);
            }
        }
        for row in &mut rows.items {
            let Some(breaker) = &row.breaker else {
                continue;
            };
            if row.fleet.is_some() {
                by_name.remove(breaker.name());
            } else if breaker.has_fleet_hook() {
                row.fleet = by_name.remove(breaker.name());
            }
        }
        for (name, shared) in by_name {
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Shared,
                    breaker: Some(shared.local().clone()),
                    keys: None,
                    policy: None,
                    source: Source::Code,
                    layers: Vec::new(),
                    used_by: Vec::new(),
                    fleet: Some(shared),
                },
                &name,
            );
        }
    }

    fn function(&self, rows: &mut Rows, f: annotated::Function) {
        let name = f.name().to_owned();
        if let Some(policy_name) = f.policy() {
            let registry = f.registry();
            if f.is_keyed() {
                let (Some(keys), Some(registry)) = (f.keys(), registry) else {
                    return;
                };
                let policy = registry.get(policy_name);
                rows.push(
                    Item {
                        id: name.clone(),
                        kind: Kind::Keyed,
                        breaker: None,
                        keys: Some(Arc::new(keys)),
                        layers: policy
                            .as_ref()
                            .map(|p| p.effective_order())
                            .unwrap_or_default(),
                        policy: policy.map(|p| (*p).clone()),
                        source: registry_source(&registry),
                        used_by: vec![name.clone()],
                        fleet: None,
                    },
                    &name,
                );
                return;
            }
            // The policy's row, when its registry is listed; else a row of the function's own
            // (a registry of an embedded `config = ".."` file).
            if let Some(&i) = rows.by_name.get(policy_name) {
                rows.items[i].used_by.push(name);
                return;
            }
            let (Some(breaker), Some(registry)) = (f.breaker(), registry) else {
                return;
            };
            let policy = registry.get(policy_name);
            let breaker_name = breaker.name().to_owned();
            rows.push(
                Item {
                    id: breaker_name.clone(),
                    kind: Kind::Policy,
                    breaker: Some(breaker),
                    keys: None,
                    layers: policy
                        .as_ref()
                        .map(|p| p.effective_order())
                        .unwrap_or_default(),
                    policy: policy.map(|p| (*p).clone()),
                    source: registry_source(&registry),
                    used_by: vec![name],
                    fleet: None,
                },
                &breaker_name,
            );
            return;
        }
        let policy = f.attribute_policy();
        let layers = policy
            .as_ref()
            .map(|p| p.effective_order())
            .unwrap_or_default();
        let source = Source::Attribute {
            function: name.clone(),
        };
        if f.is_keyed() {
            let Some(keys) = f.keys() else { return };
            rows.push(
                Item {
                    id: name.clone(),
                    kind: Kind::Keyed,
                    breaker: None,
                    keys: Some(Arc::new(keys)),
                    policy,
                    source,
                    layers,
                    used_by: vec![name.clone()],
                    fleet: None,
                },
                &name,
            );
            return;
        }
        let Some(breaker) = f.breaker() else { return };
        rows.push(
            Item {
                id: name.clone(),
                kind: Kind::Function,
                breaker: Some(breaker),
                keys: None,
                policy,
                source,
                layers,
                used_by: vec![name.clone()],
                fleet: None,
            },
            &name,
        );
    }
}

/// The annotated functions of the program, called or not.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct FunctionView {
    pub(crate) name: &'static str,
    /// Its `policy = ".."`, if any.
    pub(crate) policy: Option<&'static str>,
    pub(crate) keyed: bool,
    /// Whether it has been called (its breaker exists).
    pub(crate) called: bool,
}

pub(crate) fn functions() -> Vec<FunctionView> {
    annotated::functions()
        .map(|f| FunctionView {
            name: f.name(),
            policy: f.policy(),
            keyed: f.is_keyed(),
            called: f.breaker().is_some() || f.keys().is_some(),
        })
        .collect()
}
