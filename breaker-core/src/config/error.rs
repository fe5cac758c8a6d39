//! Errors of loading a config: where (file, line, column, key path) and what.

use std::fmt;
use std::path::PathBuf;

/// One problem in a config, located as precisely as the source allows.
///
/// `Display`: `{file}:{line}:{column}: {key_path}: {message}`, with `(env VAR)` in place of the
/// position for a value that came from an environment variable:
/// `breaker.toml:7:22: policies.inventory.breaker.consecutive_failures: ...`. An error about a
/// file as a whole, with no position (it cannot be read, its format is unknown), reads
/// `{file}: {message}`: `breaker.toml: cannot read the file: No such file or directory ...`;
/// an error about the document as a whole at a position (a syntax error) reads
/// `{file}:{line}:{column}: {message}`: `my.json:1:22: unterminated object`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The file, if the config was read from one.
    pub file: Option<PathBuf>,
    /// The environment variable the offending value came from, if any.
    pub env: Option<String>,
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters) of the offending key or value, when known.
    pub column: Option<usize>,
    /// Dotted path of the offending key: `policies.inventory.retry`; `.` for the whole file.
    pub key_path: String,
    /// What is wrong, lowercase; it names the field.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}:", file.display())?;
        }
        if let Some(env) = &self.env {
            write!(f, "(env {env}):")?;
        } else if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, "{line}:{column}:")?;
        }
        if self.file.is_some() || self.env.is_some() || self.line.is_some() {
            f.write_str(" ")?;
        }
        // `.`, the whole document (a syntax error, a file too large), is no key to name.
        if self.key_path == "." {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key_path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a config (never empty), in file order: every unknown key, value of
/// the wrong type and invalid value, then those of environment variables. Only a syntax error
/// (a file that is not well-formed) stops the reading, so it is then the one error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The errors.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}
