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
         `timeout`, `deadline`, `bulkhead`, `rate`, `hedge`, `adaptive`, `throttle`, `order`, `idempotent`, `max_keys`, `key_idle`, `scope`; \
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
        ["2:14: invalid basic string, expected `\"`"]
    );
    // The parser names line 3, past the end of the file: the end of the last line instead.
    assert_eq!(
        one("policies:\n  a: [1, 2\n", Format::Yaml),
        ["2:11: while parsing a flow sequence, expected ',' or ']'"]
    );
    assert_eq!(
        one("{\"policies\": {\"a\": {,}}}", Format::Json),
        ["1:21: unexpected token in object"]
    );
    assert_eq!(
        one("", Format::Json),
        ["1:1: expected a JSON object, got the end of the input"]
    );
}

/// A lone carriage return ends a line in YAML (YAML 1.2 counts `\r`, `\n` and `\r\n` as line
/// breaks) and in JSON (as its parser counts), so an error after one is at the line and column
/// the parser gives, never at a column past the end of a line; in TOML a lone `\r` is a
/// syntax error, at the carriage return itself; a `\r\n` is one break in every format.
#[test]
fn a_lone_carriage_return_is_a_line_break_where_the_format_says_so() {
    let one = |text: &str, format| errors(text, format, &[]);
    let yaml = "default:\r  breaker:\r    cooldwn: 30s\n";
    assert_eq!(
        one(yaml, Format::Yaml),
        [
            "3:5: default.breaker.cooldwn: unknown field `cooldwn`, expected one of \
             `consecutive_failures`, `failure_rate`, `slow_call_duration`, `slow_call_rate`, \
             `window`, `min_calls`, `cooldown`, `cooldown_multiplier`, `cooldown_max`, \
             `cooldown_jitter`, `half_open_probes`, `successes_to_close`, `max_probe_wait`, \
             `neutral_probe`; did you mean `cooldown`?"
        ]
    );
    // A syntax error after lone CRs: saphyr's own line and column (the `:` of line 3).
    assert_eq!(
        one("policies:\r  a: [1, 2\r  b: 3\r", Format::Yaml),
        ["3:4: illegal placement of ':' indicator"]
    );
    let json = "{\"default\":\r {\"breaker\":\r  {\"cooldwn\": \"30s\"}}}";
    let e = one(json, Format::Json);
    assert!(
        e[0].starts_with("3:4: default.breaker.cooldwn: unknown field"),
        "{e:?}"
    );
    // TOML: the carriage return's own line and column (`toml` names the character after it),
    // after a table header, a value and a comment.
    let bad = "must be followed by newline, expected newline";
    assert_eq!(
        one("[policies.a]\rtimeout = \"2s\"\n", Format::Toml),
        [format!("1:13: carriage return {bad}")]
    );
    assert_eq!(
        one(
            "[policies.a]\r\ntimeout = \"2s\"\r\nretry = \"3x\"\r",
            Format::Toml
        ),
        [format!("3:13: carriage return {bad}")]
    );
    assert_eq!(
        one("# für\rx\n", Format::Toml),
        [format!("1:6: carriage return {bad}")]
    );
    // CRLF: one break, in every format.
    let toml = "[default.breaker]\r\ncooldwn = \"30s\"\r\n";
    let e = one(toml, Format::Toml);
    assert!(
        e[0].starts_with("2:1: default.breaker.cooldwn: unknown field"),
        "{e:?}"
    );
    let e = one(
        "default:\r\n  breaker:\r\n    cooldwn: 30s\r\n",
        Format::Yaml,
    );
    assert!(
        e[0].starts_with("3:5: default.breaker.cooldwn: unknown field"),
        "{e:?}"
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

/// A flush interval the store does not take is refused where it is written, as `0s` is;
/// `StoreConfig::flush_interval` clamped it without a word.
#[test]
fn a_flush_interval_out_of_range_is_refused() {
    for (written, got) in [
        ("0s", "0s"),
        ("500us", "500us"),
        ("2h", "2h"),
        ("61m", "1h 1m"),
    ] {
        let text = format!(
            "[store]\nurl = \"redis://127.0.0.1:6379/\"\nnamespace = \"shop\"\n\
             flush_interval = \"{written}\"\n"
        );
        assert_eq!(
            errors(&text, Format::Toml, &[]),
            [format!(
                "4:18: store.flush_interval: must be in 1ms..=1h, got {got}"
            )],
            "{written}"
        );
    }
    for ok in ["1ms", "1h", "250ms"] {
        let text = format!(
            "[store]\nurl = \"redis://127.0.0.1:6379/\"\nnamespace = \"shop\"\n\
             flush_interval = \"{ok}\"\n"
        );
        assert!(Loader::text(&text, Format::Toml).load().is_ok(), "{ok}");
    }
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

// ---- a value of `default` invalid on its own: reported once, at `default` ----

const ZERO_COOLDOWN: &str = "default.breaker.cooldown: must be non-zero, got 0s (a breaker that \
                             never stays open protects nothing)";

/// A `default` that no policy inherits is still checked: an invalid value in it is an error
/// at its key (it used to load as "0 valid policies").
#[test]
fn an_invalid_default_is_an_error_when_no_policy_inherits_it() {
    let text = "[default.breaker]\ncooldown = \"0s\"\n";
    let err = Loader::text(text, Format::Toml).load().unwrap_err();
    assert_eq!(err.errors().len(), 1, "{err}");
    let e = &err.errors()[0];
    assert_eq!(
        (e.line, e.column, e.key_path.as_str()),
        (Some(2), Some(12), "default.breaker.cooldown")
    );
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [format!("2:12: {ZERO_COOLDOWN}")]
    );
}

/// An invalid value of `default` that many policies inherit is one error at its key, not one
/// per policy ("in policy `a`", "in policy `b`"); in TOML, YAML and JSON alike.
#[test]
fn an_invalid_default_inherited_by_many_policies_is_reported_once() {
    let toml = "[default.breaker]\ncooldown = \"0s\"\n[policies.a]\n[policies.b]\n";
    assert_eq!(
        errors(toml, Format::Toml, &[]),
        [format!("2:12: {ZERO_COOLDOWN}")]
    );
    let yaml = "default:\n  breaker:\n    cooldown: 0s\npolicies:\n  a: {}\n  b: {}\n";
    assert_eq!(
        errors(yaml, Format::Yaml, &[]),
        [format!("3:15: {ZERO_COOLDOWN}")]
    );
    let json = "{\n  \"default\": { \"breaker\": { \"cooldown\": \"0s\" } },\n  \
                \"policies\": { \"a\": {}, \"b\": {} }\n}\n";
    assert_eq!(
        errors(json, Format::Json, &[]),
        [format!("2:41: {ZERO_COOLDOWN}")]
    );
    // From an environment variable: once, named by the variable.
    assert_eq!(
        errors(
            "[policies.a]\n[policies.b]\n[default]\n",
            Format::Toml,
            &[("BREAKER__DEFAULT__TIMEOUT", "0s")]
        ),
        ["(env BREAKER__DEFAULT__TIMEOUT): default.timeout: must be non-zero, got 0s"]
    );
}

/// A value of `default` that a policy overrides is still an error: it is invalid where it is
/// written, and reported there once.
#[test]
fn an_invalid_default_a_policy_overrides_is_still_reported_once() {
    let text = "[default.breaker]\ncooldown = \"0s\"\n[policies.a.breaker]\ncooldown = \"10s\"\n\
                [policies.b]\n";
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [format!("2:12: {ZERO_COOLDOWN}")]
    );
}

/// Every table of `default`: each value invalid on its own once, at its key, with two
/// policies inheriting them.
#[test]
fn every_table_of_default_reports_its_invalid_values_once() {
    let text = r#"[default]
timeout = "0s"
deadline = "0s"
max_keys = 0
key_idle = "0s"

[default.breaker]
consecutive_failures = 0
min_calls = 0
half_open_probes = 0
cooldown_multiplier = 0.5

[default.retry]
max_attempts = 0

[default.bulkhead]
max_concurrent = 0

[policies.a]
[policies.b]
"#;
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            "2:11: default.timeout: must be non-zero, got 0s",
            "3:12: default.deadline: must be non-zero, got 0s",
            "4:12: default.max_keys: must be at least 1, got 0",
            "5:12: default.key_idle: must be non-zero, got 0s",
            "8:24: default.breaker.consecutive_failures: must be at least 1, got 0",
            "9:13: default.breaker.min_calls: must be at least 1, got 0",
            "10:20: default.breaker.half_open_probes: must be in 1..=65535, got 0",
            "11:23: default.breaker.cooldown_multiplier: must be in 1.0..=1000.0, got 0.5",
            "14:16: default.retry.max_attempts: must be in 1..=100 (attempts in total, the first \
             included), got 0",
            "17:18: default.bulkhead.max_concurrent: must be in 1..=1000000, got 0",
        ]
    );
}

