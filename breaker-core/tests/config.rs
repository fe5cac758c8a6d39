//! Config files: cases BR-18, BR-38 and BR-39 from the serde side, formats, inheritance,
//! environment overrides, the registry and the JSON Schema.

use breaker_core::breaker::{BreakerPolicy, SlidingWindow};
use breaker_core::config::{self, ConfigErrors, Format, Loader, PolicyRegistry};
use breaker_core::layer::Layer;
use breaker_core::policy::BulkheadPolicy;
use breaker_core::retry::{Backoff, Jitter, RetryPolicy};
use breaker_core::State;
use std::path::PathBuf;
use std::time::Duration;

fn toml_err(text: &str) -> ConfigErrors {
    config::load_str(text, Format::Toml).expect_err("the config must be rejected")
}

/// The failure rate of policy `name`'s breaker, in percent.
fn failure_rate(policies: &config::Policies, name: &str) -> Option<f64> {
    policies.get(name)?.breaker.as_ref()?.failure_rate_percent
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

// ---- BR-39: every explicit invalid value is an error naming the field ----

#[test]
fn br_39_consecutive_failures_zero_is_rejected() {
    let err = toml_err("[policies.a.breaker]\nconsecutive_failures = 0\n");
    assert_eq!(
        err.to_string(),
        "2:24: policies.a.breaker.consecutive_failures: must be at least 1, got 0"
    );
}

#[test]
fn br_39_zero_cooldown_is_rejected() {
    let err = toml_err("[policies.a.breaker]\ncooldown = \"0s\"\n");
    assert_eq!(
        err.to_string(),
        "2:12: policies.a.breaker.cooldown: must be non-zero, got 0s (a breaker that never \
         stays open protects nothing)"
    );
}

#[test]
fn br_39_empty_backoff_is_rejected() {
    let err = toml_err("[policies.a.retry]\nbackoff = \"\"\n");
    // Every mistake at once (issue 17): the retry of 3 attempts by default is refused too,
    // at its table, since the policy is not declared idempotent.
    assert_eq!(
        err.to_string(),
        "1:1: policies.a.retry: `max_attempts`: 3 attempts, but only operations declared \
         idempotent are retried and this policy is not; add `idempotent = true`, or \
         `retry = \"none\"`\n\
         2:11: policies.a.retry.backoff: unexpected end of input at 0..0; expected one of \
         `fixed`, `linear`, `exp` or `exponential`"
    );
    // The other way to configure no retry schedule at all: zero attempts.
    let err = toml_err("[policies.a.retry]\nmax_attempts = 0\n");
    assert_eq!(
        err.to_string(),
        "2:16: policies.a.retry.max_attempts: must be in 1..=100 (attempts in total, the first \
         included), got 0"
    );
}

#[test]
fn br_39_failure_rate_zero_is_rejected() {
    let err = toml_err("[policies.a.breaker]\nfailure_rate = \"0%\"\n");
    assert_eq!(
        err.to_string(),
        "2:16: policies.a.breaker.failure_rate: must be a percentage in (0, 100], got 0"
    );
}

#[test]
fn br_39_failure_rate_above_100_is_rejected() {
    let err = toml_err("[policies.a.breaker]\nfailure_rate = 101\n");
    assert_eq!(
        err.to_string(),
        "2:16: policies.a.breaker.failure_rate: must be a percentage in (0, 100], got 101"
    );
    // The inclusive bound is accepted.
    let ok = config::load_str(
        "[policies.a.breaker]\nfailure_rate = \"100%\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(failure_rate(&ok, "a"), Some(100.0));
}

/// A bare number between 0 and 1 reads as a ratio (Polly's `FailureRatio = 0.5`): taken as a
/// percent it would trip the breaker at a hundredth of the rate meant, so it is refused in every
/// format and for both rates, and the string with its `%` still says half a percent.
#[test]
fn a_rate_written_as_a_ratio_is_refused_and_its_percent_string_is_not() {
    let why = "`0.5` would be 0.5 %, not 50 %: a rate is a percent, not a ratio; write 50 for \
               50 %, or \"0.5%\" for 0.5 %";
    let cases = [
        (
            Format::Toml,
            "[policies.a.breaker]\nfailure_rate = 0.5\n",
            format!("2:16: policies.a.breaker.failure_rate: {why}"),
        ),
        (
            Format::Yaml,
            "policies:\n  a:\n    breaker:\n      failure_rate: 0.5\n",
            format!("4:21: policies.a.breaker.failure_rate: {why}"),
        ),
        (
            Format::Json,
            r#"{"policies": {"a": {"breaker": {"failure_rate": 0.5}}}}"#,
            format!("1:49: policies.a.breaker.failure_rate: {why}"),
        ),
        (
            Format::Toml,
            "[policies.a.breaker]\nslow_call_duration = \"1s\"\nslow_call_rate = 0.5\n",
            format!("3:18: policies.a.breaker.slow_call_rate: {why}"),
        ),
    ];
    for (format, text, want) in cases {
        let err = config::load_str(text, format).expect_err(text);
        assert_eq!(err.to_string(), want, "{format:?}: {text}");
    }
    // `0.07` is 7 %, said without the float's tail.
    let err = toml_err("[policies.a.breaker]\nfailure_rate = 0.07\n");
    assert!(
        err.to_string()
            .contains("not 7 %: a rate is a percent, not a ratio; write 7 for 7 %"),
        "{err}"
    );
    // Half a percent, with its sign; and 1 (one percent) and above as bare numbers.
    for (text, want) in [
        ("failure_rate = \"0.5%\"", 0.5),
        ("failure_rate = 1", 1.0),
        ("failure_rate = 1.5", 1.5),
    ] {
        let ok =
            config::load_str(&format!("[policies.a.breaker]\n{text}\n"), Format::Toml).unwrap();
        assert_eq!(failure_rate(&ok, "a"), Some(want), "{text}");
    }
}

#[test]
fn br_39_half_open_probes_zero_is_rejected() {
    let err = toml_err("[policies.a.breaker]\nhalf_open_probes = 0\n");
    assert_eq!(
        err.to_string(),
        "2:20: policies.a.breaker.half_open_probes: must be in 1..=65535, got 0"
    );
}

#[test]
fn br_39_count_window_of_zero_is_rejected() {
    let err = toml_err("[policies.a.breaker]\nwindow = \"0 calls\"\n");
    assert_eq!(
        err.to_string(),
        "2:10: policies.a.breaker.window: `window`: count window must hold 1..=1000000 calls, \
         got 0 at 0..7"
    );
}

#[test]
fn br_39_every_optional_key_omitted_loads_with_defaults() {
    // `idempotent` is the one key a retry table cannot do without: a retry that may not
    // retry is refused (see the next test); every other key is omitted.
    let policies = config::load_str(
        "[policies.a]\nidempotent = true\n[policies.a.breaker]\n[policies.a.retry]\n[policies.b]\n",
        Format::Toml,
    )
    .unwrap();
    let a = policies.get("a").unwrap();
    assert_eq!(a.breaker, Some(BreakerPolicy::default()));
    assert_eq!(
        a.retry,
        Some(RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Exponential {
                base: Duration::from_millis(100),
                factor: 2.0,
                max: Duration::from_secs(10)
            },
            jitter: Jitter::None,
        })
    );
    assert_eq!(
        (a.timeout, a.deadline, a.bulkhead, &a.order),
        (None, None, None, &None)
    );
    let b = policies.get("b").unwrap();
    assert_eq!(*b, breaker_core::policy::Policy::default());
    // An empty file is an empty config.
    assert!(config::load_str("", Format::Toml).unwrap().is_empty());
    assert!(config::load_str("{}", Format::Json).unwrap().is_empty());
}

/// BR-35 in a config file: a retry on a policy not declared idempotent would silently make one
/// attempt; it is an error at the retry key instead.
#[test]
fn br_35_retry_without_idempotent_is_an_error_at_the_retry_key() {
    let err = toml_err("[policies.a]\nretry = \"3x exp jitter\"\n");
    assert_eq!(
        err.to_string(),
        "2:9: policies.a.retry: `max_attempts`: 3 attempts, but only operations declared \
         idempotent are retried and this policy is not; add `idempotent = true`, or \
         `retry = \"none\"`"
    );
    let ok = config::load_str(
        "[policies.a]\nretry = \"3x exp jitter\"\nidempotent = true\n[policies.b]\nretry = \"none\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(ok.get("a").unwrap().retry.unwrap().max_attempts, 3);
}

// ---- BR-18 from serde ----

#[test]
fn br_18_min_calls_above_count_window_from_serde() {
    let err =
        toml_err("[policies.a.breaker]\nfailure_rate = 50\nwindow = \"5 calls\"\nmin_calls = 10\n");
    assert_eq!(
        err.to_string(),
        "4:13: policies.a.breaker.min_calls: min_calls (10) must be <= the count window size \
         (5); the window can never hold more than 5 calls"
    );
    // Across inheritance: the window from `default`, the minimum from the policy.
    let err = toml_err(
        "[default.breaker]\nfailure_rate = 50\nwindow = \"5 calls\"\n\
         [policies.a.breaker]\nmin_calls = 10\n",
    );
    assert_eq!(
        err.to_string(),
        "5:13: policies.a.breaker.min_calls: min_calls (10) must be <= the count window size \
         (5); the window can never hold more than 5 calls"
    );
    // From a DSL string in the file.
    let err = toml_err("[policies.a]\nbreaker = \"50% of 5 calls min 10\"\n");
    assert_eq!(
        err.to_string(),
        "2:11: policies.a.breaker: `min_calls`: min_calls (10) must be <= the count window size \
         (5) at 15..21; the window can never hold more than 5 calls (in \"50% of 5 calls min 10\")"
    );
    // Time windows have no such limit.
    config::load_str(
        "[policies.a.breaker]\nfailure_rate = 50\nwindow = \"10s\"\nmin_calls = 1000\n",
        Format::Toml,
    )
    .unwrap();
}

// ---- BR-38: unknown keys and tokens ----

#[test]
fn br_38_unknown_config_key_is_an_error() {
    let err = toml_err("[policies.a.retry]\nmax_atempts = 3\n");
    assert_eq!(
        err.to_string(),
        "2:1: policies.a.retry.max_atempts: unknown field `max_atempts`, expected one of \
         `max_attempts`, `backoff`, `jitter`; did you mean `max_attempts`?"
    );
    let err = config::load_str(
        "policies:\n  a:\n    retry:\n      max_atempts: 3\n",
        Format::Yaml,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "4:7: policies.a.retry.max_atempts: unknown field `max_atempts`, expected one of \
         `max_attempts`, `backoff`, `jitter`; did you mean `max_attempts`?"
    );
    let err = config::load_str(
        r#"{"policies": {"a": {"retry": {"max_atempts": 3}}}}"#,
        Format::Json,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "1:31: policies.a.retry.max_atempts: unknown field `max_atempts`, expected one of \
         `max_attempts`, `backoff`, `jitter`; did you mean `max_attempts`?"
    );
}

#[test]
fn br_38_misspelled_dsl_token_in_a_file_names_token_and_position() {
    let err = toml_err("[policies.a]\nretry = \"3x exp jiter\"\n");
    assert_eq!(
        err.to_string(),
        "2:9: policies.a.retry: unknown jitter `jiter` at 7..12; expected one of `(`, `jitter`, \
         `full-jitter`, `equal-jitter`, `decorrelated-jitter`, `additive-jitter` or end of \
         input; did you mean `jitter`? (in \"3x exp jiter\")"
    );
}

// ---- cross-field rules, every error at once ----

#[test]
fn cross_field_errors_are_all_reported() {
    let err = toml_err(
        "[policies.a]\ntimeout = \"5s\"\ndeadline = \"2s\"\norder = \"timeout > bulkhead\"\n\
         [policies.b.breaker]\nhalf_open_probes = 0\nsuccesses_to_close = 0\n",
    );
    assert_eq!(
        err.to_string(),
        "2:11: policies.a.timeout: attempt timeout (5s) must be <= deadline (2s)\n\
         4:9: policies.a.order: layer `bulkhead` is in the order but not configured; configure \
         `bulkhead` or remove it from the order\n\
         6:20: policies.b.breaker.half_open_probes: must be in 1..=65535, got 0\n\
         7:22: policies.b.breaker.successes_to_close: must be in 1..=8191, got 0"
    );
}

// ---- formats and the example files ----

#[test]
fn example_files_load_and_agree() {
    let toml = config::Loader::file(examples().join("breaker.toml"))
        .no_env()
        .load()
        .unwrap();
    let yaml = config::Loader::file(examples().join("breaker.yaml"))
        .no_env()
        .load()
        .unwrap();
    let json = config::Loader::file(examples().join("breaker.json"))
        .no_env()
        .load()
        .unwrap();
    assert_eq!(toml, yaml);
    assert_eq!(toml, json);
    assert_eq!(
        toml.names().collect::<Vec<_>>(),
        ["inventory", "payments", "search"]
    );
    let inventory = toml.get("inventory").unwrap();
    assert_eq!(
        inventory.order,
        Some(vec![Layer::Timeout, Layer::Retry, Layer::Breaker])
    );
    assert_eq!(inventory.retry.unwrap().max_attempts, 5);
    assert_eq!(inventory.timeout, Some(Duration::from_secs(2)));
    let inherited = inventory.breaker.as_ref().unwrap();
    assert_eq!(
        (
            inherited.failure_rate_percent,
            inherited.window,
            inherited.min_calls
        ),
        (Some(50.0), SlidingWindow::Count(100), 20)
    );
    let payments = toml.get("payments").unwrap();
    let pb = payments.breaker.as_ref().unwrap();
    // The trip rules are replaced as a group; the other fields are inherited.
    assert_eq!(
        (pb.consecutive_failures, pb.failure_rate_percent),
        (Some(3), None)
    );
    assert_eq!(pb.cooldown_max, Duration::from_secs(300));
    assert_eq!(payments.retry, Some(RetryPolicy::NONE));
    assert_eq!(
        payments.bulkhead,
        Some(BulkheadPolicy {
            max_concurrent: 10,
            max_wait: Duration::from_millis(100)
        })
    );
    // The effective config printed by `breaker check` is itself a valid config, and a fixed
    // point of loading and printing.
    let printed = toml.to_string();
    assert_eq!(
        config::load_str(&printed, Format::Toml)
            .unwrap()
            .to_string(),
        printed
    );
    assert_eq!(
        printed.lines().take(8).collect::<Vec<_>>(),
        [
            "[policies.inventory]",
            "breaker = \"50% of 100 calls min 20, open 30s factor 2 max 5m, probes 1, close after 1\"",
            // `retry = "5x exp"` writes the attempts and the backoff: the jitter is the
            // default's.
            "retry = \"5x exp(100ms, factor 2, max 10s) full-jitter\"",
            "timeout = \"2s\"",
            "deadline = \"10s\"",
            "order = \"timeout > retry > breaker\"",
            "idempotent = true",
            "",
        ]
    );
}

#[test]
fn errors_in_files_name_the_file() {
    let dir = scratch_dir("breaker-config-test");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "policies:\n  a:\n    breaker:\n      consecutive_failures: 0\n",
    )
    .unwrap();
    let err = Loader::file(&path).no_env().load().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:4:29: policies.a.breaker.consecutive_failures: must be at least 1, got 0",
            path.display()
        )
    );
    let err = Loader::file(dir.join("x.ini")).load().unwrap_err();
    assert!(err.to_string().ends_with(
        "x.ini: unknown file format; expected a `.toml`, `.yaml`, `.yml` or `.json` file"
    ));
    // An error about the file as a whole has no key path: `{file}: {message}`.
    let missing = dir.join("missing.toml");
    let err = Loader::file(&missing).load().unwrap_err();
    let os = std::fs::read(&missing).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: cannot read the file: {os}", missing.display())
    );
    assert_eq!(err.errors()[0].key_path, ".");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- a layer written as one DSL string sets what it writes ----

