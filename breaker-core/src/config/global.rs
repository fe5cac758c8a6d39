//! The process-wide policy registry: the one `#[circuit_breaker(policy = "..")]` reads, checked
//! against every annotated function when it is installed.
//!
//! # Why
//! An annotated function has no argument to receive a registry through, so named policies come
//! from one place in the process, set once at start-up, the way a global `tracing` subscriber
//! or `log` logger is. Everything else (reloading, looking a policy up by hand) goes through the
//! [`PolicyRegistry`] itself, which [`installed`] hands back.
//!
//! A function naming a policy the registry lacks would only fail on its first call, which may
//! be hours after a deploy; so [`install`] checks every annotated function of the program (the
//! attribute registers each at link time, see [`crate::annotated::functions`]) and refuses a
//! registry that does not fit them all, listing every problem at once.

use super::error::{ConfigError, ConfigErrors};
use super::read::{invalid_name_message, is_valid_policy_name};
use super::registry::PolicyRegistry;
use std::fmt;
use std::sync::OnceLock;

static INSTALLED: OnceLock<PolicyRegistry> = OnceLock::new();

/// Why [`install`] refused a registry; the registry is handed back.
#[derive(Debug)]
#[non_exhaustive]
pub enum InstallError {
    /// A registry is installed already; nothing changed.
    AlreadyInstalled(PolicyRegistry),
    /// Annotated functions name policies the registry does not have, cannot have (an invalid
    /// name) or cannot use as they are (a `key = ..` function naming a policy without a
    /// breaker): one error per function and policy, sorted by policy and function.
    Unusable {
        /// The registry, not installed.
        registry: PolicyRegistry,
        /// Every problem.
        errors: ConfigErrors,
    },
}

impl InstallError {
    /// The registry that was not installed.
    pub fn into_registry(self) -> PolicyRegistry {
        match self {
            InstallError::AlreadyInstalled(r) | InstallError::Unusable { registry: r, .. } => r,
        }
    }
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::AlreadyInstalled(_) => {
                f.write_str("a policy registry is installed already; it is set once, at start-up")
            }
            InstallError::Unusable { errors, .. } => write!(
                f,
                "the policy registry does not fit the annotated functions:\n{errors}"
            ),
        }
    }
}

impl std::error::Error for InstallError {}

/// Makes `registry` the process-wide source of named policies, for every
/// `#[circuit_breaker(policy = "..")]` function and anyone calling [`installed`], after
/// checking that it fits every annotated function of the program.
///
/// Install it at start-up, before the first call of an annotated function. Each function then
/// runs under its policy's current version: a [`PolicyRegistry::reload`] reaches its retry,
/// timeout, deadline and bulkhead for the calls that start after it, and its breaker keeps its
/// state. A reload that would drop a policy some function names is refused.
///
/// # Errors
/// [`InstallError::Unusable`], listing every function whose policy is missing from the
/// registry, has an invalid name, or lacks the breaker its `key = ..` needs; or
/// [`InstallError::AlreadyInstalled`]. Either way `registry` is handed back and nothing
/// changes.
///
/// # Examples
/// ```
/// # use breaker_core as breaker;
/// use breaker::config::{self, Format, Loader, PolicyRegistry};
/// let registry = PolicyRegistry::load(Loader::text(
///     "[policies.inventory]\nbreaker = \"3 consecutive, open 10s\"\n",
///     Format::Toml,
/// ))?;
/// config::install(registry).expect("installed once, at start-up");
/// let inventory = config::installed().unwrap().get("inventory").unwrap();
/// assert_eq!(inventory.breaker.as_ref().unwrap().consecutive_failures, Some(3));
/// # Ok::<(), breaker::config::ConfigErrors>(())
/// ```
pub fn install(registry: PolicyRegistry) -> Result<&'static PolicyRegistry, InstallError> {
    if INSTALLED.get().is_some() {
        return Err(InstallError::AlreadyInstalled(registry));
    }
    let errors = check(&registry);
    if !errors.is_empty() {
        return Err(InstallError::Unusable {
            registry,
            errors: ConfigErrors(errors),
        });
    }
    registry.require(
        crate::annotated::registered::REGISTERED
            .iter()
            .filter_map(|r| Some((r.policy?.to_owned(), r.function.to_owned(), r.keyed))),
    );
    let mut registry = Some(registry);
    let installed = INSTALLED.get_or_init(|| registry.take().expect("taken once"));
    match registry {
        None => Ok(installed),
        Some(rejected) => Err(InstallError::AlreadyInstalled(rejected)),
    }
}

/// Every annotated function whose named policy `registry` cannot serve.
fn check(registry: &PolicyRegistry) -> Vec<ConfigError> {
    let mut uses: Vec<_> = crate::annotated::registered::REGISTERED
        .iter()
        .filter_map(|r| Some((r.policy?, r.function, r.keyed)))
        .collect();
    uses.sort_unstable();
    uses.dedup();
    let names = registry.names();
    let available = if names.is_empty() {
        "it has none".to_owned()
    } else {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        format!("it has {}", names.join(", "))
    };
    let mut errors = Vec::new();
    for (policy, function, keyed) in uses {
        let message = if !is_valid_policy_name(policy) {
            format!(
                "`{function}` names an {}; no config file can define it",
                invalid_name_message(policy)
            )
        } else {
            match registry.get(policy) {
                None => format!(
                    "`{function}` uses policy `{policy}`, which the registry does not have \
                     ({available})"
                ),
                Some(p) => match key_mismatch(policy, &p, keyed) {
                    Some(why) => format!("`{function}` {why}"),
                    None => continue,
                },
            }
        };
        errors.push(ConfigError {
            file: registry.file(),
            env: None,
            line: None,
            column: None,
            key_path: format!("policies.{policy}"),
            message,
        });
    }
    errors
}

/// Why a function with (`keyed`) or without `key = ..` cannot use policy `name`, if it
/// cannot, completing "`function` ...": a keyed function needs a breaker or a rate limit
/// `per key` to key; a rate limit `per key` needs the function's keys.
pub(crate) fn key_mismatch(
    name: &str,
    policy: &crate::policy::Policy,
    keyed: bool,
) -> Option<String> {
    let per_key = policy.rate_limit.is_some_and(|r| r.per_key);
    if keyed && policy.breaker.is_none() && !per_key {
        Some(format!(
            "has `key = ..`, but policy `{name}` has no breaker and no rate limit `per key` to \
             key"
        ))
    } else if !keyed && per_key {
        Some(format!(
            "has no `key = ..`, but policy `{name}` limits its rate `per key`; add `key = ..` \
             to the function to say what a key is, or remove `per key`"
        ))
    } else {
        None
    }
}

/// The registry made process-wide by [`install`], if any.
pub fn installed() -> Option<&'static PolicyRegistry> {
    INSTALLED.get()
}
