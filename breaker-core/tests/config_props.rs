//! Property tests of the config loader (issue 17): on random and mutated inputs in every format
//! it never panics and every position it reports is inside the file; printing loaded policies
//! and loading them back gives the same policies for every name the loader accepts; inputs over
//! the size and nesting bounds are refused quickly, with a clear error.

use breaker_core::config::{self, Format, Loader, MAX_DEPTH, MAX_INPUT_BYTES};
use proptest::prelude::*;

const FORMATS: [Format; 3] = [Format::Toml, Format::Yaml, Format::Json];

fn example(format: Format) -> String {
    let name = match format {
        Format::Toml => "breaker.toml",
        Format::Yaml => "breaker.yaml",
        Format::Json => "breaker.json",
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// Every error's position is a line of the text and a column of that line (at most one past
/// its last character).
fn assert_positions_inside(text: &str, format: Format) {
    let Err(errors) = Loader::text(text, format).load() else {
        return;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    // A final newline ends the last line; it does not start another.
    let count = if text.ends_with('\n') {
        lines.len() - 1
    } else {
        lines.len()
    }
    .max(1);
    for e in errors.errors() {
        if let (Some(line), Some(column)) = (e.line, e.column) {
            assert!(
                (1..=count).contains(&line),
                "{format:?}: line {line} outside 1..={count}: {e}\n{text:?}"
            );
            let width = lines[line - 1].chars().count();
            assert!(
                (1..=width + 1).contains(&column),
                "{format:?}: column {column} outside 1..={}: {e}\n{text:?}",
                width + 1
            );
        }
    }
}

/// A character that means something in one of the formats, or a plain one.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "[",
            "]",
            "{",
            "}",
            ",",
            ":",
            "=",
            "\"",
            "'",
            "#",
            "\n",
            " ",
            "-",
            ".",
            "~",
            "&a",
            "*a",
            "!!str",
            "\\",
            "é",
            "\t",
            "0",
            "5",
            "true",
            "null",
            "policies",
            "a",
            "breaker",
            "timeout",
            "retry",
            "\"2s\"",
            "3x",
            "[policies.a]",
            "---",
            "\r\n",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_inputs_never_panic_and_stay_inside(pieces in prop::collection::vec(piece(), 0..40)) {
        let text: String = pieces.concat();
        for format in FORMATS {
            assert_positions_inside(&text, format);
        }
    }

    #[test]
    fn mutated_examples_never_panic_and_stay_inside(
        format in prop::sample::select(FORMATS.to_vec()),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0..3u8, piece()), 1..4),
    ) {
        let mut text = example(format);
        for (at, op, piece) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            match op {
                0 => text.insert_str(i, &piece),
                1 => {
                    let end = text[i..].chars().next().map_or(i, |c| i + c.len_utf8());
                    text.replace_range(i..end, "");
                }
                _ => {
                    let end = text[i..].chars().next().map_or(i, |c| i + c.len_utf8());
                    text.replace_range(i..end, &piece);
                }
            }
        }
        assert_positions_inside(&text, format);
    }

    /// Every name the loader accepts is printed so that it loads back the same.
    #[test]
    fn printed_policies_load_back_the_same(name in "[a-z0-9_-]{1,64}", retry in 1..5u32) {
        let text = format!(
            "[policies.{name}]\nretry = \"{retry}x exp jitter\"\nidempotent = true\n\
             timeout = \"2s\"\nbulkhead = \"4 concurrent\"\n\
             [policies.{name}.breaker]\nfailure_rate = 50\n"
        );
        let policies = config::load_str(&text, Format::Toml).unwrap();
        let printed = policies.to_string();
        let again = config::load_str(&printed, Format::Toml).unwrap();
        prop_assert_eq!(&again, &policies);
        prop_assert_eq!(again.to_string(), printed);
    }

    /// A name the loader refuses is refused in every format, naming the rule.
    #[test]
    fn names_outside_the_rule_are_refused(name in "[^a-z0-9_-]{1,3}[a-z]{0,3}") {
        let json = format!(r#"{{"policies": {{{}: {{}}}}}}"#, serde_json::to_string(&name).unwrap());
        let err = config::load_str(&json, Format::Json).unwrap_err();
        let e = &err.errors()[0];
        prop_assert!(e.message.starts_with("invalid policy name"), "{}", e);
        prop_assert_eq!((e.line, e.column), (Some(1), Some(15)));
    }
}