/// Over `[default]`, `breaker = "5 consecutive"` is the same as `breaker.consecutive_failures
/// = 5`: it replaces the trip rules and inherits the cooldown, the probes and the probe wait;
/// `retry = "5x"` inherits the backoff and the jitter; `bulkhead = "10 concurrent"` the wait.
#[test]
fn a_layer_string_sets_what_it_writes_and_inherits_the_rest() {
    let default = "[default]\nidempotent = true\n\
                   [default.breaker]\nfailure_rate = 50\ncooldown = \"10s\"\nhalf_open_probes = 3\n\
                   max_probe_wait = \"5s\"\n\
                   [default.retry]\nmax_attempts = 3\nbackoff = \"fixed 50ms\"\njitter = \"equal-jitter\"\n\
                   [default.bulkhead]\nmax_concurrent = 4\nmax_wait = \"100ms\"\n";
    let text = format!(
        "{default}[policies.strings]\nbreaker = \"5 consecutive\"\nretry = \"5x\"\n\
         bulkhead = \"10 concurrent\"\n\
         [policies.tables]\nbreaker.consecutive_failures = 5\nretry.max_attempts = 5\n\
         bulkhead.max_concurrent = 10\n"
    );
    let policies = config::load_str(&text, Format::Toml).unwrap();
    let strings = policies.get("strings").unwrap();
    assert_eq!(strings, policies.get("tables").unwrap());
    let b = strings.breaker.as_ref().unwrap();
    assert_eq!(
        (b.consecutive_failures, b.failure_rate_percent),
        (Some(5), None)
    );
    assert_eq!(
        (b.cooldown, b.half_open_probes, b.max_probe_wait),
        (Duration::from_secs(10), 3, Some(Duration::from_secs(5)))
    );
    assert_eq!(
        strings.retry,
        Some(RetryPolicy {
            max_attempts: 5,
            backoff: Backoff::Fixed {
                delay: Duration::from_millis(50)
            },
            jitter: Jitter::Equal,
        })
    );
    assert_eq!(
        strings.bulkhead,
        Some(BulkheadPolicy {
            max_concurrent: 10,
            max_wait: Duration::from_millis(100)
        })
    );
    // `none` is the whole retry, whatever the default's backoff and jitter.
    let text = format!("{default}[policies.once]\nretry = \"none\"\n");
    let policies = config::load_str(&text, Format::Toml).unwrap();
    assert_eq!(policies.get("once").unwrap().retry, Some(RetryPolicy::NONE));
    // And a `none` default writes one attempt only: a policy that sets the attempts gets the
    // default backoff and jitter, not the zero delay of `none`.
    let text = "[default]\nretry = \"none\"\nidempotent = true\n\
                [policies.table]\nretry.max_attempts = 4\n[policies.string]\nretry = \"4x\"\n";
    let policies = config::load_str(text, Format::Toml).unwrap();
    let expected: RetryPolicy = "4x".parse().unwrap();
    assert_eq!(policies.get("table").unwrap().retry, Some(expected));
    assert_eq!(policies.get("string").unwrap().retry, Some(expected));
    assert_ne!(expected.backoff, RetryPolicy::NONE.backoff);
}

