//! Reading a config: the file formats, environment overrides, inheritance and validation.

use super::env::apply_env;
use super::error::{ConfigError, ConfigErrors};
use super::file::ConfigFile;
use super::format::parse;
use super::merge::resolve;
use super::read::Reader;
use super::tree::{Breaks, Lines, Origin, Pos, MAX_INPUT_BYTES};
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

    /// Which characters end a line, as this format's parser counts them.
    fn breaks(self) -> Breaks {
        match self {
            Format::Toml => Breaks::Lf,
            Format::Yaml | Format::Json => Breaks::Any,
        }
    }
}

/// The effective named policies of a config, with defaults filled in and validated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policies {
    pub(super) map: BTreeMap<String, Arc<Policy>>,
    /// The bounds of keyed breakers, for the policies that set them.
    pub(super) keys: BTreeMap<String, KeyBounds>,
    /// The `[store]` table, validated.
    pub(super) store: Option<StoreSettings>,
}

/// The `[store]` table of a config file, validated: what the `breaker-redis` crate connects
/// with (`StoreConfig::from_settings` there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSettings {
    /// The store's URL (may hold credentials: never print it unredacted).
    pub url: String,
    /// The namespace.
    pub namespace: String,
    /// This replica's id; `None`: the host name and process id.
    pub replica: Option<String>,
    /// The flush interval, in
    /// [`MIN_FLUSH_INTERVAL`](crate::scope::MIN_FLUSH_INTERVAL)`..=`[`MAX_FLUSH_INTERVAL`](crate::scope::MAX_FLUSH_INTERVAL);
    /// `None`: the store's default (1 s).
    pub flush_interval: Option<std::time::Duration>,
    /// What shared breakers do while the store is unreachable.
    pub on_error: crate::scope::StoreErrorMode,
}

/// A policy's bounds on the breakers (and rate limiters `per key`) of keys of a
/// `#[circuit_breaker(policy = "..", key = ..)]` function (`max_keys`, `key_idle` in the
/// policy's section or in `default`); `None` leaves the attribute's value, or its default.
/// They are read when the function makes its registry of keys (its first keyed call); a
/// reload that changes them reaches the function when the process starts again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyBounds {
    /// The most breakers (or rate limiters) of keys kept, at least 1.
    pub max_keys: Option<usize>,
    /// How long a closed breaker of a key (or a refilled rate limiter) may go unused before it
    /// may be evicted, non-zero.
    pub key_idle: Option<std::time::Duration>,
}

impl Policies {
    /// Where policy `name`'s breaker state lives (`local` when it sets no scope, or there is
    /// no such policy).
    pub fn scope(&self, name: &str) -> crate::scope::Scope {
        self.map.get(name).map(|p| p.scope).unwrap_or_default()
    }

    /// The `[store]` table, if the file has one (it must when a policy's scope is shared).
    pub fn store(&self) -> Option<&StoreSettings> {
        self.store.as_ref()
    }

    /// The bounds on the breakers of keys that policy `name` sets (all `None` when it sets
    /// none, or there is no such policy).
    pub fn key_bounds(&self, name: &str) -> KeyBounds {
        self.keys.get(name).copied().unwrap_or_default()
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.map.get(name).cloned()
    }

    /// A pipeline of policy `name` whose breaker carries the name (in its rejections, events
    /// and metric labels, `breaker="name"`), built as [`Pipeline::from_policy`](crate::Pipeline::from_policy)
    /// builds it.
    /// For a pipeline that follows reloads, use [`PolicyRegistry::pipeline`](super::PolicyRegistry::pipeline).
    ///
    /// # Examples
    /// ```
    /// # use breaker_core as breaker;
    /// let policies = breaker::config::load_str(
    ///     "[policies.payments]\nbreaker = \"5 consecutive, open 30s\"",
    ///     breaker::config::Format::Toml,
    /// )?;
    /// let pipeline = policies.pipeline("payments").unwrap();
    /// assert_eq!(pipeline.breaker().unwrap().name(), "payments");
    /// # Ok::<(), breaker::config::ConfigErrors>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn pipeline(&self, name: &str) -> Option<crate::Pipeline> {
        let policy = self.map.get(name)?;
        Some(
            crate::pipeline::PipelineBuilder::from_policy(policy)
                .name(name)
                .build()
                .expect("loaded policies are validated, with the same validator"),
        )
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
/// # use breaker_core as breaker;
/// use breaker::config::{Format, Loader};
/// let text = "[policies.inventory]\nretry = \"3x exp jitter\"\nidempotent = true\n";
/// let policies = Loader::text(text, Format::Toml)
///     .env_vars([("BREAKER__POLICIES__INVENTORY__TIMEOUT", "2s")])
///     .load()?;
/// let inventory = policies.get("inventory").unwrap();
/// assert_eq!(inventory.retry.unwrap().max_attempts, 3);
/// assert_eq!(inventory.timeout, Some(std::time::Duration::from_secs(2)));
/// # Ok::<(), breaker::config::ConfigErrors>(())
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

