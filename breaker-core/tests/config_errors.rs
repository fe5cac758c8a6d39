//! Every mistake of a config file at once (issue 17): for TOML, YAML and JSON alike, every
//! unknown key, value of the wrong type, invalid value and bad environment override, each at
//! its line and column (1-based, in characters, at the first character of the key or value),
//! in file order.

use breaker_core::config::{Format, Loader};

fn errors(text: &str, format: Format, env: &[(&str, &str)]) -> Vec<String> {
    let err = Loader::text(text, format)
        .env_vars(env.iter().copied())
        .load()
        .expect_err("the config must be rejected");
    err.errors().iter().map(ToString::to_string).collect()
}

const ENV: &[(&str, &str)] = &[
    ("BREAKER__POLICIES__PAYMENTS__TIMEOUT", "0s"),
    ("BREAKER__POLICIES__INVENTRY__TIMEOUT", "1s"),
    ("BREAKER__POLICIES__PAYMENTS__BREAKER__THRESHHOLD", "3"),
];

const TOML: &str = r#"[default]
timout = "2s"
idempotent = "yes"

[default.breaker]
threshold = 5
cooldown = "30 parsecs"

[policies.inventory]
retry = "3x exp"
deadline = 10

[policies.inventory.bulkhead]
max_concurent = 4

[policies.payments.breaker]
consecutive_failures = 0
half_open_probes = "2"

[policies.payments.retry]
max_attempts = 101
"#;

const YAML: &str = r#"default:
  timout: 2s
  idempotent: "yes"
  breaker:
    threshold: 5
    cooldown: 30 parsecs
policies:
  inventory:
    retry: 3x exp
    deadline: 10
    bulkhead:
      max_concurent: 4
  payments:
    breaker:
      consecutive_failures: 0
      half_open_probes: "2"
    retry:
      max_attempts: 101
"#;

const JSON: &str = r#"{
  "default": {
    "timout": "2s",
    "idempotent": "yes",
    "breaker": { "threshold": 5, "cooldown": "30 parsecs" }
  },
  "policies": {
    "inventory": {
      "retry": "3x exp",
      "deadline": 10,
      "bulkhead": { "max_concurent": 4 }
    },
    "payments": {
      "breaker": { "consecutive_failures": 0, "half_open_probes": "2" },
      "retry": { "max_attempts": 101 }
    }
  }
}
"#;

/// The messages of the mistakes of every file, with the positions of one format: the same
/// mistakes in TOML, YAML and JSON give the same errors, in the same (file) order.
fn expected(at: [&str; 9]) -> Vec<String> {
    let breaker_keys = "`consecutive_failures`, `failure_rate`, `slow_call_duration`, \
                        `slow_call_rate`, `window`, `min_calls`, `cooldown`, \
                        `cooldown_multiplier`, `cooldown_max`, `cooldown_jitter`, \
                        `half_open_probes`, `successes_to_close`, `max_probe_wait`, \
                        `neutral_probe`";
    let file = [
        "default.timout: unknown field `timout`, expected one of `breaker`, `retry`, \
         `timeout`, `deadline`, `bulkhead`, `order`, `idempotent`, `max_keys`, `key_idle`, `scope`; \
         did you mean `timeout`?"
            .to_owned(),
        "default.idempotent: invalid type: string \"yes\", expected a boolean".to_owned(),
        format!(
            "default.breaker.threshold: unknown field `threshold`, expected one of \
             {breaker_keys}; did you mean `consecutive_failures`? (the attribute calls it \
             `threshold`)"
        ),
        "default.breaker.cooldown: unknown duration unit `parsecs` in `30 parsecs` at 3..10; \
         expected one of `ns`, `us`, `ms`, `s`, `m`, `h`, `d` or `w` (in \"30 parsecs\")"
            .to_owned(),
        "policies.inventory.deadline: invalid type: integer `10`, expected a string: A duration \
         such as \"250ms\", \"30s\" or \"1m 30s\"."
            .to_owned(),
        "policies.inventory.bulkhead.max_concurent: unknown field `max_concurent`, expected one \
         of `max_concurrent`, `max_wait`; did you mean `max_concurrent`?"
            .to_owned(),
        "policies.payments.breaker.consecutive_failures: must be at least 1, got 0".to_owned(),
        "policies.payments.breaker.half_open_probes: invalid type: string \"2\", expected u32"
            .to_owned(),
        "policies.payments.retry.max_attempts: must be in 1..=100 (attempts in total, the first \
         included), got 101"
            .to_owned(),
    ];
    let env = [
        "(env BREAKER__POLICIES__INVENTRY__TIMEOUT): policies.inventry.timeout: no policy \
         `inventry` to override (the file has `inventory`, `payments`); an override changes a \
         policy of the file, it does not add one"
            .to_owned(),
        format!(
            "(env BREAKER__POLICIES__PAYMENTS__BREAKER__THRESHHOLD): \
             policies.payments.breaker.threshhold: unknown field `threshhold`, expected one of \
             {breaker_keys}; did you mean `consecutive_failures`? (the attribute calls it \
             `threshold`)"
        ),
        "(env BREAKER__POLICIES__PAYMENTS__TIMEOUT): policies.payments.timeout: must be \
         non-zero, got 0s"
            .to_owned(),
    ];
    at.iter()
        .zip(file)
        .map(|(at, e)| format!("{at}: {e}"))
        .chain(env)
        .collect()
}

