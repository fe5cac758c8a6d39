//! Reloading a registry when its file changes (feature `watch`), through
//! `notify-debouncer-mini`: the operating system's file events (inotify, FSEvents, ...),
//! debounced, so an editor's several writes of one save are one reload.

use super::error::{ConfigError, ConfigErrors};
use super::registry::PolicyRegistry;
use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{new_debouncer, DebounceEventResult, Debouncer};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Watches a registry's file and reloads it on every change, until dropped; from
/// [`PolicyRegistry::watch`].
pub struct ConfigWatch {
    _debouncer: Debouncer<RecommendedWatcher>,
    path: PathBuf,
}

impl ConfigWatch {
    /// The file watched.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl PolicyRegistry {
    /// Reloads the registry (as [`PolicyRegistry::reload`], with its `tracing` event and
    /// metric) whenever its file changes, `debounce` after the last of a burst of changes
    /// (200 ms suits editors; the reload itself takes well under a millisecond for a usual
    /// file). A failed reload keeps the previous policies and is reported as every reload
    /// is; the watch goes on. It watches the file's directory, so a file replaced by a
    /// rename (as editors and configuration managers do) is seen too. Stops when the
    /// returned [`ConfigWatch`] is dropped.
    ///
    /// A change that leaves the file empty is not loaded: a file written in place (`echo >`,
    /// `std::fs::write`) is empty between its truncation and its first write, and a writer
    /// held up between the two for longer than `debounce` would otherwise drop every policy
    /// until its write lands. The write's own change reloads it. To load an empty file on
    /// purpose, call [`reload`](PolicyRegistry::reload).
    ///
    /// # Errors
    /// A registry not loaded from a file ([`Loader::file`](super::Loader::file)), or a
    /// directory the operating system cannot watch.
    pub fn watch(&self, debounce: Duration) -> Result<ConfigWatch, ConfigErrors> {
        let error = |file: Option<PathBuf>, message: String| {
            ConfigErrors::from(ConfigError {
                file,
                env: None,
                line: None,
                column: None,
                key_path: ".".into(),
                message,
            })
        };
        let Some(path) = self.loader().and_then(super::Loader::path) else {
            return Err(error(
                None,
                "this registry was not loaded from a file; there is nothing to watch".into(),
            ));
        };
        let path = path.to_path_buf();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = dir.canonicalize().map_err(|e| {
            error(
                Some(path.clone()),
                format!("cannot watch its directory: {e}"),
            )
        })?;
        let watched = dir.join(path.file_name().unwrap_or_default());
        let inner = Arc::clone(&self.inner);
        let target = watched.clone();
        let mut debouncer =
            new_debouncer(debounce, move |events: DebounceEventResult| match events {
                Ok(events) => {
                    if events.iter().any(|e| e.path == target) && has_content(&target) {
                        let _ = inner.reload();
                    }
                }
                Err(e) => tracing::warn!(
                    target: "breaker::config",
                    error = %e,
                    "watching the config file failed"
                ),
            })
            .map_err(|e| error(Some(path.clone()), format!("cannot watch the file: {e}")))?;
        debouncer
            .watcher()
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| {
                error(
                    Some(path.clone()),
                    format!("cannot watch its directory: {e}"),
                )
            })?;
        Ok(ConfigWatch {
            _debouncer: debouncer,
            path: watched,
        })
    }
}

/// Whether a change of the watched file at `path` is loaded: not when the file is there and
/// empty (see [`PolicyRegistry::watch`]); a missing or unreadable file is loaded, so that its
/// error is reported as every failed reload is.
fn has_content(path: &std::path::Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.len() > 0)
}

#[cfg(test)]
mod tests {
    use super::has_content;

    #[test]
    fn an_empty_file_is_not_loaded_and_a_missing_one_is() {
        let dir = std::env::temp_dir().join(format!("breaker-watch-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policies.toml");
        std::fs::write(&path, "").unwrap();
        assert!(!has_content(&path), "an empty file is a write in progress");
        std::fs::write(&path, "[policies.p]\n").unwrap();
        assert!(has_content(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(
            has_content(&path),
            "a missing file is loaded, to report its error"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
