//! `#[circuit_breaker(policy = "..")]` with a registry installed at start-up
//! (`breaker::config::install`): the installed registry wins over the file named by `config`,
//! a function without `config` uses it too, and functions naming one policy share its breaker.
//! A test binary of its own, because the registry is process-wide.

use breaker::breaker::State;
use breaker::circuit_breaker;
use breaker::clock::Clock;
use breaker::config::{self, Format, Loader, PolicyRegistry};
use breaker::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

#[derive(Debug)]
struct Down;

/// `inventory` trips after one failure here (the file says three); no retry.
const INSTALLED: &str = r#"
[policies.inventory]
breaker = "1 consecutive, open 10s"
"#;

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let registry = PolicyRegistry::load_with_clock(
            Loader::text(INSTALLED, Format::Toml),
            Some(Clock::tokio()),
        )
        .unwrap();
        config::install(registry).expect("the only install");
    });
}

static CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(
    policy = "inventory",
    config = "tests/fixtures/breaker.toml",
    name = "installed_with_config"
)]
async fn with_config() -> Result<(), Down> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Down)
}

#[circuit_breaker(policy = "inventory", name = "installed_without_config")]
async fn without_config() -> Result<(), Down> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn installed_registry_wins_and_its_breaker_is_shared() {
    install();
    // One attempt (no retry in the installed policy), one failure: open.
    assert!(matches!(with_config().await, Err(Error::Inner(Down))));
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    let breaker = config::installed().unwrap().breaker("inventory").unwrap();
    assert_eq!(breaker.state(), State::Open);
    // The other function names the same policy, so the same breaker: rejected.
    assert!(matches!(without_config().await, Err(Error::Rejected(_))));
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(
        breaker::annotated::breaker("installed_without_config")
            .unwrap()
            .state(),
        State::Open
    );
}