/// Unknown keys in four tables (one of them the attribute's name for a key, one from an
/// environment variable), values of the wrong type, an invalid DSL string, invalid values
/// (one from a variable) and an override of a policy the file does not have: all reported,
/// none of the validator's follow-on errors (the retry of `inventory` that `idempotent` would
/// have allowed, the bulkhead's `max_concurrent` that the misspelled key would have set).
#[test]
fn toml_every_mistake_at_once() {
    assert_eq!(
        errors(TOML, Format::Toml, ENV),
        expected(["2:1", "3:14", "6:1", "7:12", "11:12", "14:1", "17:24", "18:20", "21:16"])
    );
}

#[test]
fn yaml_every_mistake_at_once() {
    assert_eq!(
        errors(YAML, Format::Yaml, ENV),
        expected(["2:3", "3:15", "5:5", "6:15", "10:15", "12:7", "15:29", "16:25", "18:21"])
    );
}

#[test]
fn json_every_mistake_at_once() {
    assert_eq!(
        errors(JSON, Format::Json, ENV),
        expected(["3:5", "4:19", "5:18", "5:46", "10:19", "11:21", "14:44", "14:67", "15:34"])
    );
}

/// A syntax error is the one error of a file that is not well-formed, at its position.
#[test]
fn a_file_that_is_not_well_formed_stops_at_its_first_syntax_error() {
    let one = |text: &str, format| errors(text, format, &[]);
    assert_eq!(
        one("[policies.a]\ntimeout = \"2s\nretry = 5\n", Format::Toml),
        ["2:14: .: invalid basic string, expected `\"`"]
    );
    // The parser names line 3, past the end of the file: the end of the last line instead.
    assert_eq!(
        one("policies:\n  a: [1, 2\n", Format::Yaml),
        ["2:11: .: while parsing a flow sequence, expected ',' or ']'"]
    );
    assert_eq!(
        one("{\"policies\": {\"a\": {,}}}", Format::Json),
        ["1:21: .: unexpected token in object"]
    );
    assert_eq!(
        one("", Format::Json),
        ["1:1: .: expected a JSON object, got the end of the input"]
    );
}

/// The bounds of a `key = ..` function's breakers of keys (`max_keys`, `key_idle`) are set per
/// policy, inherited from `default`, validated at their keys, and printed so they load back.
#[test]
fn key_bounds_per_policy() {
    use std::time::Duration;
    let text = "[default]\nkey_idle = \"10m\"\n[policies.a]\nmax_keys = 500\n[policies.b]\n\
                key_idle = \"1m\"\n[policies.c]\n";
    let policies = breaker_core::config::load_str(text, Format::Toml).unwrap();
    let bounds = |name| {
        let b = policies.key_bounds(name);
        (b.max_keys, b.key_idle)
    };
    assert_eq!(bounds("a"), (Some(500), Some(Duration::from_secs(600))));
    assert_eq!(bounds("b"), (None, Some(Duration::from_secs(60))));
    assert_eq!(bounds("c"), (None, Some(Duration::from_secs(600))));
    let printed = policies.to_string();
    assert!(
        printed.contains("[policies.a]\nidempotent = false\nmax_keys = 500\nkey_idle = \"10m\"\n"),
        "{printed}"
    );
    assert_eq!(
        breaker_core::config::load_str(&printed, Format::Toml).unwrap(),
        policies
    );
    assert_eq!(
        errors(
            "[policies.a]\nmax_keys = 0\nkey_idle = \"0s\"\n[policies.b]\nmax_keys = -1\n",
            Format::Toml,
            &[]
        ),
        [
            "2:12: policies.a.max_keys: must be at least 1, got 0",
            "3:12: policies.a.key_idle: must be non-zero, got 0s",
            "5:12: policies.b.max_keys: invalid value: integer `-1`, expected u32",
        ]
    );
}

