//! Store errors.
//!
//! Every message that can reach a log line, an error or `Debug` output passes through
//! [`Redactor`], which removes the URL's user name and password, so credentials never leave the
//! process through this crate.

use std::time::Duration;

/// A failed store operation. Lowercase messages; never contains the URL's credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The operation did not finish within the store timeout.
    #[error("store operation `{op}` timed out after {after:?}")]
    Timeout {
        /// The operation.
        op: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The store could not be reached (connection refused, reset, closed).
    #[error("store unreachable during `{op}`: {message}")]
    Unavailable {
        /// The operation.
        op: &'static str,
        /// What the client said, credentials removed.
        message: String,
    },
    /// The store answered with an error.
    #[error("store error during `{op}`: {message}")]
    Server {
        /// The operation.
        op: &'static str,
        /// The server's message, credentials removed.
        message: String,
    },
    /// The store's answer was not what the protocol allows (types, ranges, generations).
    /// Nothing was applied from it.
    #[error("malformed store reply to `{op}`: {what}")]
    Malformed {
        /// The operation.
        op: &'static str,
        /// What was wrong.
        what: String,
    },
    /// The store's own breaker is open: the operation was not attempted.
    #[error("store operation `{op}` not attempted: the store is degraded")]
    Degraded {
        /// The operation.
        op: &'static str,
    },
    /// The store URL or TLS settings are invalid.
    #[error("invalid store configuration: {message}")]
    Config {
        /// What is wrong, credentials removed.
        message: String,
    },
    /// The store has shut down (its last handle was dropped).
    #[error("the store has shut down")]
    Closed,
}

impl StoreError {
    /// Whether the error means the store is unhealthy (counted by the store's own breaker):
    /// timeouts, unreachable, and server errors other than our scripts' argument checks.
    pub fn is_health_failure(&self) -> bool {
        match self {
            StoreError::Timeout { .. } | StoreError::Unavailable { .. } => true,
            StoreError::Server { message, .. } => !message.starts_with("BRK"),
            StoreError::Malformed { .. } => true,
            StoreError::Degraded { .. } | StoreError::Config { .. } | StoreError::Closed => false,
        }
    }
}

/// Removes secrets (the URL's user name and password) from text.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for the credentials of `url` (both raw and percent-decoded forms).
    pub fn for_url(url: &str) -> Redactor {
        let mut secrets = Vec::new();
        if let Some((_, rest)) = url.split_once("://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            if let Some((userinfo, _)) = authority.rsplit_once('@') {
                let (user, pass) = match userinfo.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (userinfo, None),
                };
                // A password is always secret; a user name too (it often carries a tenant).
                for s in [Some(user), pass].into_iter().flatten() {
                    if s.len() >= 2 {
                        secrets.push(s.to_owned());
                        let decoded = percent_decode(s);
                        if decoded != s && decoded.len() >= 2 {
                            secrets.push(decoded);
                        }
                    }
                }
            }
        }
        // Longest first, so a secret containing another is removed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets }
    }

    /// `text` with every secret replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }

    /// The URL with its user name and password replaced by `***` (for `Debug` and logs).
    pub fn url(url: &str) -> String {
        let Some((scheme, rest)) = url.split_once("://") else {
            return "<invalid url>".to_owned();
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        // Only the path (database number) is kept of the tail: a query may carry a password.
        let tail = tail.split(['?', '#']).next().unwrap_or("");
        match authority.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}{tail}"),
            None => format!("{scheme}://{authority}{tail}"),
        }
    }

    pub(crate) fn error(&self, op: &'static str, e: &redis::RedisError) -> StoreError {
        let message = self.redact(&e.to_string());
        if e.is_timeout() {
            StoreError::Timeout {
                op,
                after: Duration::ZERO,
            }
        } else if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
        {
            StoreError::Unavailable { op, message }
        } else {
            StoreError::Server { op, message }
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        let url = "redis://svc-user:s3cr%2Ft@cache.internal:6380/2?timeout=1";
        let r = Redactor::for_url(url);
        assert_eq!(
            r.redact("WRONGPASS for svc-user with s3cr/t and s3cr%2Ft"),
            "WRONGPASS for *** with *** and ***"
        );
        assert_eq!(Redactor::url(url), "redis://***@cache.internal:6380/2");
        assert_eq!(Redactor::url("rediss://:hunter22@h:1"), "rediss://***@h:1");
        assert_eq!(Redactor::url("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(Redactor::for_url("redis://h:1/0").redact("h:1"), "h:1");
    }
}
