//! The store's configuration: where Redis is, the namespace, this replica's id, the flush
//! interval, the behaviour on store errors and the store's own breaker.

use crate::error::{misread, Redactor, StoreError};
use crate::names::{Namespace, ReplicaId};
use breaker_core::clock::Clock;
use std::fmt;
use std::time::Duration;

/// What shared breakers do while the store is unreachable (its own breaker is open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnStoreError {
    /// The default: local rules go on, a known shared deadline is honoured (an open fleet
    /// stays open until its deadline), and fleet-rate rules fall back to the local window.
    #[default]
    Local,
    /// Ignore the shared state: every breaker decides as a local breaker.
    Open,
    /// Behave as [`Local`](Self::Local) for `grace`, then reject every call until the store is
    /// back (for dependencies where an unsupervised call is worse than none).
    Closed {
        /// How long the store may be unreachable before calls are rejected.
        grace: Duration,
    },
}

/// How to reach the store and how to behave. See [`StoreConfig::new`].
#[derive(Clone)]
pub struct StoreConfig {
    pub(crate) url: String,
    pub(crate) redactor: Redactor,
    pub(crate) namespace: Namespace,
    pub(crate) replica: ReplicaId,
    pub(crate) flush_interval: Duration,
    pub(crate) flush_jitter: f64,
    pub(crate) op_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) on_error: OnStoreError,
    pub(crate) store_failures: u32,
    pub(crate) store_cooldown: Duration,
    pub(crate) store_cooldown_max: Duration,
    pub(crate) clock: Clock,
    pub(crate) tls_root: Option<Vec<u8>>,
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &Redactor::url(&self.url))
            .field("namespace", &self.namespace)
            .field("replica", &self.replica)
            .field("flush_interval", &self.flush_interval)
            .field("op_timeout", &self.op_timeout)
            .field("on_error", &self.on_error)
            .field("store_failures", &self.store_failures)
            .field("tls_root", &self.tls_root.as_ref().map(|_| "set"))
            .finish_non_exhaustive()
    }
}

impl StoreConfig {
    /// A store at `url` (`redis://[user:password@]host:port[/db]`, or `rediss://` for TLS with
    /// the `tls` feature) for the namespace `namespace`, with the defaults: replica id from
    /// the host name and process id, flush every 1 s (jitter ±10 %), 250 ms per store
    /// operation, 1 s to connect, [`OnStoreError::Local`], the store's breaker opening after 3
    /// consecutive failures for 1 s growing to 30 s, the system clock.
    ///
    /// The URL is read by the `url` crate's parser (as the `redis` client reads it). In a user
    /// name or password, `@` and `:` may be written as they are (the last `@` ends the user
    /// info, the first `:` ends the user name); `/`, `?` and `#` must be percent-encoded
    /// (`%2F`, `%3F`, `%23`), since the parser ends the user info at them.
    ///
    /// # Errors
    /// [`StoreError::Config`] for a URL that does not parse (the parser's reason, and how to
    /// write a password), one whose user info a `/`, `?` or `#` cut short (an `@` after the
    /// host), a scheme other than `redis://` or `rediss://`, a `rediss://` URL without the
    /// `tls` feature, a URL the client refuses (a database that is not a number), or an
    /// invalid namespace. The message shows the URL as [`redacted_url`](Self::redacted_url)
    /// does: never its user info, query or fragment.
    pub fn new(url: &str, namespace: &str) -> Result<StoreConfig, StoreError> {
        const FORM: &str = "expected `redis://[user:password@]host[:port][/db]`";
        const ENCODE: &str = "percent-encode `/`, `?` and `#` in a user name or password \
                              (`%2F`, `%3F`, `%23`)";
        let redactor = Redactor::for_url(url);
        let shown = Redactor::url(url);
        let config = |message: String| StoreError::Config { message };
        let parsed = match url::Url::parse(url) {
            Ok(u) => u,
            // A parser's message names the rule broken, never the text.
            Err(e) if url.contains('@') => {
                return Err(config(format!(
                    "`{shown}`: not a URL ({e}); {FORM}; {ENCODE}"
                )))
            }
            Err(e) => return Err(config(format!("`{shown}`: not a URL ({e}); {FORM}"))),
        };
        match parsed.scheme() {
            _ if parsed.cannot_be_a_base() => {
                return Err(config(format!(
                    "`{shown}`: expected a redis:// or rediss:// URL"
                )))
            }
            "redis" => {}
            "rediss" => {
                if !cfg!(feature = "tls") {
                    return Err(config(format!(
                        "`{shown}`: a rediss:// URL needs the `tls` feature of breaker-redis"
                    )));
                }
            }
            _ => {
                return Err(config(format!(
                    "`{shown}`: expected a redis:// or rediss:// URL"
                )))
            }
        }
        if misread(&parsed) {
            return Err(config(format!(
                "`{shown}`: an `@` follows the host, so the user info was cut short by a `/`, \
                 `?` or `#`; {ENCODE}"
            )));
        }
        if let Err(e) = redis::IntoConnectionInfo::into_connection_info(parsed) {
            return Err(config(format!(
                "`{shown}`: {}",
                redactor.redact(&e.to_string())
            )));
        }
        let namespace = Namespace::new(namespace).map_err(|e| StoreError::Config {
            message: e.to_string(),
        })?;
        Ok(StoreConfig {
            url: url.to_owned(),
            redactor,
            namespace,
            replica: ReplicaId::from_host_and_pid(),
            flush_interval: Duration::from_secs(1),
            flush_jitter: 0.1,
            op_timeout: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(1),
            on_error: OnStoreError::Local,
            store_failures: 3,
            store_cooldown: Duration::from_secs(1),
            store_cooldown_max: Duration::from_secs(30),
            clock: Clock::system(),
            tls_root: None,
        })
    }

