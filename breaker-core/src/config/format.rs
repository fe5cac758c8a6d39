//! Reading each file format (TOML, YAML, JSON) into a [`ConfigFile`], with the format's own
//! position for a syntax, type or unknown-key error.

use super::error::ConfigError;
use super::file::ConfigFile;
use super::load::{Format, Source};

/// Strips serde_json's and serde_yaml_ng's own " at line L column C" suffix.
/// Also strips serde_yaml_ng's leading "{key path}: ", since the error has its own key path.
fn strip_position(message: String) -> String {
    let message = match message.rfind(" at line ") {
        Some(i) if message[i..].contains(" column ") => message[..i].to_owned(),
        _ => message,
    };
    match message.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains(' ') && path.contains('.') => {
            rest.to_owned()
        }
        _ => message,
    }
}

#[allow(clippy::result_large_err)]
pub(super) fn parse(src: &Source) -> Result<ConfigFile, ConfigError> {
    let error = |path: String, message: String, at: Option<(usize, usize)>| ConfigError {
        file: src.file.clone(),
        env: None,
        line: at.map(|a| a.0),
        column: at.map(|a| a.1),
        key_path: path,
        message,
    };
    match src.format {
        Format::Toml => {
            let toml_error = |path: String, e: &toml::de::Error| {
                error(
                    path,
                    e.message().trim_end().to_owned(),
                    e.span().map(|s| src.at_offset(s.start)),
                )
            };
            let d = toml::Deserializer::parse(&src.text).map_err(|e| toml_error(".".into(), &e))?;
            serde_path_to_error::deserialize(d)
                .map_err(|e| toml_error(e.path().to_string(), e.inner()))
        }
        Format::Json => {
            let mut d = serde_json::Deserializer::from_str(&src.text);
            let file: ConfigFile = serde_path_to_error::deserialize(&mut d).map_err(|e| {
                let inner = e.inner();
                let at = (inner.line() > 0).then(|| (inner.line(), inner.column()));
                error(e.path().to_string(), strip_position(inner.to_string()), at)
            })?;
            d.end().map_err(|e| {
                error(
                    ".".into(),
                    strip_position(e.to_string()),
                    Some((e.line(), e.column())),
                )
            })?;
            Ok(file)
        }
        Format::Yaml => {
            let d = serde_yaml_ng::Deserializer::from_str(&src.text);
            serde_path_to_error::deserialize(d).map_err(|e| {
                let inner = e.inner();
                let at = inner.location().map(|l| (l.line(), l.column()));
                error(e.path().to_string(), strip_position(inner.to_string()), at)
            })
        }
    }
}
