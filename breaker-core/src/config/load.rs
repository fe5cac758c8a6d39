//! Reading a config: the file formats, environment overrides, inheritance and validation.

use super::env::apply_env;
use super::error::{ConfigError, ConfigErrors};
use super::file::ConfigFile;
use super::format::parse;
use super::locate::locate;
use super::merge::resolve;
use crate::policy::Policy;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The prefix of environment variables that override config values.
pub const ENV_PREFIX: &str = "BREAKER__";

/// A config file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// TOML (`.toml`).
    Toml,
    /// YAML (`.yaml`, `.yml`).
    Yaml,
    /// JSON (`.json`).
    Json,
}

impl Format {
    /// The format named by a file's extension, if it is one of `toml`, `yaml`, `yml`, `json`.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// The effective named policies of a config, with defaults filled in and validated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policies {
    pub(super) map: BTreeMap<String, Arc<Policy>>,
}

impl Policies {
    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.map.get(name).cloned()
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Name and policy pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Policy>)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many named policies there are.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[derive(Clone, Debug)]
enum SourceKind {
    File(PathBuf),
    Text { text: String, format: Format },
}

#[derive(Clone, Debug)]
enum Env {
    None,
    Process,
    Vars(Vec<(String, String)>),
}

/// Reads a config from a file or a string, applies environment overrides, fills in the
/// defaults and validates every policy. See the [module docs](super) for the file layout.
///
/// ```
/// use breaker_core::config::{Format, Loader};
/// let text = "[policies.inventory]\nretry = \"3x exp jitter\"\nidempotent = true\n";
/// let policies = Loader::text(text, Format::Toml)
///     .env_vars([("BREAKER__POLICIES__INVENTORY__TIMEOUT", "2s")])
///     .load()?;
/// let inventory = policies.get("inventory").unwrap();
/// assert_eq!(inventory.retry.unwrap().max_attempts, 3);
/// assert_eq!(inventory.timeout, Some(std::time::Duration::from_secs(2)));
/// # Ok::<(), breaker_core::config::ConfigErrors>(())
/// ```
#[derive(Clone, Debug)]
pub struct Loader {
    source: SourceKind,
    env: Env,
}

impl Loader {
    /// Reads `path`, in the format its extension names, with overrides from the process
    /// environment (`BREAKER__...`; see [`Loader::env_vars`] and [`Loader::no_env`]).
    pub fn file(path: impl Into<PathBuf>) -> Loader {
        Loader {
            source: SourceKind::File(path.into()),
            env: Env::Process,
        }
    }

    /// Reads `text` in `format`, without environment overrides.
    pub fn text(text: impl Into<String>, format: Format) -> Loader {
        Loader {
            source: SourceKind::Text {
                text: text.into(),
                format,
            },
            env: Env::None,
        }
    }

    /// Takes overrides from these variables instead of the process environment; those not
    /// starting with `BREAKER__` are ignored.
    pub fn env_vars<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Loader {
        self.env = Env::Vars(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// Applies no environment overrides.
    pub fn no_env(mut self) -> Loader {
        self.env = Env::None;
        self
    }

    /// Loads, overrides, merges and validates.
    ///
    /// # Errors
    /// [`ConfigErrors`]: a file that cannot be read, a syntax or type error, an unknown key, an
    /// invalid DSL string (the first such error), then every validation error of every policy.
    pub fn load(&self) -> Result<Policies, ConfigErrors> {
        let src = self.read()?;
        let file = parse(&src)?;
        let vars = self.vars();
        let (file, overridden) = apply_env(&src, file, &vars)?;
        resolve(&src, &file, &overridden)
    }

    /// Loads and applies the overrides, without merging or validating.
    ///
    /// # Errors
    /// As [`Loader::load`], without the validation errors.
    pub fn load_file(&self) -> Result<ConfigFile, ConfigErrors> {
        let src = self.read()?;
        let file = parse(&src)?;
        Ok(apply_env(&src, file, &self.vars())?.0)
    }

    fn vars(&self) -> Vec<(String, String)> {
        let mut vars: Vec<_> = match &self.env {
            Env::None => Vec::new(),
            Env::Process => std::env::vars().collect(),
            Env::Vars(v) => v.clone(),
        };
        vars.retain(|(k, _)| k.starts_with(ENV_PREFIX));
        vars.sort();
        vars
    }

    // The error path is cold and the public API returns `ConfigErrors` (a `Vec`).
    #[allow(clippy::result_large_err)]
    fn read(&self) -> Result<Source, ConfigError> {
        match &self.source {
            SourceKind::Text { text, format } => Ok(Source {
                file: None,
                format: *format,
                text: text.clone(),
            }),
            SourceKind::File(path) => {
                let error = |message: String| ConfigError {
                    file: Some(path.clone()),
                    env: None,
                    line: None,
                    column: None,
                    key_path: ".".into(),
                    message,
                };
                let format = Format::from_path(path).ok_or_else(|| {
                    error(
                        "unknown file format; expected a `.toml`, `.yaml`, `.yml` or `.json` file"
                            .into(),
                    )
                })?;
                let text = std::fs::read_to_string(path)
                    .map_err(|e| error(format!("cannot read the file: {e}")))?;
                Ok(Source {
                    file: Some(path.clone()),
                    format,
                    text,
                })
            }
        }
    }
}

/// Loads `path` with overrides from the process environment; see [`Loader::file`].
///
/// # Errors
/// See [`Loader::load`].
pub fn load_file(path: impl AsRef<Path>) -> Result<Policies, ConfigErrors> {
    Loader::file(path.as_ref()).load()
}

/// Loads `text` in `format`, without environment overrides; see [`Loader::text`].
///
/// # Errors
/// See [`Loader::load`].
pub fn load_str(text: &str, format: Format) -> Result<Policies, ConfigErrors> {
    Loader::text(text, format).load()
}

pub(crate) struct Source {
    pub(super) file: Option<PathBuf>,
    pub(super) format: Format,
    pub(super) text: String,
}

impl Source {
    pub(super) fn error(&self, key_path: &[String], message: String) -> ConfigError {
        let (line, column) = locate(self, key_path).unzip();
        ConfigError {
            file: self.file.clone(),
            env: None,
            line,
            column,
            key_path: join(key_path),
            message,
        }
    }

    pub(super) fn at_offset(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        (line, column)
    }
}

pub(super) fn join(path: &[String]) -> String {
    if path.is_empty() {
        ".".to_owned()
    } else {
        path.join(".")
    }
}
