//! The start-up check (issue 17): installing a registry checks the named policy of every
//! annotated function linked into the program (registered at link time), not only of those
//! called so far, and refuses one that does not fit, listing every problem at once. The same
//! list enumerates the annotated functions. Its own test binary: the list is the program's.
#![cfg(feature = "config")]

use breaker::annotated;
use breaker::circuit_breaker;
use breaker::config::{self, Format, InstallError, Loader, PolicyRegistry};

#[circuit_breaker(policy = "inventory")]
async fn get_stock(sku: u64) -> Result<u64, std::io::Error> {
    Ok(sku)
}

#[circuit_breaker(policy = "payments")]
async fn charge(cents: u64) -> Result<u64, std::io::Error> {
    Ok(cents)
}

#[circuit_breaker(policy = "Search Index", name = "search")]
async fn search(q: u64) -> Result<u64, std::io::Error> {
    Ok(q)
}

#[circuit_breaker(policy = "inventory", key = sku)]
async fn get_stock_by_sku(sku: String) -> Result<String, std::io::Error> {
    Ok(sku)
}

#[circuit_breaker(policy = "tenants")]
async fn per_tenant(tenant: u64) -> Result<u64, std::io::Error> {
    Ok(tenant)
}

#[circuit_breaker(threshold = 5)]
async fn inline(x: u64) -> Result<u64, std::io::Error> {
    Ok(x)
}

#[test]
fn install_checks_every_annotated_function_before_any_call() {
    // `inventory` has no breaker for the keyed function; `payments` is missing; `Search
    // Index` can never be a policy name; `tenants` limits per key a function without keys.
    // None of the functions has been called.
    let registry = PolicyRegistry::load(Loader::text(
        "[policies.inventory]\ntimeout = \"1s\"\n[policies.other]\ntimeout = \"1s\"\n\
         [policies.tenants]\nrate = \"10/s per key\"\n",
        Format::Toml,
    ))
    .unwrap();
    let err = config::install(registry).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the policy registry does not fit the annotated functions:\n\
         policies.Search Index: `search` names an invalid policy name \"Search Index\": a name \
         is 1 to 64 lowercase ASCII letters, digits, `_` and `-` (so that it is a bare TOML key \
         and an environment variable can address it); no config file can define it\n\
         policies.inventory: `startup_check::get_stock_by_sku` has `key = ..`, but policy \
         `inventory` has no breaker and no rate limit `per key` to key\n\
         policies.payments: `startup_check::charge` uses policy `payments`, which the registry \
         does not have (it has `inventory`, `other`, `tenants`)\n\
         policies.tenants: `startup_check::per_tenant` has no `key = ..`, but policy `tenants` \
         limits its rate `per key`; add `key = ..` to the function to say what a key is, or \
         remove `per key`"
    );
    let InstallError::Unusable { errors, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(errors.errors().len(), 4);
    // Nothing was installed: the registry is handed back.
    assert!(config::installed().is_none());
    assert_eq!(
        err.into_registry().names(),
        ["inventory", "other", "tenants"]
    );
}

#[test]
fn the_annotated_functions_are_listed_before_any_call() {
    let listed: Vec<(&str, Option<&str>, bool)> = annotated::functions()
        .map(|f| (f.name(), f.policy(), f.is_keyed()))
        .collect();
    assert_eq!(
        listed,
        [
            ("search", Some("Search Index"), false),
            ("startup_check::charge", Some("payments"), false),
            ("startup_check::get_stock", Some("inventory"), false),
            ("startup_check::get_stock_by_sku", Some("inventory"), true),
            ("startup_check::inline", None, false),
            ("startup_check::per_tenant", Some("tenants"), false),
        ]
    );
    assert!(annotated::functions().all(|f| f.breaker().is_none() && f.config().is_none()));
}

// Only there to be registered: never called.
#[allow(dead_code)]
fn use_them() {
    let _ = (
        get_stock(1),
        charge(1),
        search(1),
        get_stock_by_sku(String::new()),
        inline(1),
        per_tenant(1),
    );
}
