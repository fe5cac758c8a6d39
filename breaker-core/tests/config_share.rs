//! A registry pipeline of a shared-scope policy whose breaker is not shared (no
//! `share_policies`, no store installed) runs local with a warning: one warning per breaker,
//! however many pipelines are taken (a service may take one per request), while every take
//! still tries to share the breaker, so a store installed later is picked up. A reload that
//! keeps the breaker keeps its warning spent; a new breaker gets its own.
//!
//! One test in its own binary: it installs the process's fleet backend, which is set once.
#![cfg(all(feature = "config", feature = "tokio"))]

use breaker_core::breaker::{CircuitBreaker, FleetBackend, ShareError};
use breaker_core::config::{self, Format, Policies, PolicyRegistry};
use breaker_core::scope::Scope;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tracing::Level;

const SHARED: &str = r#"[store]
url = "redis://127.0.0.1:6379"
namespace = "checkout"

[policies.search]
breaker = "2 consecutive, open 30s"
scope = "shared"
"#;

/// The same name without a breaker (so a later reload makes a new one).
const NO_BREAKER: &str = "[policies.search]\ntimeout = \"1s\"\n";

fn policies(text: &str) -> Policies {
    config::load_str(text, Format::Toml).unwrap()
}

/// The warning the registry logs for `search` while no store is installed.
const WARNING: &str = "WARN breaker policy `search` has scope `shared` but its breaker is not \
     shared (breaker `search` has scope `shared` but no store is installed: connect one \
     (`breaker_redis::Store::connect`) and install it (`breaker_redis::install`) before its \
     first call, or give it scope `local`); call `breaker_redis::share_policies` with this \
     registry, or `breaker_redis::install` a store before taking its pipeline: until then it \
     runs local policy=search scope=shared";

#[test]
fn a_breaker_that_runs_local_is_warned_of_once_and_still_shared_at_each_take() {
    let registry = PolicyRegistry::from_policies(policies(SHARED));
    let events = warnings();
    tracing::subscriber::with_default(events.clone(), || {
        // Three pipelines taken (and kept): one warning.
        let taken: Vec<_> = (0..3)
            .map(|_| registry.pipeline("search").unwrap())
            .collect();
        assert_eq!(events.take(), [WARNING]);
        assert!(!registry.breaker("search").unwrap().has_fleet_hook());

        // A reload that keeps the breaker keeps its warning spent.
        registry.reload_from(policies(SHARED)).unwrap();
        drop(registry.pipeline("search").unwrap());
        assert_eq!(events.take(), Vec::<String>::new());

        // A reload that drops the breaker, then one that makes a new one: warned of once.
        registry.reload_from(policies(NO_BREAKER)).unwrap();
        registry.reload_from(policies(SHARED)).unwrap();
        for _ in 0..2 {
            drop(registry.pipeline("search").unwrap());
        }
        assert_eq!(events.take(), [WARNING]);

        // A store installed later: every take tries to share the breaker again (this backend
        // accepts without installing a hook, so each take calls it), with no warning.
        struct Counting(Arc<AtomicU32>);
        impl FleetBackend for Counting {
            fn share(&self, breaker: &CircuitBreaker, scope: Scope) -> Result<(), ShareError> {
                assert_eq!(
                    (breaker.name(), scope.to_string().as_str()),
                    ("search", "shared")
                );
                self.0.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
        let calls = Arc::new(AtomicU32::new(0));
        assert!(breaker_core::breaker::install_backend(Arc::new(Counting(
            Arc::clone(&calls)
        ))));
        for _ in 0..2 {
            drop(registry.pipeline("search").unwrap());
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert_eq!(events.take(), Vec::<String>::new());
        drop(taken);
    });
}

#[path = "support/events.rs"]
mod events;
use events::Capture;

/// Every `warn` or more severe event, as `LEVEL target message k=v ...`.
fn warnings() -> Capture {
    Capture::new(|m| *m.level() <= Level::WARN).with_target()
}