    /// This replica's id (recorded with the transitions it causes).
    pub fn replica(mut self, replica: ReplicaId) -> Self {
        self.replica = replica;
        self
    }

    /// How often active breakers' counts are flushed. Range
    /// [`MIN_FLUSH_INTERVAL`](breaker_core::scope::MIN_FLUSH_INTERVAL) (1 ms) ..=
    /// [`MAX_FLUSH_INTERVAL`](breaker_core::scope::MAX_FLUSH_INTERVAL) (1 h), clamped here; a
    /// config file's `[store] flush_interval` outside it is an error when it loads.
    pub fn flush_interval(mut self, d: Duration) -> Self {
        use breaker_core::scope::{MAX_FLUSH_INTERVAL, MIN_FLUSH_INTERVAL};
        self.flush_interval = d.clamp(MIN_FLUSH_INTERVAL, MAX_FLUSH_INTERVAL);
        self
    }

    /// Jitter of the flush interval as a fraction: each interval is drawn from
    /// `[d * (1 - j), d * (1 + j)]`. Range `0.0..=0.5` (clamped).
    pub fn flush_jitter(mut self, j: f64) -> Self {
        self.flush_jitter = if j.is_finite() {
            j.clamp(0.0, 0.5)
        } else {
            0.0
        };
        self
    }