/// A rule that reads two fields cannot be judged on `default` alone (a policy may set the
/// other field): it is judged per policy, and reported for each policy it fails in.
#[test]
fn a_rule_across_fields_of_default_is_judged_per_policy() {
    // `b` sets a window that holds the inherited `min_calls`; `a` and `c` do not.
    let text = "[default.breaker]\nfailure_rate = 50\nwindow = \"5 calls\"\nmin_calls = 10\n\
                [policies.a]\n[policies.b.breaker]\nwindow = \"20 calls\"\n[policies.c]\n";
    let message = "min_calls (10) must be <= the count window size (5); the window can never \
                   hold more than 5 calls";
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            format!("4:13: default.breaker.min_calls: in policy `a`: {message}"),
            format!("4:13: default.breaker.min_calls: in policy `c`: {message}"),
        ]
    );
    // `timeout <= deadline`, with a value invalid on its own beside it: that one once.
    let text = "[default]\ntimeout = \"5s\"\ndeadline = \"2s\"\n[default.breaker]\n\
                cooldown = \"0s\"\n[policies.a]\n[policies.b]\ndeadline = \"10s\"\n";
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            "2:11: default.timeout: in policy `a`: attempt timeout (5s) must be <= deadline (2s)"
                .to_owned(),
            format!("5:12: {ZERO_COOLDOWN}"),
        ]
    );
}