/// With nothing to inherit, a layer's string in a file is the layer the DSL reads: every
/// clause sets its fields (values unlike the defaults, so a clause that set nothing would show).
#[test]
fn a_layer_string_alone_reads_as_the_dsl_does() {
    for dsl in [
        "5 consecutive, open 20s factor 3 max 4m jitter 0.2, probes 2, close after 2, \
         probe-wait 3s, neutral-probe count-as-success",
        "40% of 50 calls min 7, slow 2s 70%, open 10s",
        "40% over 1m in 12 buckets min 5",
        "slow 2s 80% over 1m min 10",
    ] {
        let text = format!("[policies.a]\nbreaker = \"{dsl}\"\n");
        let policies = config::load_str(&text, Format::Toml).unwrap();
        let expected: BreakerPolicy = dsl.parse().unwrap();
        assert_eq!(policies.get("a").unwrap().breaker, Some(expected), "{dsl}");
    }
    for dsl in [
        "5x exp(200ms, factor 3, max 4s) equal-jitter",
        "4x linear(100ms, step 50ms, max 2s) additive-jitter 100ms",
        "2x fixed 300ms",
    ] {
        let text = format!("[policies.a]\nidempotent = true\nretry = \"{dsl}\"\n");
        let policies = config::load_str(&text, Format::Toml).unwrap();
        let expected: RetryPolicy = dsl.parse().unwrap();
        assert_eq!(policies.get("a").unwrap().retry, Some(expected), "{dsl}");
    }
    let text = "[policies.a]\nbulkhead = \"7 concurrent wait 150ms\"\n";
    let policies = config::load_str(text, Format::Toml).unwrap();
    assert_eq!(
        policies.get("a").unwrap().bulkhead,
        Some("7 concurrent wait 150ms".parse().unwrap())
    );
}