    /// The timeout of every store operation (ours, around the client's). Range 1 ms ..= 60 s.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d.clamp(Duration::from_millis(1), Duration::from_secs(60));
        self
    }

    /// The timeout of a connection attempt. Range 1 ms ..= 60 s.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d.clamp(Duration::from_millis(1), Duration::from_secs(60));
        self
    }

    /// What shared breakers do while the store is unreachable.
    pub fn on_error(mut self, mode: OnStoreError) -> Self {
        self.on_error = mode;
        self
    }

    /// The store's own breaker: open after `failures` consecutive failed operations (range
    /// `1..=1000`), for `cooldown` at first, doubling on each failed retry up to `max`.
    pub fn store_breaker(mut self, failures: u32, cooldown: Duration, max: Duration) -> Self {
        self.store_failures = failures.clamp(1, 1000);
        self.store_cooldown = cooldown.max(Duration::from_millis(1));
        self.store_cooldown_max = max.max(self.store_cooldown);
        self
    }

    /// The monotonic clock deadlines are converted to (use the breakers' clock).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Trust this PEM root certificate for `rediss://` instead of the system's roots.
    pub fn tls_root_certificate(mut self, pem: Vec<u8>) -> Self {
        self.tls_root = Some(pem);
        self
    }

    /// The namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The URL with credentials replaced by `***`.
    pub fn redacted_url(&self) -> String {
        Redactor::url(&self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> String {
        StoreConfig::new(url, "ns").unwrap_err().to_string()
    }

    const ENCODE: &str = "percent-encode `/`, `?` and `#` in a user name or password (`%2F`, \
                          `%3F`, `%23`)";

    /// Issue 26, item 5: a password with an unencoded `/`, `?` or `#` was shown whole, or up
    /// to that character, in this error (the URL was split by hand).
    #[test]
    fn a_password_the_parser_cuts_short_is_never_shown() {
        assert_eq!(
            refused("redis://svc:p#ss@cache:6379/0"),
            format!(
                "invalid store configuration: `redis://***@cache:6379/0`: not a URL (invalid \
                 port number); expected `redis://[user:password@]host[:port][/db]`; {ENCODE}"
            )
        );
        for url in [
            "redis://svc:1234/5678@cache:6379/0",
            "redis://svc:12?34@cache:6379/0",
            "redis://svc:12#34@cache:6379/0",
        ] {
            assert_eq!(
                refused(url),
                format!(
                    "invalid store configuration: `redis://***@cache:6379/0`: an `@` follows \
                     the host, so the user info was cut short by a `/`, `?` or `#`; {ENCODE}"
                ),
                "{url}"
            );
        }
        // `@` and `:` in a password need no encoding: the last `@` ends the user info.
        let cfg = StoreConfig::new("redis://svc:p@ss:w0rd@cache:6379/0", "ns").unwrap();
        assert_eq!(cfg.redacted_url(), "redis://***@cache:6379/0");
        assert!(!format!("{cfg:?}").contains("ss:w0rd"), "{cfg:?}");
    }

    #[test]
    fn other_bad_urls_name_what_is_wrong() {
        assert_eq!(
            refused("redis://cache:99999"),
            "invalid store configuration: `redis://cache:99999`: not a URL (invalid port \
             number); expected `redis://[user:password@]host[:port][/db]`"
        );
        assert_eq!(
            refused("localhost:6379"),
            "invalid store configuration: `localhost:6379`: expected a redis:// or rediss:// URL"
        );
        assert_eq!(
            refused("user:secret@localhost:6379"),
            "invalid store configuration: `***@localhost:6379`: expected a redis:// or rediss:// \
             URL"
        );
        assert_eq!(
            refused("http://u:secret@cache/?password=secret2"),
            "invalid store configuration: `http://***@cache/`: expected a redis:// or rediss:// \
             URL"
        );
        assert_eq!(
            refused("redis://u:secret@cache:6379/x"),
            "invalid store configuration: `redis://***@cache:6379/x`: Invalid database number- \
             InvalidClientConfig"
        );
        // A control character is escaped: the message stays one line.
        let e = refused("redis://ca\u{1b}[2Jche\n:1");
        assert!(!e.contains(['\u{1b}', '\n']), "{e}");
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_needs_the_tls_feature() {
        assert_eq!(
            refused("rediss://:pw@cache:6380"),
            "invalid store configuration: `rediss://***@cache:6380`: a rediss:// URL needs the \
             `tls` feature of breaker-redis"
        );
    }

    /// User info is redacted from every message, `Debug` and shown URL, for passwords of any
    /// characters, written as they are or percent-encoded, whether or not the URL parses.
    mod redaction {
        use super::*;
        use proptest::prelude::*;

        fn texts(url: &str) -> Vec<String> {
            let mut out = vec![Redactor::url(url)];
            match StoreConfig::new(url, "ns") {
                Ok(cfg) => {
                    out.push(format!("{cfg:?}"));
                    out.push(cfg.redacted_url());
                }
                Err(e) => {
                    out.push(e.to_string());
                    out.push(format!("{e:?}"));
                }
            }
            out
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn passwords_never_leave_in_any_text(
                user in "[a-z]{0,3}|[a-z]{2,8}",
                password in "[ -~]{2,24}|\\PC{2,12}|[/?#@:%a-z0-9]{2,24}",
            ) {
                let encoded = percent_encoding::utf8_percent_encode(
                    &password,
                    percent_encoding::NON_ALPHANUMERIC,
                )
                .to_string();
                // What the client sends for a password written as it is.
                let decoded = percent_encoding::percent_decode_str(&password)
                    .decode_utf8_lossy()
                    .into_owned();
                let cases = [
                    (format!("redis://{user}:{password}@cache.internal:6379/0"), &decoded),
                    (format!("redis://{user}:{encoded}@cache.internal:6379/0"), &encoded),
                    (format!("rediss://{user}:{password}@cache.internal/"), &decoded),
                    (format!("{user}:{password}@cache.internal:6379"), &decoded),
                ];
                // Forms the fixed parts of the texts hold by chance, or too short to search
                // for (1 byte, documented), are not this property's. The redacted message's
                // own text is such a part: `"* "` is in `WRONGPASS *** ***` for any password.
                let fixed = [
                    texts("redis://u:xx@cache.internal:6379/0"),
                    texts("rediss://u:xx@cache.internal/"),
                    texts("u:xx@cache.internal:6379"),
                    texts("redis://u:x#x@cache.internal:6379/0"),
                    texts("redis://u:12?34@cache.internal:6379/0"),
                    vec![Redactor::for_url("redis://u:xx@cache.internal:6379/0")
                        .redact("WRONGPASS xx xx")],
                ]
                .concat()
                .join("\n");
                for form in [&password, &encoded, &decoded] {
                    prop_assume!(form.len() >= 2 && !fixed.contains(form.as_str()));
                }
                for (url, other) in &cases {
                    let forms = [password.as_str(), other.as_str()];
                    let message = Redactor::for_url(url)
                        .redact(&format!("WRONGPASS {} {}", forms[0], forms[1]));
                    for t in texts(url).into_iter().chain([message]) {
                        for form in forms {
                            prop_assert!(!t.contains(form), "{url:?} {form:?}: {t}");
                        }
                    }
                }
            }
        }
    }
}
