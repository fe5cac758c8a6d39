//! `#[circuit_breaker(scope = "shared")]` against a real server: before a store is installed
//! the first call panics with the documented message (never a silent local breaker); after
//! `breaker_redis::install(store)`, the function's breaker and its keys' breakers are shared
//! with the fleet. The other replica is a plain breaker of the same name on its own store
//! connection.
//!
//! Its own test binary: a store is installed once per process, and the `redis` binary checks
//! that none is.

#[macro_use]
#[path = "redis/common.rs"]
mod common;

use common::eventually;

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, RejectReason, State, Transition};
use breaker_core::{Error, Rejection};
use breaker_macros::circuit_breaker;
use breaker_redis::{ReplicaId, Store, StoreConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, PartialEq)]
struct Down;

#[circuit_breaker(crate = breaker_core, threshold = 3, cooldown = "30s", name = "checkout", scope = "shared")]
async fn checkout(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(1)
    }
}

#[circuit_breaker(crate = breaker_core, threshold = 2, cooldown = "30s", name = "hosts", key = host, scope = "quorum(1)")]
async fn get(host: &str, fail: bool) -> Result<u32, Down> {
    let _ = host;
    if fail {
        Err(Down)
    } else {
        Ok(2)
    }
}

/// A named policy of the installed registry, whose config gives it scope `shared`.
#[circuit_breaker(crate = breaker_core, policy = "orders")]
async fn orders(fail: bool) -> Result<u32, Down> {
    if fail {
        Err(Down)
    } else {
        Ok(3)
    }
}

fn config(url: &str, ns: &str, replica: &str) -> StoreConfig {
    StoreConfig::new(url, ns)
        .unwrap()
        .replica(ReplicaId::new(replica).unwrap())
        .flush_interval(Duration::from_secs(3600))
        .flush_jitter(0.0)
}

fn policy(threshold: u32) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: Some(threshold),
        cooldown: Duration::from_secs(30),
        cooldown_max: Duration::from_secs(30),
        ..BreakerPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attributed_function_of_a_shared_scope_is_shared_once_a_store_is_installed() {
    // No store yet: the first call panics, naming the fix; so does the next one.
    for _ in 0..2 {
        let e = tokio::spawn(checkout(false)).await.unwrap_err();
        let payload = e.into_panic();
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            message,
            "#[circuit_breaker]: breaker `checkout` has scope `shared` but no store is \
             installed: connect one (`breaker_redis::Store::connect`) and install it \
             (`breaker_redis::install`) before its first call, or give it scope `local`"
        );
    }

    let s = server!();
    let ns = common::unique_ns("attribute");
    let store = Store::connect(config(&s.url(), &ns, "a0")).await.unwrap();
    breaker_redis::install(store.clone()).unwrap();

    // The other replica: plain breakers of the same names on their own connection.
    let other = Store::connect(config(&s.url(), &ns, "a1")).await.unwrap();
    let seen: Arc<Mutex<Vec<Transition>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let twin = CircuitBreaker::builder(policy(3))
        .name("checkout")
        .on_transition(move |t| sink.lock().unwrap().push(t.clone()))
        .build()
        .unwrap();
    drop(other.share(&twin).unwrap());
    let hosts = CircuitBreaker::builder(policy(2))
        .name("hosts")
        .build_factory()
        .unwrap();
    let eu_twin = hosts.create_keyed("eu");
    drop(other.share(&eu_twin).unwrap());
    other.sync().await.unwrap();

    assert_eq!(checkout(false).await.unwrap(), 1);
    store.sync().await.unwrap();
    for _ in 0..3 {
        assert_eq!(checkout(true).await, Err(Error::Inner(Down)));
    }
    assert!(matches!(
        checkout(false).await,
        Err(Error::Rejected(Rejection::Breaker(_)))
    ));
    eventually("the other replica's `checkout` open", || {
        twin.state() == State::Open
    })
    .await;
    let t = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (t.to, t.origin.as_deref()),
        (State::Open, Some("a0")),
        "opened by the annotated function's replica"
    );
    assert_eq!(twin.try_acquire().unwrap_err().reason(), RejectReason::Open);

    // A key's breaker is shared as it is made: `eu` trips here and opens the twin's `eu`.
    assert_eq!(get("eu", false).await.unwrap(), 2);
    store.sync().await.unwrap();
    for _ in 0..2 {
        assert_eq!(get("eu", true).await, Err(Error::Inner(Down)));
    }
    eventually("the other replica's `hosts` key `eu` open", || {
        eu_twin.state() == State::Open
    })
    .await;
    assert_eq!(get("us", false).await.unwrap(), 2, "another key is its own");

    // A `policy = ".."` function of the installed registry: shared by its config's scope.
    // (The `[store]` table a shared scope needs; this process's store is the one installed.)
    let text = format!(
        "[store]\nurl = \"{}\"\nnamespace = \"{ns}\"\n\n[policies.orders]\n\
         breaker = \"2 consecutive, open 30s\"\nscope = \"shared\"\n",
        s.url()
    );
    let registry = breaker_core::config::PolicyRegistry::load(breaker_core::config::Loader::text(
        &text,
        breaker_core::config::Format::Toml,
    ))
    .unwrap();
    assert!(registry.scope("orders").is_shared());
    breaker_core::config::install(registry).unwrap();
    let orders_twin = CircuitBreaker::builder(policy(2))
        .name("orders")
        .build()
        .unwrap();
    drop(other.share(&orders_twin).unwrap());
    other.sync().await.unwrap();
    assert_eq!(orders(false).await.unwrap(), 3);
    store.sync().await.unwrap();
    for _ in 0..2 {
        assert_eq!(orders(true).await, Err(Error::Inner(Down)));
    }
    eventually("the other replica's `orders` open", || {
        orders_twin.state() == State::Open
    })
    .await;

    // A registry's pipeline of a shared scope, with no `share_policies`: shared by the
    // installed store when the pipeline is taken.
    let refunds_text = text.replace("orders", "refunds");
    let refunds_registry = breaker_core::config::PolicyRegistry::load(
        breaker_core::config::Loader::text(&refunds_text, breaker_core::config::Format::Toml),
    )
    .unwrap();
    let refunds = refunds_registry.pipeline("refunds").unwrap();
    assert!(refunds_registry
        .breaker("refunds")
        .unwrap()
        .has_fleet_hook());
    let refunds_twin = CircuitBreaker::builder(policy(2))
        .name("refunds")
        .build()
        .unwrap();
    drop(other.share(&refunds_twin).unwrap());
    other.sync().await.unwrap();
    store.sync().await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            refunds.call(|| async { Err::<u32, _>(Down) }).await,
            Err(Error::Inner(Down))
        );
    }
    eventually("the other replica's `refunds` open", || {
        refunds_twin.state() == State::Open
    })
    .await;

    // The deadline moved to the function's (tokio) clock: rejected with the fleet's rest.
    match checkout(false).await {
        Err(Error::Rejected(Rejection::Breaker(r))) => {
            let left = r.retry_after().unwrap();
            assert!(
                left > Duration::from_secs(25) && left <= Duration::from_secs(30),
                "{left:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}