/// Setting one key of a slow-call rule replaces the inherited trip rules: one error, saying so,
/// and not also "no trip rule".
#[test]
fn half_a_slow_call_rule_over_a_default_is_one_error_that_says_why() {
    let errors = toml_err(
        "[default]\nbreaker = \"slow 2s 80% over 1m min 10\"\n\
         [policies.a]\nbreaker.slow_call_duration = \"5s\"\n",
    );
    let errors: Vec<String> = errors.errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        errors,
        ["4:30: policies.a.breaker.slow_call_duration: is set without `slow_call_rate`; set both \
          or neither (a section that sets any trip rule replaces all the trip rules it inherits)"]
    );
}

/// A string in `[default]` may leave out the trip rule, as its table may; a rule between a
/// field of a string and one it inherits is judged after the merge, at the policy's key,
/// while one between two fields of the same string keeps its place in the string.
#[test]
fn a_layer_string_is_checked_with_what_it_inherits() {
    let text = "[default]\nbreaker = \"open 10s, probes 3\"\n\
                [policies.a]\nbreaker = \"3 consecutive\"\n\
                [policies.b]\ntimeout = \"1s\"\n";
    let policies = config::load_str(text, Format::Toml).unwrap();
    let a = policies.get("a").unwrap().breaker.clone().unwrap();
    assert_eq!(
        (a.consecutive_failures, a.cooldown, a.half_open_probes),
        (Some(3), Duration::from_secs(10), 3)
    );
    // No trip rule anywhere: the default rule, as for the same keys in a table.
    let b = policies.get("b").unwrap().breaker.clone().unwrap();
    let table = config::load_str(
        "[default.breaker]\ncooldown = \"10s\"\nhalf_open_probes = 3\n[policies.b]\ntimeout = \"1s\"\n",
        Format::Toml,
    )
    .unwrap();
    assert_eq!(Some(&b), table.get("b").unwrap().breaker.as_ref());

    let errors = toml_err(
        "[default]\nbreaker = \"50% of 20 calls min 10\"\n\
         [policies.a.breaker]\nmin_calls = 30\n\
         [policies.b]\nbreaker = \"50% of 100 calls min 30\"\n\
         [policies.c]\nbreaker = \"50% of 20 calls min 30\"\n",
    );
    let errors: Vec<String> = errors.errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            "4:13: policies.a.breaker.min_calls: min_calls (30) must be <= the count window \
             size (20); the window can never hold more than 20 calls",
            "8:11: policies.c.breaker: `min_calls`: min_calls (30) must be <= the count window \
             size (20) at 16..22; the window can never hold more than 20 calls (in \"50% of 20 \
             calls min 30\")",
        ]
    );
}

