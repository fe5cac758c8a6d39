//! A reload reaches every layer of `#[circuit_breaker(policy = "..")]` functions (issue 17):
//! after the installed registry reloads, new calls use their policy's new retry, timeout,
//! deadline and bulkhead, a call in flight finishes under the old ones, and the breaker keeps
//! its state, and a rate limit per key keeps each key's limiter unless its policy changed. On
//! tokio's paused clock. One test: the installed registry is the process's.
#![cfg(feature = "config")]

use breaker::config::{self, Loader, PolicyRegistry};
use breaker::{circuit_breaker, Clock, Error, State};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[circuit_breaker(policy = "retried")]
async fn retried(calls: Arc<AtomicU32>) -> Result<(), &'static str> {
    calls.fetch_add(1, Ordering::Relaxed);
    Err("down")
}

#[circuit_breaker(policy = "timed")]
async fn timed(ms: u64) -> Result<u64, &'static str> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[circuit_breaker(policy = "deadlined")]
async fn deadlined(ms: u64) -> Result<u64, &'static str> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[circuit_breaker(policy = "bounded")]
async fn bounded(ms: u64) -> Result<u64, &'static str> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[circuit_breaker(policy = "tenants", key = tenant)]
async fn tenants(tenant: &str) -> Result<(), &'static str> {
    let _ = tenant;
    Ok(())
}

#[circuit_breaker(policy = "timed")]
async fn timed_again(ms: u64) -> Result<u64, &'static str> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

fn file(attempts: u32, limit_ms: u32, concurrent: u32) -> String {
    format!(
        "[policies.retried]\nretry = \"{attempts}x fixed 10ms\"\nidempotent = true\n\
         breaker = \"3 consecutive, open 30s\"\norder = \"breaker > retry\"\n\
         [policies.timed]\ntimeout = \"{limit_ms}ms\"\n\
         [policies.deadlined]\ndeadline = \"{limit_ms}ms\"\n\
         [policies.bounded]\nbulkhead = \"{concurrent} concurrent\"\n\
         [policies.tenants]\nrate = \"1/1h burst {concurrent} per key\"\n"
    )
}

/// How many of `calls` calls of `tenant` at once its limit admits.
async fn tenant_admits(tenant: &str, calls: u32) -> u32 {
    let mut admitted = 0;
    for _ in 0..calls {
        admitted += u32::from(tenants(tenant).await.is_ok());
    }
    admitted
}

fn timed_out<T: std::fmt::Debug>(r: &Result<T, Error<&str>>, after_ms: u64) -> bool {
    matches!(r, Err(Error::Timeout(e)) if e.after == Duration::from_millis(after_ms))
}

