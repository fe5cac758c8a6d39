//! Expansion snapshots and properties of the rewritten function.

use super::expand_str;
use std::path::Path;

/// Compares `actual` with the committed snapshot `name`; `BREAKER_SNAPSHOTS=overwrite`
/// rewrites it (review the diff).
fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"));
    let actual = pretty(actual);
    if std::env::var_os("BREAKER_SNAPSHOTS").is_some_and(|v| v == "overwrite") {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("missing snapshot {}: {e}", path.display()));
    assert_eq!(actual, expected, "expansion of {name} changed");
}

/// One statement or attribute per line, so a snapshot diff is readable.
fn pretty(tokens: &str) -> String {
    let mut out = String::new();
    for part in tokens.split_inclusive(['{', ';', '}']) {
        out.push_str(part.trim());
        out.push('\n');
    }
    out
}

const FN: &str = "async fn call(id: u64) -> Result<u64, E> { inner(id).await }";

#[test]
fn br_42_retry_outside_breaker_expands_in_declared_order() {
    let out = expand_str(
        r#"threshold = 5, retry = "3x", order = [retry, breaker]"#,
        FN,
    );
    assert!(
        out.contains(r#"order : :: core :: option :: Option :: Some (& ["retry" , "breaker"])"#),
        "{out}"
    );
    snapshot("br_42_retry_outside_breaker", &out);
}

#[test]
fn br_42_breaker_outside_retry_expands_in_declared_order() {
    let out = expand_str(
        r#"threshold = 5, retry = "3x", order = [breaker, retry]"#,
        FN,
    );
    assert!(
        out.contains(r#"order : :: core :: option :: Option :: Some (& ["breaker" , "retry"])"#),
        "{out}"
    );
    snapshot("br_42_breaker_outside_retry", &out);
}

#[test]
fn br_43_all_four_layers_in_declared_order() {
    let out = expand_str(
        r#"threshold = 5, retry = "3x", timeout = "1s", concurrency = 4, order = [timeout, breaker, retry, bulkhead]"#,
        FN,
    );
    snapshot("br_43_four_layers", &out);
}

#[test]
fn br_43_default_order_is_built_by_the_same_code() {
    use breaker_core::__private::InlinePolicy;
    use breaker_core::layer::Layer;
    let policy = InlinePolicy {
        retry: Some("3x"),
        timeout: Some("1s"),
        concurrency: Some(4),
        ..InlinePolicy::EMPTY
    }
    .build()
    .unwrap();
    // The default order restricted to the four layers configured (the breaker is always
    // there): `bulkhead > retry > breaker > timeout`.
    let configured = [
        Layer::Bulkhead,
        Layer::Retry,
        Layer::Breaker,
        Layer::Timeout,
    ];
    let expected: Vec<Layer> = Layer::DEFAULT_ORDER
        .into_iter()
        .filter(|l| configured.contains(l))
        .collect();
    assert_eq!(expected, configured);
    assert_eq!(policy.order.as_deref(), Some(&expected[..]));
}

#[test]
fn br_43_order_errors_point_at_the_item() {
    let out = expand_str(r#"retry = "3x", order = [retry, breaker, retry]"#, FN);
    assert!(out.contains("layer `retry` is listed twice"), "{out}");
    // The function is still emitted, unchanged.
    assert!(
        out.starts_with("async fn call (id : u64) -> Result < u64 , E >"),
        "{out}"
    );
}

#[test]
fn keyed_and_hooks() {
    let out = expand_str(
        "threshold = 2, key = id, classify = c, retry_if = t, fallback = f, name = \"n\"",
        FN,
    );
    snapshot("keyed_and_hooks", &out);
}

#[test]
fn named_policy_embeds_the_checked_file() {
    let out = expand_str(
        r#"policy = "inventory", config = "../tests/fixtures/breaker.toml""#,
        FN,
    );
    assert!(
        out.contains(":: breaker :: __private :: named_policy_needs_config ! ()"),
        "{out}"
    );
    assert!(
        out.contains(":: breaker :: __private :: Pipeline :: named (\"inventory\""),
        "{out}"
    );
    assert!(
        out.contains("file : \"../tests/fixtures/breaker.toml\""),
        "{out}"
    );
    assert!(out.contains(":: core :: include_str ! (\""), "{out}");
    // A policy defined elsewhere: no file, the installed registry at run time.
    let out = expand_str(r#"policy = "inventory""#, FN);
    assert!(out.contains("\"inventory\" , :: core :: concat !"), "{out}");
    assert!(
        out.contains(":: core :: option :: Option :: None)"),
        "{out}"
    );
}

#[test]
fn named_policy_errors_sit_under_the_literals() {
    let file = r#"config = "../tests/fixtures/breaker.toml""#;
    let out = expand_str(&format!(r#"policy = "inventry", {file}"#), FN);
    assert!(
        out.contains(
            "policy `inventry` not found in ../tests/fixtures/breaker.toml; available: \
             `inventory`, `payments`"
        ),
        "{out}"
    );
    let out = expand_str(
        r#"policy = "inventory", config = "../tests/fixtures/invalid.toml""#,
        FN,
    );
    assert!(
        out.contains(
            "policy `inventory` is invalid: ../tests/fixtures/invalid.toml:4:24: \
             policies.inventory.breaker.consecutive_failures: must be at least 1, got 0"
        ),
        "{out}"
    );
    let out = expand_str(r#"policy = "inventory", config = "nope.toml""#, FN);
    assert!(
        out.contains("cannot read config file `nope.toml`: no such file"),
        "{out}"
    );
    let out = expand_str(r#"policy = "inventory", config = "../Cargo.lock""#, FN);
    assert!(out.contains("has an unknown format"), "{out}");
    // The function is still emitted, unchanged.
    assert!(
        out.starts_with("async fn call (id : u64) -> Result < u64 , E >"),
        "{out}"
    );
}

#[test]
fn renamed_crate() {
    let out = expand_str("crate = ::other::breaker", FN);
    assert_eq!(
        out.matches(":: breaker :: __private").count(),
        out.matches(":: other :: breaker :: __private").count(),
        "{out}"
    );
    assert!(
        out.contains(":: other :: breaker :: __private :: Pipeline :: inline"),
        "{out}"
    );
}