// ---- environment overrides ----

#[test]
fn environment_overrides_single_values() {
    let policies = Loader::text("[policies.inventory]\nretry = \"3x\"\n", Format::Toml)
        .env_vars([
            ("BREAKER__POLICIES__INVENTORY__RETRY", "5x exp"),
            (
                "BREAKER__POLICIES__INVENTORY__BREAKER__CONSECUTIVE_FAILURES",
                "7",
            ),
            ("BREAKER__DEFAULT__IDEMPOTENT", "true"),
            ("UNRELATED", "x"),
        ])
        .load()
        .unwrap();
    let p = policies.get("inventory").unwrap();
    assert_eq!(p.retry.unwrap().max_attempts, 5);
    assert_eq!(p.breaker.as_ref().unwrap().consecutive_failures, Some(7));
    assert!(p.idempotent);

    let err = Loader::text("[policies.a]\n", Format::Toml)
        .env_vars([("BREAKER__POLICIES__A__BREAKER__HALF_OPEN_PROBES", "0")])
        .load()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "(env BREAKER__POLICIES__A__BREAKER__HALF_OPEN_PROBES): \
         policies.a.breaker.half_open_probes: must be in 1..=65535, got 0"
    );
    let err = Loader::text("[policies.a]\n", Format::Toml)
        .env_vars([("BREAKER__POLICIES__A__RETRY", "3x expo")])
        .load()
        .unwrap_err();
    assert_eq!(
        err.errors()[0].env.as_deref(),
        Some("BREAKER__POLICIES__A__RETRY")
    );
    assert_eq!(err.errors()[0].key_path, "policies.a.retry");

    // A shell cannot set a variable with `-` in its name: `_` addresses a policy whose name
    // has `-`, unless a policy has the name as written or two read the same.
    let text = "[policies.my-svc]\ntimeout = \"1s\"\n[policies.my_db]\ntimeout = \"1s\"\n";
    let policies = Loader::text(text, Format::Toml)
        .env_vars([
            ("BREAKER__POLICIES__MY_SVC__TIMEOUT", "3s"),
            ("BREAKER__POLICIES__MY_DB__TIMEOUT", "4s"),
        ])
        .load()
        .unwrap();
    assert_eq!(
        policies.get("my-svc").unwrap().timeout,
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        policies.get("my_db").unwrap().timeout,
        Some(Duration::from_secs(4))
    );
    let both = "[policies.my-svc]\n[policies.my_svc]\n";
    let policies = Loader::text(both, Format::Toml)
        .env_vars([("BREAKER__POLICIES__MY_SVC__TIMEOUT", "3s")])
        .load()
        .unwrap();
    assert_eq!(
        policies.get("my_svc").unwrap().timeout,
        Some(Duration::from_secs(3))
    );
    assert_eq!(policies.get("my-svc").unwrap().timeout, None);
    let err = Loader::text("[policies.a-b_c]\n[policies.a_b-c]\n", Format::Toml)
        .env_vars([("BREAKER__POLICIES__A_B_C__TIMEOUT", "3s")])
        .load()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "(env BREAKER__POLICIES__A_B_C__TIMEOUT): policies.a_b_c.timeout: no policy `a_b_c` to \
         override (the file has `a-b_c`, `a_b-c`); an override changes a policy of the file, it \
         does not add one"
    );
}

