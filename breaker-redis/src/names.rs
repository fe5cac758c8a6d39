//! Names that become Redis keys: namespaces, breaker ids, replica ids.
//!
//! # Why
//! A breaker's name and, for keyed breakers, its key (often user input: a host name, a tenant)
//! end up inside Redis key names. A key must never be able to address another namespace's data
//! or another breaker's, and it must never change which Redis Cluster slot a namespace lives
//! in. So:
//!
//! - A namespace, a breaker name and a replica id must match `[A-Za-z0-9_.:-]{1,128}`; anything
//!   else is an error that names the bad character and where it is.
//! - A key of a keyed breaker is *escaped*, not validated: every byte outside
//!   `[A-Za-z0-9_.-]` becomes `%XX` (uppercase hex), and the key is joined to the name with
//!   `#`, a character no name may contain. Different `(name, key)` pairs therefore always give
//!   different ids, and no id contains `{`, `}` or a separator of the key layout.
//! - Every key of a namespace starts with `br:{ns}:`, so the hash tag (the first `{...}`) is the
//!   namespace and all of its keys share one Cluster slot, which multi-key scripts need.

use std::fmt;
use std::sync::Arc;

/// Longest namespace, breaker name or replica id, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Longest key of a keyed breaker before escaping, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// A name that cannot be used, with what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error(
        "invalid {what}: empty; expected 1-{MAX_NAME_LEN} characters of `A-Z a-z 0-9 _ . : -`"
    )]
    Empty {
        /// `namespace`, `breaker name` or `replica id`.
        what: &'static str,
    },
    /// The name is longer than [`MAX_NAME_LEN`] bytes.
    #[error("invalid {what} `{prefix}...`: {len} bytes; expected at most {MAX_NAME_LEN}")]
    TooLong {
        /// `namespace`, `breaker name` or `replica id`.
        what: &'static str,
        /// The first 32 characters.
        prefix: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The name contains a character outside `[A-Za-z0-9_.:-]`.
    #[error(
        "invalid {what} `{name}`: character {ch:?} at byte {at} is not allowed; \
         expected only `A-Z a-z 0-9 _ . : -`"
    )]
    BadChar {
        /// `namespace`, `breaker name` or `replica id`.
        what: &'static str,
        /// The whole name.
        name: String,
        /// The offending character.
        ch: char,
        /// Its byte offset.
        at: usize,
    },
    /// The key of a keyed breaker is longer than [`MAX_KEY_LEN`] bytes.
    #[error("invalid breaker key: {len} bytes; expected at most {MAX_KEY_LEN}")]
    KeyTooLong {
        /// Its length in bytes.
        len: usize,
    },
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn validate(what: &'static str, s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty { what });
    }
    if s.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            what,
            prefix: s.chars().take(32).collect(),
            len: s.len(),
        });
    }
    if let Some((at, ch)) = s.char_indices().find(|&(_, c)| !name_char(c)) {
        return Err(NameError::BadChar {
            what,
            name: s.to_owned(),
            ch,
            at,
        });
    }
    Ok(())
}

/// A namespace: the unit of sharing. Every breaker of a namespace lives under one hash tag.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Namespace(Arc<str>);

impl Namespace {
    /// A namespace named `name`.
    ///
    /// # Errors
    /// [`NameError`] unless `name` matches `[A-Za-z0-9_.:-]{1,128}`.
    pub fn new(name: &str) -> Result<Self, NameError> {
        validate("namespace", name)?;
        Ok(Namespace(name.into()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The keys and channel of this namespace.
    pub fn keys(&self) -> NamespaceKeys {
        let ns = &self.0;
        NamespaceKeys {
            replicas: format!("br:{{{ns}}}:r"),
            version: format!("br:{{{ns}}}:v"),
            channel: format!("br:{{{ns}}}:ch"),
        }
    }

    /// The keys of one breaker of this namespace.
    pub fn breaker_keys(&self, id: &BreakerId) -> BreakerKeys {
        let (ns, id) = (&self.0, &id.0);
        BreakerKeys {
            state: format!("br:{{{ns}}}:s:{id}"),
            window: format!("br:{{{ns}}}:w:{id}"),
            leases: format!("br:{{{ns}}}:p:{id}"),
            votes: format!("br:{{{ns}}}:q:{id}"),
        }
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Namespace").field(&&*self.0).finish()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The namespace-wide keys: the live-replica set, the version counter and the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceKeys {
    /// Sorted set of live replicas (score: server time of their last flush, ms).
    pub replicas: String,
    /// Counter bumped by every transition of the namespace.
    pub version: String,
    /// The pub/sub channel transitions are published on.
    pub channel: String,
}

/// The keys of one shared breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakerKeys {
    /// The state hash.
    pub state: String,
    /// The bucketed window (one string of its non-empty buckets).
    pub window: String,
    /// The sorted set of probe leases (score: lease expiry, server ms).
    pub leases: String,
    /// The sorted set of quorum votes (score: server ms of the vote).
    pub votes: String,
}

/// The id of a shared breaker inside its namespace: a validated name, or a name and an escaped
/// key. See the [module docs](self).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BreakerId(Arc<str>);

impl BreakerId {
    /// The id of the breaker named `name`.
    ///
    /// # Errors
    /// [`NameError`] unless `name` matches `[A-Za-z0-9_.:-]{1,128}`.
    pub fn new(name: &str) -> Result<Self, NameError> {
        validate("breaker name", name)?;
        Ok(BreakerId(name.into()))
    }

    /// The id of the breaker for `key` of the keyed breaker `name`: `name#escaped-key`.
    ///
    /// Any key is accepted (it is escaped, never interpreted), up to [`MAX_KEY_LEN`] bytes.
    ///
    /// # Errors
    /// [`NameError`] if `name` is invalid or `key` is longer than [`MAX_KEY_LEN`] bytes.
    ///
    /// ```
    /// use breaker_redis::BreakerId;
    /// let id = BreakerId::keyed("upstream", "host:8080/{x}").unwrap();
    /// assert_eq!(id.as_str(), "upstream#host%3A8080%2F%7Bx%7D");
    /// ```
    pub fn keyed(name: &str, key: &str) -> Result<Self, NameError> {
        validate("breaker name", name)?;
        if key.len() > MAX_KEY_LEN {
            return Err(NameError::KeyTooLong { len: key.len() });
        }
        let mut id = String::with_capacity(name.len() + 1 + key.len());
        id.push_str(name);
        id.push('#');
        for b in key.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') {
                id.push(char::from(b));
            } else {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                id.push('%');
                id.push(char::from(HEX[usize::from(b >> 4)]));
                id.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        Ok(BreakerId(id.into()))
    }

    /// The id as it appears in keys and published messages.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads back an id from a published message; `None` if it is not one this module makes.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (name, key) = match s.split_once('#') {
            Some((n, k)) => (n, Some(k)),
            None => (s, None),
        };
        validate("breaker name", name).ok()?;
        if let Some(k) = key {
            let ok = k.len() <= 3 * MAX_KEY_LEN
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'%'));
            if !ok {
                return None;
            }
        }
        Some(BreakerId(s.into()))
    }
}