/// Scopes and the `[store]` table: every mistake at once, at its key; a shared scope without
/// a store is an error, never a silent local breaker; an environment override reaches the
/// store table.
#[test]
fn scopes_and_the_store_table_report_every_mistake_at_once() {
    let text = r#"[policies.payments]
breaker = "5 consecutive, open 30s"
scope = "sharde"

[policies.orders]
breaker = "5 consecutive, open 30s"
scope = "quorum(0)"

[policies.search]
breaker = "5 consecutive, open 30s"
scope = "shared"

[policies.plain]
timeout = "1s"
scope = "shared"
"#;
    let got = errors(text, Format::Toml, &[]);
    assert_eq!(
        got,
        [
            "3:9: policies.payments.scope: unknown scope `sharde` at 0..6; expected one of \
             `local`, `shared` or `quorum(k)` with k in 1..=1000; did you mean `shared`?",
            "7:9: policies.orders.scope: quorum `0` is out of range: must be in 1..=1000 at 7..8 \
             (in \"quorum(0)\")",
            "11:9: policies.search.scope: scope `shared` of policy `search` needs a `[store]` \
             table (`url`, `namespace`); a shared breaker never falls back to local silently",
            "15:9: policies.plain.scope: scope `shared` of policy `plain` shares its breaker, \
             but the policy has no `breaker`",
        ],
        "{got:#?}"
    );

    let text = r#"[policies.search]
breaker = "5 consecutive, open 30s"
scope = "shared"

[store]
url = "http://user:secret@cache:6379"
flush_intervall = "1s"
on_error = "shut"
"#;
    let got = errors(text, Format::Toml, &[]);
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(got.iter().all(|e| !e.contains("secret")), "{got:#?}");
    assert!(
        got[1].contains("store.url: unsupported URL scheme `http`"),
        "{got:#?}"
    );
    assert!(got[2].contains("store.flush_intervall"), "{got:#?}");
    assert!(
        got[3].contains("store.on_error: unknown store-error mode `shut`"),
        "{got:#?}"
    );
    assert!(
        got[0].contains("5:1: store: missing key `namespace` in the `[store]` table"),
        "{got:#?}"
    );
}

#[test]
fn a_store_table_with_env_overrides_loads_with_the_scopes() {
    use breaker_core::scope::{Scope, StoreErrorMode};
    let text = r#"[default]
scope = "quorum(2)"

[policies.search]
breaker = "5 consecutive, open 30s"

[policies.payments]
breaker = "5 consecutive, open 30s"
scope = "local"

[store]
url = "redis://127.0.0.1:6379/"
namespace = "shop"
"#;
    let policies = Loader::text(text, Format::Toml)
        .env_vars([
            ("BREAKER__STORE__URL", "redis://app:hunter2@10.0.0.5:6379/"),
            ("BREAKER__STORE__FLUSH_INTERVAL", "250ms"),
            ("BREAKER__STORE__ON_ERROR", "closed(30s)"),
            ("BREAKER__STORE__REPLICA", "web-1"),
        ])
        .load()
        .unwrap();
    assert_eq!(
        policies.scope("search"),
        Scope::Quorum(2),
        "inherited from default"
    );
    assert_eq!(policies.scope("payments"), Scope::Local);
    assert_eq!(policies.scope("nope"), Scope::Local);
    let st = policies.store().unwrap();
    assert_eq!(st.url, "redis://app:hunter2@10.0.0.5:6379/");
    assert_eq!(st.namespace, "shop");
    assert_eq!(st.replica.as_deref(), Some("web-1"));
    assert_eq!(
        st.flush_interval,
        Some(std::time::Duration::from_millis(250))
    );
    assert_eq!(
        st.on_error,
        StoreErrorMode::Closed {
            grace: std::time::Duration::from_secs(30)
        }
    );
    let printed = policies.to_string();
    assert!(printed.contains("scope = \"quorum(2)\""), "{printed}");
    assert!(
        printed.contains("url = \"redis://app:***@10.0.0.5:6379/\""),
        "{printed}"
    );
    assert!(!printed.contains("hunter2"), "{printed}");
    // What is printed loads back to the same scopes.
    let again = Loader::text(&printed, Format::Toml).load().unwrap();
    assert_eq!(again.scope("search"), Scope::Quorum(2));
}
