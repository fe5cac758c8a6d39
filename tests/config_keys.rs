//! `max_keys` and `key_idle` set per policy in a config file (issue 17) bound the breakers of
//! keys of a `#[circuit_breaker(policy = "..", key = ..)]` function, and win over the
//! attribute's own.
#![cfg(feature = "config")]

use breaker::{annotated, circuit_breaker, Error, Rejection};

#[derive(Debug)]
struct Down;

#[circuit_breaker(policy = "hosts", config = "tests/fixtures/keyed.toml", key = host, name = "from_config")]
async fn from_config(host: &str) -> Result<u32, Down> {
    let _ = host;
    Ok(1)
}

#[circuit_breaker(
    policy = "hosts",
    config = "tests/fixtures/keyed.toml",
    key = host,
    max_keys = 5,
    name = "attribute_too"
)]
async fn attribute_too(host: &str) -> Result<u32, Down> {
    let _ = host;
    Ok(1)
}

/// Two keys fill the policy's registry of 2; a third is refused.
macro_rules! assert_bounded_at_two {
    ($call:ident, $name:literal) => {
        assert_eq!($call("a").await.unwrap(), 1);
        assert_eq!($call("b").await.unwrap(), 1);
        let Err(Error::Rejected(Rejection::Keys(full))) = $call("c").await else {
            panic!(
                "{}: expected the registry of keys to be full at the policy's 2",
                $name
            )
        };
        assert_eq!(full.max_keys(), 2);
        assert_eq!(annotated::keys($name).unwrap().max_keys(), 2);
    };
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_policys_key_bounds_apply_and_win_over_the_attributes() {
    assert_bounded_at_two!(from_config, "from_config");
    assert_bounded_at_two!(attribute_too, "attribute_too");
}

#[circuit_breaker(policy = "tenants", config = "tests/fixtures/keyed.toml", key = tenant, name = "tenants_from_config")]
async fn tenants_from_config(tenant: &str) -> Result<u32, Down> {
    let _ = tenant;
    Ok(1)
}

/// A policy's rate limit `per key` from a config file: each tenant has its own limiter (a
/// burst of 1 an hour), and the policy's `max_keys` bounds them.
#[tokio::test(start_paused = true)]
async fn a_config_rate_limit_per_key_limits_each_key_within_the_policys_bounds() {
    assert_eq!(tenants_from_config("a").await.unwrap(), 1);
    let Err(Error::Rejected(Rejection::RateLimited(r))) = tenants_from_config("a").await else {
        panic!("a's second call in the hour: expected a rate-limit rejection")
    };
    assert_eq!(r.retry_after, std::time::Duration::from_secs(3600));
    assert_eq!(tenants_from_config("b").await.unwrap(), 1);
    let Err(Error::Rejected(Rejection::Keys(full))) = tenants_from_config("c").await else {
        panic!("a third tenant: expected the registry of limiters to be full at the policy's 2")
    };
    assert_eq!(
        (full.max_keys(), full.layer()),
        (2, breaker::layer::Layer::RateLimit)
    );
    // The policy has no breaker: there is none to key.
    assert!(annotated::breaker("tenants_from_config").is_none());
}
