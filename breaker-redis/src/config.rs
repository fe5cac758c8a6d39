//! The store's configuration: where Redis is, the namespace, this replica's id, the flush
//! interval, the behaviour on store errors and the store's own breaker.

use crate::error::{Redactor, StoreError};
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
    /// # Errors
    /// [`StoreError::Config`] for an invalid URL, a `rediss://` URL without the `tls` feature,
    /// or an invalid namespace. The message never contains the URL's credentials.
    pub fn new(url: &str, namespace: &str) -> Result<StoreConfig, StoreError> {
        let redactor = Redactor::for_url(url);
        let scheme = url.split_once("://").map(|(s, _)| s);
        match scheme {
            Some("redis") => {}
            Some("rediss") => {
                if !cfg!(feature = "tls") {
                    return Err(StoreError::Config {
                        message: format!(
                            "`{}`: a rediss:// URL needs the `tls` feature of breaker-redis",
                            Redactor::url(url)
                        ),
                    });
                }
            }
            _ => {
                return Err(StoreError::Config {
                    message: format!(
                        "`{}`: expected a redis:// or rediss:// URL",
                        Redactor::url(url)
                    ),
                })
            }
        }
        if let Err(e) = redis::IntoConnectionInfo::into_connection_info(url) {
            return Err(StoreError::Config {
                message: format!(
                    "`{}`: {}",
                    Redactor::url(url),
                    redactor.redact(&e.to_string())
                ),
            });
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

    /// How often active breakers' counts are flushed. Range 1 ms ..= 1 h (clamped).
    pub fn flush_interval(mut self, d: Duration) -> Self {
        self.flush_interval = d.clamp(Duration::from_millis(1), Duration::from_secs(3600));
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
