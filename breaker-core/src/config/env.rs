//! Environment overrides: `BREAKER__A__B__C=value` sets the key path `a.b.c` of the tree, the
//! value remembering the variable it came from (so its errors name the variable).

use super::error::ConfigError;
use super::load::{join, Source, ENV_PREFIX};
use super::tree::{Entry, Kind, Node, Origin};

/// Applies `BREAKER__A__B__C=value` overrides to `tree`: the path is the variable name after
/// the prefix, split at `__` and lowercased. A value that reads as a JSON number or boolean is
/// one; anything else is a string. An override of a policy the file does not have is an
/// error (it would otherwise add a policy no function uses while the intended one stays as
/// it was); so is one inside a value that is not a table. Keys that do not exist in the
/// schema are left to the reader, which reports them at the variable.
pub(super) fn apply_env(
    src: &Source,
    tree: &mut Node,
    vars: &[(String, String)],
    errors: &mut Vec<ConfigError>,
) {
    let policies: Vec<String> = tree
        .entry("policies")
        .and_then(|p| match &p.value.kind {
            Kind::Map(entries) => Some(entries.iter().map(|e| e.key.clone()).collect()),
            _ => None,
        })
        .unwrap_or_default();
    let names: Vec<String> = policies.iter().map(|n| format!("`{n}`")).collect();
    for (name, value) in vars {
        let mut path: Vec<String> = name[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        // A shell cannot set a variable with `-` in its name: `MY_SVC` addresses policy
        // `my-svc` when no policy is named `my_svc` and no other reads the same.
        if path.len() >= 2 && path[0] == "policies" && !policies.contains(&path[1]) {
            let mut dashed = policies.iter().filter(|p| p.replace('-', "_") == path[1]);
            if let (Some(only), None) = (dashed.next(), dashed.next()) {
                path[1] = only.clone();
            }
        }
        let mut error = |message: String| {
            errors.push(src.error_at(&Origin::Env(name.clone()), &path, message));
        };
        if path.iter().any(String::is_empty) {
            error("empty key in the variable name".into());
            continue;
        }
        if path.len() >= 2 && path[0] == "policies" && !names.contains(&format!("`{}`", path[1])) {
            let available = if names.is_empty() {
                "the file has none".to_owned()
            } else {
                format!("the file has {}", names.join(", "))
            };
            error(format!(
                "no policy `{}` to override ({available}); an override changes a policy of the \
                 file, it does not add one",
                path[1]
            ));
            continue;
        }
        let origin = Origin::Env(name.clone());
        let value = match serde_json::from_str::<serde_json::Value>(value) {
            Ok(serde_json::Value::Bool(b)) => Kind::Bool(b),
            Ok(serde_json::Value::Number(n)) => match n.as_i64() {
                Some(i) => Kind::Int(i.into()),
                None => n
                    .as_u64()
                    .map(|u| Kind::Int(u.into()))
                    .unwrap_or_else(|| Kind::Float(n.as_f64().unwrap_or(f64::NAN))),
            },
            _ => Kind::Str(value.clone()),
        };
        let failed = set(tree, &path, &origin, Node::new(origin.clone(), value)).err();
        match failed {
            None => {}
            Some(i) => error(format!(
                "cannot override inside `{}`: it is not a table (a DSL string is overridden \
                 whole, as `{ENV_PREFIX}{}`)",
                join(&path[..i]),
                path[..i].join("__").to_ascii_uppercase()
            )),
        }
    }
}

/// Sets the value at `path` of `node`, adding the tables on the way; `Err(i)` when `path[..i]`
/// is a value that is not a table.
fn set(node: &mut Node, path: &[String], origin: &Origin, value: Node) -> Result<(), usize> {
    let Some((key, rest)) = path.split_first() else {
        *node = value;
        return Ok(());
    };
    let Kind::Map(entries) = &mut node.kind else {
        return Err(0);
    };
    let at = match entries.iter().position(|e| e.key == *key) {
        Some(at) => at,
        None => {
            entries.push(Entry {
                key: key.clone(),
                key_origin: origin.clone(),
                value: Node::table(origin.clone()),
            });
            entries.len() - 1
        }
    };
    set(&mut entries[at].value, rest, origin, value).map_err(|i| i + 1)
}