// ---- the registry ----

/// A new directory for a test's files, under the target's temporary directory (not the
/// system's, which a clean-up could empty mid-run), named after the test and this process.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A registry loaded from `policies.toml` in a new scratch directory `name`, holding one
/// policy `inv` of 5 consecutive failures: the directory, the file and the registry.
fn inv_registry(name: &str) -> (std::path::PathBuf, std::path::PathBuf, PolicyRegistry) {
    let dir = scratch_dir(name);
    let path = dir.join("policies.toml");
    std::fs::write(
        &path,
        "[policies.inv]\nbreaker = \"5 consecutive, open 30s\"\n",
    )
    .unwrap();
    let registry = PolicyRegistry::load(Loader::file(&path).no_env()).unwrap();
    (dir, path, registry)
}

#[test]
fn registry_reload_keeps_breaker_state_and_applies_new_thresholds() {
    let (dir, path, registry) = inv_registry("breaker-registry-test");
    let breaker = registry.breaker("inv").unwrap();
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    assert_eq!(breaker.state(), State::Closed);

    // A broken file keeps the previous policies and says why.
    std::fs::write(&path, "[policies.inv]\nbreaker = \"0 consecutive\"\n").unwrap();
    let err = registry.reload().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2:11: policies.inv.breaker: `consecutive_failures`: must be at least 1, got 0 at \
             0..13",
            path.display()
        )
    );
    assert_eq!(
        registry
            .get("inv")
            .unwrap()
            .breaker
            .as_ref()
            .unwrap()
            .consecutive_failures,
        Some(5)
    );

    // A good file: the same breaker, its 3 failures kept, the new threshold of 4 applies.
    std::fs::write(
        &path,
        "[policies.inv]\nbreaker = \"4 consecutive, open 30s\"\n[policies.new]\ntimeout = \"1s\"\n",
    )
    .unwrap();
    let report = registry.reload().unwrap();
    assert_eq!(
        (report.added, report.changed, report.removed),
        (vec!["new".to_owned()], vec!["inv".to_owned()], vec![])
    );
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(registry.breaker("inv").unwrap().state(), State::Open);
    assert!(registry.breaker("new").is_none());
    assert_eq!(
        registry.get("new").unwrap().timeout,
        Some(Duration::from_secs(1))
    );
    assert_eq!(registry.names(), ["inv", "new"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reload to a file whose `default` holds a value invalid on its own is refused, even when
/// every policy overrides the value, and keeps the previous policies.
#[test]
fn a_reload_to_an_invalid_default_is_refused_and_keeps_the_policies() {
    let (dir, path, registry) = inv_registry("breaker-default-reload");
    std::fs::write(
        &path,
        "[default.breaker]\ncooldown = \"0s\"\n[policies.inv]\nbreaker = \"4 consecutive, open 30s\"\n",
    )
    .unwrap();
    let err = registry.reload().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2:12: default.breaker.cooldown: must be non-zero, got 0s (a breaker that never \
             stays open protects nothing)",
            path.display()
        )
    );
    let inv = registry.get("inv").unwrap();
    assert_eq!(inv.breaker.as_ref().unwrap().consecutive_failures, Some(5));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- the JSON Schema ----

#[test]
fn committed_schema_matches_the_types() {
    let committed = std::fs::read_to_string(examples().join("breaker.schema.json")).unwrap();
    assert!(
        committed == config::json_schema(),
        "examples/breaker.schema.json is stale; regenerate it with `cargo run --features cli --bin breaker -- \
         schema > examples/breaker.schema.json`"
    );
}

// ---- issue 11: an explicit `null` is not a default ----

/// YAML `~` / `null` and JSON `null` used to load as the key's default, silently: a user who
/// wrote `cooldown: ~` to "unset" an inherited value got 30 s. Now it is an error at the key
/// (TOML has no null).
#[test]
fn explicit_null_is_an_error_at_the_key() {
    let yaml = "policies:\n  a:\n    timeout: ~\n";
    let err = config::load_str(yaml, Format::Yaml).unwrap_err();
    assert_eq!(err.errors()[0].key_path, "policies.a.timeout");
    assert_eq!(
        err.to_string(),
        "3:5: policies.a.timeout: explicit `null`; remove the key to take the inherited or \
         default value"
    );
    let yaml = "default:\n  breaker:\n    cooldown: null\npolicies:\n  a: {}\n";
    let err = config::load_str(yaml, Format::Yaml).unwrap_err();
    assert_eq!(err.errors()[0].key_path, "default.breaker.cooldown");
    let json = r#"{"policies": {"a": {"retry": {"max_attempts": null}}}}"#;
    let err = config::load_str(json, Format::Json).unwrap_err();
    assert_eq!(err.errors()[0].key_path, "policies.a.retry.max_attempts");
    assert!(err.to_string().contains("explicit `null`"), "{err}");
    let json = r#"{"default": null}"#;
    let err = config::load_str(json, Format::Json).unwrap_err();
    assert_eq!(err.errors()[0].key_path, "default");
    // Leaving the key out is how a default is taken.
    assert!(config::load_str("policies:\n  a: {}\n", Format::Yaml).is_ok());
}

/// A file that starts with a byte-order mark (as editors on Windows write it) loads in every
/// format, and an error after it is where it was without the mark.
#[test]
fn a_leading_byte_order_mark_is_skipped_in_every_format() {
    for (format, text) in [
        (Format::Toml, "\u{feff}[policies.a]\ntimeout = \"1s\"\n"),
        (Format::Yaml, "\u{feff}policies:\n  a:\n    timeout: 1s\n"),
        (
            Format::Json,
            "\u{feff}{\"policies\": {\"a\": {\"timeout\": \"1s\"}}}",
        ),
    ] {
        let p = config::load_str(text, format).unwrap_or_else(|e| panic!("{format:?}: {e}"));
        assert_eq!(
            p.get("a").unwrap().timeout,
            Some(std::time::Duration::from_secs(1)),
            "{format:?}"
        );
    }
    let err = config::load_str(
        "\u{feff}{\"policies\": {\"a\":\n {\"timeout\": \"1 sec\"}}}",
        Format::Json,
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("2:14: policies.a.timeout: "),
        "{err}"
    );
}