/// A value that cannot be read hides the errors of the rules that read it (they would only
/// follow from it: `cooldown_max` is checked only when the multiplier grows the cooldown), not
/// an independent error of a field beside it.
#[test]
fn an_unreadable_value_hides_only_the_errors_of_rules_that_read_it() {
    let text = "[policies.a.breaker]\ncooldown = \"0s\"\ncooldown_multiplier = \"x\"\n\
                cooldown_max = \"1ms\"\n[policies.b.breaker]\nfailure_rate = 50\n\
                window = \"5 parsecs\"\nmin_calls = 0\n";
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            "2:12: policies.a.breaker.cooldown: must be non-zero, got 0s (a breaker that never \
             stays open protects nothing)",
            "3:23: policies.a.breaker.cooldown_multiplier: invalid type: string \"x\", expected f64",
            "7:10: policies.b.breaker.window: unexpected `parsecs` at 2..9; expected `calls` (in \
             \"5 parsecs\")",
            "8:13: policies.b.breaker.min_calls: must be at least 1, got 0",
        ]
    );
}

// ---- the key an unknown key most likely meant ----

/// A plural, a singular, a unit suffix or camel case of a key is pointed at the key; a word like
/// no key gets the list alone.
#[test]
fn unknown_keys_in_another_form_suggest_the_key() {
    let section_keys = "`breaker`, `retry`, `timeout`, `deadline`, `bulkhead`, `rate`, `hedge`, `adaptive`, `throttle`, `order`, \
                        `idempotent`, `max_keys`, `key_idle`, `scope`";
    let text = "[policy.a]\n[policies.a]\nretries = 3\ntimeout_ms = 500\nfoo = 1\n\
                [policies.a.retry]\nmaxAttempts = 3\n";
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            "1:2: policy: unknown field `policy`, expected one of `$schema`, `default`, \
             `policies`, `store`; did you mean `policies`?"
                .to_owned(),
            format!(
                "3:1: policies.a.retries: unknown field `retries`, expected one of \
                 {section_keys}; did you mean `retry`?"
            ),
            format!(
                "4:1: policies.a.timeout_ms: unknown field `timeout_ms`, expected one of \
                 {section_keys}; did you mean `timeout`?"
            ),
            format!("5:1: policies.a.foo: unknown field `foo`, expected one of {section_keys}"),
            "7:1: policies.a.retry.maxAttempts: unknown field `maxAttempts`, expected one of \
             `max_attempts`, `backoff`, `jitter`; did you mean `max_attempts`?"
                .to_owned(),
        ]
    );
    // A key of a layer written at the policy's level is pointed at its table.
    assert_eq!(
        errors(
            "[policies.a]\nmaxAttempts = 3\ncooldwn = \"5s\"\n",
            Format::Toml,
            &[]
        ),
        [
            format!(
                "2:1: policies.a.maxAttempts: unknown field `maxAttempts`, expected one of \
                 {section_keys}; did you mean `retry.max_attempts`?"
            ),
            format!(
                "3:1: policies.a.cooldwn: unknown field `cooldwn`, expected one of \
                 {section_keys}; did you mean `breaker.cooldown`?"
            ),
        ]
    );
    // From an environment variable too.
    assert_eq!(
        errors(
            "[policies.a]\n",
            Format::Toml,
            &[("BREAKER__POLICIES__A__TIMEOUTS", "1s")]
        ),
        [format!(
            "(env BREAKER__POLICIES__A__TIMEOUTS): policies.a.timeouts: unknown field \
             `timeouts`, expected one of {section_keys}; did you mean `timeout`?"
        )]
    );
}

