//! The process-wide policy registry: the one `#[circuit_breaker(policy = "..")]` reads.
//!
//! # Why
//! An annotated function has no argument to receive a registry through, so named policies come
//! from one place in the process, set once at start-up, the way a global `tracing` subscriber
//! or `log` logger is. Everything else (reloading, looking a policy up by hand) goes through the
//! [`PolicyRegistry`] itself, which [`installed`] hands back.

use super::registry::PolicyRegistry;
use std::sync::OnceLock;

static INSTALLED: OnceLock<PolicyRegistry> = OnceLock::new();

/// Makes `registry` the process-wide source of named policies, for every
/// `#[circuit_breaker(policy = "..")]` function and anyone calling [`installed`].
///
/// Install it at start-up, before the first call of an annotated function: a function reads
/// its policy on its first call and keeps that pipeline (its breaker follows
/// [`PolicyRegistry::reload`]; see the `breaker` crate's documentation of `policy`).
///
/// # Errors
/// If a registry is already installed, `registry` is handed back and nothing changes.
///
/// # Examples
/// ```
/// use breaker_core::config::{self, Format, Loader, PolicyRegistry};
/// let registry = PolicyRegistry::load(Loader::text(
///     "[policies.inventory]\nbreaker = \"3 consecutive, open 10s\"\n",
///     Format::Toml,
/// ))?;
/// config::install(registry).expect("installed once, at start-up");
/// let inventory = config::installed().unwrap().get("inventory").unwrap();
/// assert_eq!(inventory.breaker.as_ref().unwrap().consecutive_failures, Some(3));
/// # Ok::<(), breaker_core::config::ConfigErrors>(())
/// ```
pub fn install(registry: PolicyRegistry) -> Result<&'static PolicyRegistry, PolicyRegistry> {
    let mut registry = Some(registry);
    let installed = INSTALLED.get_or_init(|| registry.take().expect("taken once"));
    match registry {
        None => Ok(installed),
        Some(rejected) => Err(rejected),
    }
}

/// The registry made process-wide by [`install`], if any.
pub fn installed() -> Option<&'static PolicyRegistry> {
    INSTALLED.get()
}
