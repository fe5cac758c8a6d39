//! Environment overrides: `BREAKER__A__B__C=value` sets the key path `a.b.c`.

use super::error::ConfigError;
use super::file::ConfigFile;
use super::load::{join, Source, ENV_PREFIX};

pub(super) type Overrides = Vec<(Vec<String>, String)>;

/// Applies `BREAKER__A__B__C=value` overrides: the path is the variable name after the prefix,
/// split at `__` and lowercased. A value that reads as a JSON number or boolean is one;
/// anything else is a string.
#[allow(clippy::result_large_err)]
pub(super) fn apply_env(
    src: &Source,
    file: ConfigFile,
    vars: &[(String, String)],
) -> Result<(ConfigFile, Overrides), ConfigError> {
    if vars.is_empty() {
        return Ok((file, Vec::new()));
    }
    let env_error = |name: &str, path: &[String], message: String| ConfigError {
        file: src.file.clone(),
        env: Some(name.to_owned()),
        line: None,
        column: None,
        key_path: join(path),
        message,
    };
    let mut tree = serde_json::to_value(&file).expect("a config file serializes to JSON");
    let mut overridden = Vec::new();
    for (name, value) in vars {
        let path: Vec<String> = name[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(env_error(
                name,
                &path,
                "empty key in the variable name".into(),
            ));
        }
        let value = match serde_json::from_str::<serde_json::Value>(value) {
            Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v,
            _ => serde_json::Value::String(value.clone()),
        };
        let mut node = &mut tree;
        for (i, key) in path.iter().enumerate() {
            if node.is_null() {
                *node = serde_json::Value::Object(Default::default());
            }
            let Some(obj) = node.as_object_mut() else {
                return Err(env_error(
                    name,
                    &path,
                    format!(
                        "cannot override inside `{}`: it is not a table (a DSL string is \
                         overridden whole, as `{ENV_PREFIX}{}`)",
                        join(&path[..i]),
                        path[..i].join("__").to_ascii_uppercase()
                    ),
                ));
            };
            node = obj.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
        *node = value;
        overridden.push((path, name.clone()));
    }
    let file: ConfigFile = serde_path_to_error::deserialize(tree).map_err(|e| {
        let path: Vec<String> = e.path().to_string().split('.').map(str::to_owned).collect();
        let name = overridden
            .iter()
            .find(|(p, _)| path.starts_with(p) || p.starts_with(&path))
            .or(overridden.first())
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        env_error(&name, &path, e.inner().to_string())
    })?;
    Ok((file, overridden))
}