/// A key given twice is named in each format, at the second one (YAML and JSON also say where
/// the first was; TOML's parser does not tell).
#[test]
fn a_duplicate_key_is_named_in_every_format() {
    assert_eq!(
        errors(
            "[policies.a.breaker]\ncooldown = \"5s\"\ncooldown = \"6s\"\n",
            Format::Toml,
            &[]
        ),
        ["3:1: duplicate key `cooldown`"]
    );
    assert_eq!(
        errors(
            "[policies.a]\nidempotent = true\n[policies.a]\n",
            Format::Toml,
            &[]
        ),
        ["3:11: duplicate key `a`"]
    );
    assert_eq!(
        errors(
            "policies:\n  a:\n    breaker:\n      cooldown: 5s\n      cooldown: 6s\n",
            Format::Yaml,
            &[]
        ),
        ["5:7: policies.a.breaker.cooldown: duplicate key `cooldown` (first at 4:7)"]
    );
    assert_eq!(
        errors(
            r#"{"policies":{"a":{"breaker":{"cooldown":"5s","cooldown":"6s"}}}}"#,
            Format::Json,
            &[]
        ),
        ["1:46: policies.a.breaker.cooldown: duplicate key `cooldown` (first at 1:30)"]
    );
}

/// Under a shared scope the one validator's fleet rules apply, at the policy's `scope` key: a
/// rate rule over a count window ("the last n calls" has no order across replicas) is refused,
/// naming the fix (it was mapped to a 10 s time window without a word).
#[test]
fn a_shared_scope_refuses_a_rate_rule_over_a_count_window() {
    let text = r#"[store]
url = "redis://127.0.0.1:6379"
namespace = "checkout"

[policies.search]
breaker = "50% of 100 calls, open 30s"
scope = "shared"
"#;
    assert_eq!(
        errors(text, Format::Toml, &[]),
        [
            "7:9: policies.search.scope: scope `shared` of policy `search`: `window`: a count \
             window (the last 100 calls) has no order across replicas, so scope `shared` cannot \
             share it: give the rate rules a time window (`window = \"10s\"`, DSL `50% of 10s`)"
        ]
    );
    let timed = text.replace("50% of 100 calls", "50% of 10s");
    let policies = Loader::text(&timed, Format::Toml).load().unwrap();
    assert_eq!(policies.scope("search"), breaker_core::scope::Scope::Shared);
}