/// Round trips of the names that need care in TOML (digits only, `-`, `_`) and of every
/// example file.
#[test]
fn example_files_print_and_load_back_the_same() {
    for format in FORMATS {
        let policies = config::load_str(&example(format), format).unwrap();
        let again = config::load_str(&policies.to_string(), Format::Toml).unwrap();
        assert_eq!(again, policies, "{format:?}");
    }
    let text = "[policies.123]\n[policies.-a-]\n[policies._]\n";
    let policies = config::load_str(text, Format::Toml).unwrap();
    assert_eq!(policies.names().collect::<Vec<_>>(), ["-a-", "123", "_"]);
    let again = config::load_str(&policies.to_string(), Format::Toml).unwrap();
    assert_eq!(again, policies);
}

/// A name with non-ASCII or control characters used to be printed with Rust's escaping,
/// which TOML does not read; it is refused when loading instead, saying what a name is.
#[test]
fn names_toml_could_not_read_back_are_refused_when_loading() {
    let err = config::load_str("[policies.\"caf\u{e9}\"]\n", Format::Toml).unwrap_err();
    assert_eq!(
        err.to_string(),
        "1:11: policies.café: invalid policy name \"café\": a name is 1 to 64 lowercase ASCII \
         letters, digits, `_` and `-` (so that it is a bare TOML key and an environment \
         variable can address it)"
    );
    // The keys of a policy with an invalid name are still read: their mistakes are listed too.
    let err = config::load_str(
        "[policies.Bad_Name]\ntimeout = \"-1s\"\nretrys = 3\n",
        Format::Toml,
    )
    .unwrap_err();
    let lines: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("1:11: policies.Bad_Name: invalid policy name"));
    assert_eq!(
        lines[1],
        "2:11: policies.Bad_Name.timeout: negative duration `-1s` at 0..3; expected a positive \
         duration such as `1s`"
    );
    assert!(lines[2].starts_with("3:1: policies.Bad_Name.retrys: unknown field `retrys`"));
    let err = config::load_str("policies:\n  \"a\\u0001\": {}\n", Format::Yaml).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("2:3: policies.a\u{1}: invalid policy name \"a\\u{1}\""),
        "{err}"
    );
}

/// Deeply nested brackets (200 KB of them) are refused at the nesting bound in every format,
/// where `serde_yaml_ng` used to take over a minute (quadratic time) to refuse them.
#[test]
fn deep_nesting_is_refused_at_the_bound() {
    let deep = "[".repeat(200_000);
    for (format, text) in [
        (Format::Yaml, format!("policies: {deep}")),
        (Format::Json, format!("{{\"policies\": {deep}")),
        (Format::Toml, format!("policies = {deep}")),
    ] {
        let err = Loader::text(text, format).load().unwrap_err();
        assert_eq!(err.errors().len(), 1, "{format:?}");
        let e = &err.errors()[0];
        assert_eq!(e.key_path, ".", "{format:?}");
        assert!(
            e.message.contains("nested deeper than") || e.message.contains("recurs"),
            "{format:?}: {e}"
        );
    }
    // Exactly at the bound a JSON file still parses (and is then refused for its content).
    let at_bound = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    let err = Loader::text(at_bound, Format::Json).load().unwrap_err();
    assert_eq!(
        err.to_string(),
        "1:1: invalid type: sequence, expected a table of `default` and `policies`"
    );
}

#[test]
fn input_over_the_size_bound_is_refused_before_parsing() {
    let big = format!("# {}\n", "x".repeat(MAX_INPUT_BYTES));
    for format in FORMATS {
        let err = Loader::text(big.clone(), format).load().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the file is {} bytes; a config file may be at most {MAX_INPUT_BYTES} bytes \
                 (1 MiB)",
                big.len()
            )
        );
    }
}

/// YAML aliases cannot expand a small file into a huge tree ("billion laughs").
#[test]
fn yaml_alias_expansion_is_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..8 {
        let prev = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, \
             *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let err = Loader::text(text, Format::Yaml).load().unwrap_err();
    assert!(
        err.to_string()
            .contains("the aliases expand to more than 100000 values"),
        "{err}"
    );
}

/// Empty inputs: an empty TOML or YAML file is an empty config; JSON needs a value, and says so
/// at 1:1 (it used to say column 0).
#[test]
fn empty_inputs() {
    assert!(config::load_str("", Format::Toml).unwrap().is_empty());
    assert!(config::load_str("", Format::Yaml).unwrap().is_empty());
    assert!(config::load_str("# nothing\n", Format::Yaml)
        .unwrap()
        .is_empty());
    let err = config::load_str("", Format::Json).unwrap_err();
    assert_eq!(
        (err.errors()[0].line, err.errors()[0].column),
        (Some(1), Some(1))
    );
    let err = config::load_str("\n\n", Format::Json).unwrap_err();
    assert_eq!(
        (err.errors()[0].line, err.errors()[0].column),
        (Some(2), Some(1))
    );
}