#[tokio::test(start_paused = true)]
async fn a_reload_reaches_every_layer_of_annotated_functions() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("breaker-annotated-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policies.toml");
    std::fs::write(&path, file(2, 100, 1)).unwrap();
    let registry =
        PolicyRegistry::load_with_clock(Loader::file(&path).no_env(), Some(Clock::tokio()))
            .unwrap();
    let registry = config::install(registry).expect("the only install");

    // Before: 2 attempts, limits of 100 ms, 1 call at a time.
    let calls = Arc::new(AtomicU32::new(0));
    for _ in 0..2 {
        let r = retried(Arc::clone(&calls)).await;
        assert!(matches!(r, Err(Error::GaveUp { attempts: 2, .. })), "{r:?}");
    }
    assert_eq!(calls.swap(0, Ordering::Relaxed), 4);
    assert!(timed_out(&timed(150).await, 100));
    assert!(timed_out(&deadlined(150).await, 100));
    let (a, b) = tokio::join!(bounded(50), bounded(50));
    assert_eq!(a.unwrap(), 50);
    assert!(matches!(b, Err(Error::Rejected(_))), "{b:?}");
    // A burst of 1 an hour for each tenant.
    assert_eq!(tenant_admits("a", 3).await, 1);
    assert_eq!(tenant_admits("b", 3).await, 1);

    // A call in flight across the reload: started under the 100 ms timeout.
    let in_flight = tokio::spawn(timed(150));
    tokio::task::yield_now().await;

    std::fs::write(&path, file(4, 200, 2)).unwrap();
    let report = registry.reload().unwrap();
    assert_eq!(
        report.changed,
        ["bounded", "deadlined", "retried", "tenants", "timed"]
    );

    // After: 4 attempts, limits of 200 ms, 2 calls at a time; the call in flight kept its
    // timeout.
    let r = retried(Arc::clone(&calls)).await;
    assert!(matches!(r, Err(Error::GaveUp { attempts: 4, .. })), "{r:?}");
    assert_eq!(calls.load(Ordering::Relaxed), 4);
    // The breaker (outside the retry) counted 2 failed calls before the reload: this third
    // one opened it, so its state was kept.
    assert_eq!(registry.breaker("retried").unwrap().state(), State::Open);
    assert!(timed_out(&in_flight.await.unwrap(), 100));
    assert_eq!(timed(150).await.unwrap(), 150);
    assert_eq!(deadlined(150).await.unwrap(), 150);
    let (a, b, c) = tokio::join!(bounded(50), bounded(50), bounded(50));
    assert_eq!((a.unwrap(), b.unwrap()), (50, 50));
    assert!(matches!(c, Err(Error::Rejected(_))), "{c:?}");
    // The limit per key changed (a burst of 2): every tenant starts afresh under it.
    assert_eq!(tenant_admits("a", 3).await, 2);

    // A reload that leaves `tenants` as it is keeps each tenant's limiter: `a` spent its burst.
    std::fs::write(&path, file(4, 300, 2)).unwrap();
    assert_eq!(registry.reload().unwrap().changed, ["deadlined", "timed"]);
    assert_eq!(tenant_admits("a", 1).await, 0);
    assert_eq!(tenant_admits("b", 2).await, 2);

    // A reload that would take `per key` from a keyed function's only keyed layer, or give
    // it to a function without keys, is refused, naming them; the previous policies stay.
    let per_key_for_timed = file(4, 300, 2).replace(
        "[policies.timed]\ntimeout = \"300ms\"\n",
        "[policies.timed]\ntimeout = \"300ms\"\nrate = \"5/s per key\"\n",
    );
    std::fs::write(
        &path,
        per_key_for_timed.replace("burst 2 per key", "burst 2"),
    )
    .unwrap();
    let err = registry.reload().unwrap_err();
    // One error per function, in the order of their messages.
    let messages: Vec<_> = err.errors().iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`config_reload::tenants` has `key = ..`, but policy `tenants` has no breaker and \
             no rate limit `per key` to key; the previous policies stay in force",
            "`config_reload::timed_again` has no `key = ..`, but policy `timed` limits its rate \
             `per key`; add `key = ..` to the function to say what a key is, or remove `per \
             key`; the previous policies stay in force",
            "`config_reload::timed` has no `key = ..`, but policy `timed` limits its rate `per \
             key`; add `key = ..` to the function to say what a key is, or remove `per key`; the \
             previous policies stay in force",
        ]
    );
    assert_eq!(timed_again(250).await.unwrap(), 250);

    // A reload that drops a policy these functions use is refused, naming them.
    std::fs::write(&path, "[policies.timed]\ntimeout = \"1s\"\n").unwrap();
    let err = registry.reload().unwrap_err();
    assert_eq!(
        err.errors()
            .iter()
            .map(|e| (e.key_path.as_str(), e.message.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                "policies.bounded",
                "policy `bounded` is used by `config_reload::bounded` and the new config does \
                 not have it; the previous policies stay in force"
            ),
            (
                "policies.deadlined",
                "policy `deadlined` is used by `config_reload::deadlined` and the new config \
                 does not have it; the previous policies stay in force"
            ),
            (
                "policies.retried",
                "policy `retried` is used by `config_reload::retried` and the new config does \
                 not have it; the previous policies stay in force"
            ),
            (
                "policies.tenants",
                "policy `tenants` is used by `config_reload::tenants` and the new config does \
                 not have it; the previous policies stay in force"
            ),
        ]
    );
    assert_eq!(deadlined(150).await.unwrap(), 150);
    std::fs::remove_dir_all(&dir).unwrap();
}
