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
    /// The store refused this client's credentials: a wrong user name or password in the URL
    /// at connect, or a password changed on the server, seen when the client reconnects.
    #[error(
        "store authentication failed during `{op}` (check the user name and password of the \
         store URL): {message}"
    )]
    Auth {
        /// The operation.
        op: &'static str,
        /// The server's or client's message, credentials removed.
        message: String,
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
    /// timeouts, unreachable, refused credentials, and server errors other than our scripts'
    /// argument checks.
    pub fn is_health_failure(&self) -> bool {
        match self {
            StoreError::Timeout { .. }
            | StoreError::Unavailable { .. }
            | StoreError::Auth { .. } => true,
            StoreError::Server { message, .. } => !message.starts_with("BRK"),
            StoreError::Malformed { .. } => true,
            StoreError::Degraded { .. } | StoreError::Config { .. } | StoreError::Closed => false,
        }
    }
}

/// Removes secrets (the URL's user name and password) from text.
///
/// The URL is read by the parser the `redis` client uses (the `url` crate, WHATWG rules), and
/// also as a person may have meant it: everything between `://` and the *last* `@` is user
/// info, whole and split at its first `:` (and, before a scheme the store does not take,
/// everything before the last `@`: `user://pass@host` may be a URL without a scheme whose
/// password begins with `//`). The readings differ for a password with an unencoded
/// `/`, `?` or `#` (the parser ends the user info there, the person did not), and all are
/// secret. Each is searched for as written, as the parser normalised it and percent-decoded;
/// secrets of fewer than 2 bytes are not searched for (they would turn every message into
/// `***`), though they never appear in a URL this crate shows ([`Redactor::url`]).
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

/// Whether the parser read `u` otherwise than written: an `@` after the host means user info
/// cut short by an unencoded `/`, `?` or `#` (a URL without a host, `user:pass@host`, reads
/// as a path with an `@`).
pub(crate) fn misread(u: &url::Url) -> bool {
    u[url::Position::BeforePath..].contains('@')
}

/// The text between the scheme's `://` (or the start, without one) and the last `@`: what a
/// person means as user info, whatever characters it holds. Before a scheme other than
/// `redis` or `rediss`, the text from the start is read too: `user://pass@host`, a URL
/// without a scheme whose password begins with `//`, reads as the scheme `user`.
fn written_userinfo(url: &str) -> impl Iterator<Item = &str> {
    let (scheme, rest) = after_scheme(url);
    let foreign = scheme
        .is_some_and(|s| !s.eq_ignore_ascii_case("redis") && !s.eq_ignore_ascii_case("rediss"));
    let from_start = foreign.then_some(url);
    [Some(rest), from_start]
        .into_iter()
        .flatten()
        .filter_map(|text| text.rfind('@').map(|i| &text[..i]))
}

/// `(scheme, rest)`: the scheme only where it is one (`[A-Za-z][A-Za-z0-9+.-]*` before `://`).
fn after_scheme(url: &str) -> (Option<&str>, &str) {
    match url.split_once("://") {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')) =>
        {
            (Some(scheme), rest)
        }
        _ => (None, url),
    }
}

impl Redactor {
    /// A redactor for the user info of `url` (user name and password), whether or not `url`
    /// parses.
    pub fn for_url(url: &str) -> Redactor {
        let parsed = url::Url::parse(url).ok();
        let mut found: Vec<&str> = Vec::new();
        if let Some(u) = &parsed {
            found.push(u.username());
            found.extend(u.password());
        }
        for info in written_userinfo(url) {
            found.push(info);
            if let Some((user, password)) = info.split_once(':') {
                found.extend([user, password]);
            }
        }
        let mut secrets = Vec::new();
        for s in found {
            let decoded = percent_encoding::percent_decode_str(s).decode_utf8_lossy();
            for v in [s, &*decoded] {
                if v.len() >= 2 && !secrets.iter().any(|k: &String| k == v) {
                    secrets.push(v.to_owned());
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

    /// The URL as this crate shows it (for messages, `Debug` and logs): scheme, `***@` where
    /// it has user info, host, port and path (the database); never the user info, the query
    /// or the fragment (a query may carry a password too).
    ///
    /// A URL the parser reads as written is shown from its parts. One it cannot parse, reads
    /// with an `@` after the host (a password with an unencoded `/`, `?` or `#`) or without a
    /// host (`localhost:6379`) is shown as written after its last `@`, up to a `?` or `#`,
    /// control characters escaped: `redis://***@cache:6379/0`.
    pub fn url(url: &str) -> String {
        if let Some(u) = url::Url::parse(url)
            .ok()
            .filter(|u| !u.cannot_be_a_base() && !misread(u))
        {
            let mut out = format!("{}://", u.scheme());
            if !u.username().is_empty() || u.password().is_some() {
                out.push_str("***@");
            }
            out.push_str(&u[url::Position::BeforeHost..url::Position::AfterPath]);
            return out;
        }
        let (scheme, rest) = after_scheme(url);
        let (info, rest) = match rest.rfind('@') {
            Some(i) => ("***@", &rest[i + 1..]),
            None => ("", rest),
        };
        let rest = rest.split(['?', '#']).next().unwrap_or("");
        let scheme = scheme.map(|s| format!("{s}://")).unwrap_or_default();
        format!("{scheme}{info}{}", rest.escape_debug())
    }

    pub(crate) fn error(&self, op: &'static str, e: &redis::RedisError) -> StoreError {
        let message = self.redact(&e.to_string());
        if is_auth_failure(e) {
            StoreError::Auth { op, message }
        } else if e.is_timeout() {
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

/// Whether the server refused this client's credentials: the client's own authentication
/// error (a failed `AUTH`), or the server's `WRONGPASS` (a failed `AUTH` or `HELLO .. AUTH`)
/// or `NOAUTH` (a command on a connection that has not authenticated).
fn is_auth_failure(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
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

    /// `aa://!@host` is `aa:` and `//!` without a scheme, or the scheme `aa` with the user
    /// `!`: both readings are secret (a proptest found `//!` left in a message). Before the
    /// store's own schemes, only the text after `://` is user info.
    #[test]
    fn a_password_beginning_with_two_slashes_is_redacted_without_a_scheme() {
        let r = Redactor::for_url("aa://!@cache.internal:6379");
        assert_eq!(r.redact("WRONGPASS aa //! aa://!"), "WRONGPASS *** *** ***");
        assert_eq!(
            Redactor::url("aa://!@cache.internal:6379"),
            "aa://***@cache.internal:6379"
        );
        let r = Redactor::for_url("redis://uu:p/q@cache.internal:6379");
        assert_eq!(
            r.redact("redis://uu WRONGPASS p/q"),
            "redis://*** WRONGPASS ***"
        );
    }
}
