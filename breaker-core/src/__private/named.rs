//! The compile-time check of `policy = ".."` with `config = ".."`: the same loader and
//! validator that run at run time, over the file the macro embedded.

/// One problem found by [`check_named_policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyCheckError {
    /// Whether it is about the named policy itself (shown under the `policy = ".."` literal)
    /// rather than the file as a whole (shown under `config = ".."`).
    pub about_policy: bool,
    /// What is wrong, lowercase, naming the file and the key.
    pub message: String,
}

/// Checks at compile time that the config file `file` (its name as written in `config = ".."`,
/// whose extension gives the format), with contents `text`, loads and defines a valid policy
/// `name`: the same loader and validator `Pipeline::named` runs on the same text; and that a
/// function with (`keyed`) or without `key = ..` can use it, as `config::install` checks.
///
/// # Errors
/// Every problem, ready to show under the `policy` or `config` literal.
pub fn check_named_policy(
    file: &str,
    text: &str,
    name: &str,
    keyed: bool,
) -> Result<(), Vec<PolicyCheckError>> {
    let policies = load_embedded(file, text).map_err(|errors| {
        let own = format!("policies.{name}");
        errors
            .into_iter()
            .map(|(key_path, message)| {
                let about_policy = key_path == own || key_path.starts_with(&format!("{own}."));
                let message = if about_policy {
                    format!("policy `{name}` is invalid: {message}")
                } else {
                    format!("config file {file} is invalid: {message}")
                };
                PolicyCheckError {
                    about_policy,
                    message,
                }
            })
            .collect::<Vec<_>>()
    })?;
    if let Some(policy) = policies.get(name) {
        // A shared scope is fine: the function's breaker is shared at its first call (or is
        // an error then if no store is installed).
        return match crate::config::key_mismatch(name, &policy, keyed) {
            None => Ok(()),
            Some(why) => Err(vec![PolicyCheckError {
                about_policy: true,
                message: format!("this function {why} (in {file})"),
            }]),
        };
    }
    let names: Vec<String> = policies.names().map(|n| format!("`{n}`")).collect();
    let available = if names.is_empty() {
        "none (the file has no `[policies.<name>]` section)".to_owned()
    } else {
        names.join(", ")
    };
    Err(vec![PolicyCheckError {
        about_policy: true,
        message: format!("policy `{name}` not found in {file}; available: {available}"),
    }])
}

/// Loads a config file's text as the macro embedded it: the format from the extension of
/// `file`, no environment overrides. Errors are `(key path, message)` pairs, the message
/// located as `file:line:column: key.path: what`.
fn load_embedded(file: &str, text: &str) -> Result<crate::config::Policies, Vec<(String, String)>> {
    use crate::config::{Format, Loader};
    let Some(format) = Format::from_path(std::path::Path::new(file)) else {
        return Err(vec![(
            ".".into(),
            format!(
                "config file `{file}` has an unknown format; expected a `.toml`, `.yaml`, `.yml` \
                 or `.json` file"
            ),
        )]);
    };
    Loader::text(text, format).load().map_err(|errors| {
        errors
            .0
            .into_iter()
            .map(|e| {
                let sep = if e.line.is_some() { "" } else { " " };
                (e.key_path.clone(), format!("{file}:{sep}{e}"))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mistake of the file is reported under the literal it is about: those of the
    /// named policy under `policy = ".."`, the others under `config = ".."`.
    #[test]
    fn every_mistake_is_reported_under_its_literal() {
        let text = "[policies.inventory]\ntimout = \"2s\"\n[policies.inventory.breaker]\n\
                    consecutive_failures = 0\n[policies.other]\nretry = 5\n";
        let errors = check_named_policy("breaker.toml", text, "inventory", false).unwrap_err();
        let got: Vec<(bool, &str)> = errors
            .iter()
            .map(|e| (e.about_policy, e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    true,
                    "policy `inventory` is invalid: breaker.toml:2:1: policies.inventory.timout: \
                     unknown field `timout`, expected one of `breaker`, `retry`, `timeout`, \
                     `deadline`, `bulkhead`, `rate`, `hedge`, `adaptive`, `throttle`, `order`, \
                     `idempotent`, `max_keys`, `key_idle`, `scope`; did you mean `timeout`?"
                ),
                (
                    true,
                    "policy `inventory` is invalid: breaker.toml:4:24: \
                     policies.inventory.breaker.consecutive_failures: must be at least 1, got 0"
                ),
                (
                    false,
                    "config file breaker.toml is invalid: breaker.toml:6:9: policies.other.retry: \
                     invalid type: integer `5`, expected a table or a string: A retry policy \
                     such as \"none\", \"3x exp jitter\", \"5x exp(100ms, max 2s) full-jitter\" \
                     or \"4x fixed 200ms\"."
                ),
            ]
        );
    }
}