impl fmt::Debug for BreakerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BreakerId").field(&&*self.0).finish()
    }
}

impl fmt::Display for BreakerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of one replica (one process of the fleet), recorded with the transitions it causes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ReplicaId(Arc<str>);

impl ReplicaId {
    /// A replica id.
    ///
    /// # Errors
    /// [`NameError`] unless `id` matches `[A-Za-z0-9_.:-]{1,128}`.
    pub fn new(id: &str) -> Result<Self, NameError> {
        validate("replica id", id)?;
        Ok(ReplicaId(id.into()))
    }

    /// The default: the host name (characters outside `[A-Za-z0-9_.:-]` replaced by `_`,
    /// `unknown-host` if it cannot be read) and the process id, `host-1234`.
    pub fn from_host_and_pid() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown-host".to_owned());
        let host: String = host
            .chars()
            .take(100)
            .map(|c| if name_char(c) { c } else { '_' })
            .collect();
        ReplicaId(format!("{host}-{}", std::process::id()).into())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads back an id from the store; `None` if it is not valid.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        ReplicaId::new(s).ok()
    }
}

impl fmt::Debug for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReplicaId").field(&&*self.0).finish()
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_with_the_bad_character_named() {
        assert!(Namespace::new("orders.prod:eu-1_a").is_ok());
        let e = BreakerId::new("a b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid breaker name `a b`: character ' ' at byte 1 is not allowed; \
             expected only `A-Z a-z 0-9 _ . : -`"
        );
        assert!(matches!(
            Namespace::new("x}{y"),
            Err(NameError::BadChar { ch: '}', at: 1, .. })
        ));
        assert_eq!(
            Namespace::new("").unwrap_err(),
            NameError::Empty { what: "namespace" }
        );
        let long = "a".repeat(129);
        assert!(matches!(
            ReplicaId::new(&long),
            Err(NameError::TooLong { len: 129, .. })
        ));
        assert!(ReplicaId::new(&long[..128]).is_ok());
    }

    #[test]
    fn keys_share_the_namespace_hash_tag() {
        let ns = Namespace::new("orders").unwrap();
        let id = BreakerId::keyed("up", "}{evil}:s:x").unwrap();
        let keys = ns.breaker_keys(&id);
        assert_eq!(keys.state, "br:{orders}:s:up#%7D%7Bevil%7D%3As%3Ax");
        for k in [&keys.state, &keys.window, &keys.leases, &keys.votes] {
            // The hash tag is the first {...}: always the namespace.
            let open = k.find('{').unwrap();
            let close = k[open..].find('}').unwrap() + open;
            assert_eq!(&k[open + 1..close], "orders");
            assert_eq!(k.matches('{').count(), 1);
        }
        assert_eq!(ns.keys().channel, "br:{orders}:ch");
    }

    #[test]
    fn distinct_keys_give_distinct_ids() {
        let pairs = [("a", "b"), ("a", "b#"), ("a", "%62"), ("a", "B"), ("a", "")];
        let ids: Vec<_> = pairs
            .iter()
            .map(|(n, k)| BreakerId::keyed(n, k).unwrap())
            .collect();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                assert_ne!(a, b);
            }
            assert_eq!(BreakerId::parse(a.as_str()).as_ref(), Some(a));
        }
        // A plain name never equals a keyed id.
        assert_ne!(
            BreakerId::new("a").unwrap(),
            BreakerId::keyed("a", "").unwrap()
        );
        assert!(BreakerId::keyed("a", &"x".repeat(257)).is_err());
        assert!(BreakerId::parse("a#{x}").is_none());
    }

    #[test]
    fn default_replica_id_is_valid() {
        let id = ReplicaId::from_host_and_pid();
        assert!(ReplicaId::new(id.as_str()).is_ok());
        assert!(id.as_str().ends_with(&format!("-{}", std::process::id())));
    }
}