    /// The file this loader reads, if it reads one.
    pub(super) fn path(&self) -> Option<&Path> {
        match &self.source {
            SourceKind::File(path) => Some(path),
            SourceKind::Text { .. } => None,
        }
    }

    /// Applies no environment overrides.
    pub fn no_env(mut self) -> Loader {
        self.env = Env::None;
        self
    }

    /// Loads, overrides, merges and validates.
    ///
    /// # Errors
    /// [`ConfigErrors`]: a file that cannot be read, is over the size or nesting bounds or is
    /// not well-formed (its first syntax error); else every error of the file, in file order:
    /// every unknown key, value of the wrong type, invalid DSL string and invalid value of
    /// every policy, then the errors of environment overrides, by variable.
    pub fn load(&self) -> Result<Policies, ConfigErrors> {
        self.load_all().map(|(_, policies)| policies)
    }

    /// Loads and applies the overrides, without merging or validating.
    ///
    /// # Errors
    /// As [`Loader::load`], without the validation errors.
    pub fn load_file(&self) -> Result<ConfigFile, ConfigErrors> {
        let src = self.read()?;
        let mut read = self.read_tree(&src)?;
        if read.errors.is_empty() {
            Ok(read.file)
        } else {
            sort(&mut read.errors);
            Err(ConfigErrors(read.errors))
        }
    }

    /// Reads, parses, overrides and reads the tree: the file and every error so far.
    fn read_tree(&self, src: &Source) -> Result<Read, ConfigErrors> {
        let mut tree = parse(src)?;
        let mut errors = Vec::new();
        apply_env(src, &mut tree, &self.vars(), &mut errors);
        let mut reader = Reader::new(src);
        let file = reader.file(&tree);
        errors.append(&mut reader.errors);
        Ok(Read {
            file,
            tree,
            errors,
            poisoned: reader.poisoned,
        })
    }

    pub(super) fn load_all(&self) -> Result<(ConfigFile, Policies), ConfigErrors> {
        let src = self.read()?;
        let mut read = self.read_tree(&src)?;
        let policies = resolve(
            &src,
            &read.tree,
            &read.file,
            &read.poisoned,
            &mut read.errors,
        );
        if read.errors.is_empty() {
            Ok((read.file, policies))
        } else {
            sort(&mut read.errors);
            Err(ConfigErrors(read.errors))
        }
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
            SourceKind::Text { text, format } => Ok(Source::new(None, *format, text.clone())),
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
                let text =
                    read_bounded(path).map_err(|e| error(format!("cannot read the file: {e}")))?;
                Ok(Source::new(Some(path.clone()), format, text))
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

/// A source read into a tree and a [`ConfigFile`].
struct Read {
    file: ConfigFile,
    tree: super::tree::Node,
    errors: Vec<ConfigError>,
    poisoned: super::read::Poisoned,
}

/// Reads a file of at most one byte over [`MAX_INPUT_BYTES`] (enough for the parser to refuse
/// it), so a huge file is never read whole.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_INPUT_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Errors in file order: those of the whole file first, then by position, then those of
/// environment variables by variable.
fn sort(errors: &mut [ConfigError]) {
    errors.sort_by(|a, b| {
        let key = |e: &ConfigError| (e.env.is_some(), e.env.clone(), e.line, e.column);
        key(a).cmp(&key(b))
    });
}

pub(crate) struct Source {
    pub(super) file: Option<PathBuf>,
    pub(super) format: Format,
    pub(super) text: String,
    lines: Lines,
}

impl Source {
    pub(super) fn new(file: Option<PathBuf>, format: Format, text: String) -> Source {
        Source {
            lines: Lines::new(&text, format.breaks()),
            file,
            format,
            text,
        }
    }

    /// An error at `origin`, about the key path `key_path`.
    pub(super) fn error_at(
        &self,
        origin: &Origin,
        key_path: &[String],
        message: String,
    ) -> ConfigError {
        let (env, at) = match origin {
            Origin::At(pos) => (None, Some(*pos)),
            Origin::Env(var) => (Some(var.clone()), None),
        };
        ConfigError {
            file: self.file.clone(),
            env,
            line: at.map(|p| p.line),
            column: at.map(|p| p.column),
            key_path: join(key_path),
            message,
        }
    }

    /// The position of byte `offset`.
    pub(super) fn pos(&self, offset: usize) -> Pos {
        self.lines.pos(&self.text, offset)
    }

    /// `pos` moved inside the text.
    pub(super) fn clamp(&self, pos: Pos) -> Pos {
        self.lines.clamp(&self.text, pos)
    }
}

pub(super) fn join(path: &[String]) -> String {
    if path.is_empty() {
        ".".to_owned()
    } else {
        path.join(".")
    }
}
