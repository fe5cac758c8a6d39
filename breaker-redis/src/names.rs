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
//!
//! # One bound
//! A breaker id is what the server-side scripts receive, and they refuse an id longer than
//! [`MAX_ID_LEN`] bytes (their limit is this constant). Every id this module
//! makes fits, for every key of any length: a key whose escaped form would make the id longer
//! is *hashed*, `name#prefix~digest`, where `prefix` is the escaped key cut to what fits (at a
//! whole escape) and `digest` the first 128 bits of the SHA-256 of the whole key, in 32
//! lowercase hex digits. So an id is readable where it is short, keys that differ anywhere
//! (also past the prefix) get different ids (`~` is escaped in a key, so a hashed id never
//! equals an escaped one, and two hashed ids are equal only for a SHA-256 collision), and no
//! key is refused for its length or its bytes: a key taken from user input cannot make its
//! breaker local only, nor break the flush batch of the breakers sent with it.
//!
//! Why hash rather than refuse long keys: the escaped length of a key depends on its bytes
//! (`é` takes 6 bytes escaped, `a` one), so any bound on keys would refuse some short keys of
//! user input at run time, one key at a time, long after the code was tested with ASCII.
//!
//! ```
//! use breaker_redis::names::{BreakerId, MAX_ID_LEN};
//! let id = BreakerId::keyed("hosts", &"é".repeat(128)).unwrap();
//! assert!(id.as_str().len() <= MAX_ID_LEN);
//! assert!(id.as_str().starts_with("hosts#%C3%A9%C3%A9"));
//! assert_ne!(id, BreakerId::keyed("hosts", &"é".repeat(129)).unwrap());
//! ```
//!
//! # In messages
//! Errors show names as they were given, escaped (`str::escape_debug`: a newline reads `\n`,
//! a control character `\u{1b}`), so a name taken from input can never end a log line or
//! forge another.

use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

/// Longest namespace, breaker name or replica id, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Longest breaker id ([`BreakerId::as_str`]), in bytes: the limit the server-side scripts
/// check every id against (the scripts' limit is this constant). A name is at most
/// [`MAX_NAME_LEN`] bytes, and a keyed breaker's id is hashed to fit (see the
/// [module docs](self#one-bound)), so every id [`BreakerId`] makes fits.
pub const MAX_ID_LEN: usize = 256;

/// Hex digits of the key digest in a hashed id: 128 bits of SHA-256.
const DIGEST_HEX: usize = 32;

/// A name that cannot be used, with what was wrong. Messages show the name escaped
/// (see the [module docs](self#in-messages)); the fields hold it as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    #[error(
        "invalid {what} `{}...`: {len} bytes; expected at most {MAX_NAME_LEN}",
        .prefix.escape_debug()
    )]
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
        "invalid {what} `{}`: character {ch:?} at byte {at} is not allowed; \
         expected only `A-Z a-z 0-9 _ . : -`",
        .name.escape_debug()
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

    /// The id of the breaker for `key` of the keyed breaker `name`: `name#escaped-key`, or
    /// `name#escaped-prefix~digest` where that would be longer than [`MAX_ID_LEN`] bytes.
    ///
    /// Any key is accepted, of any length and any bytes (it is escaped or hashed, never
    /// interpreted); distinct keys give distinct ids. See the
    /// [module docs](self#one-bound).
    ///
    /// # Errors
    /// [`NameError`] if `name` is invalid (as [`BreakerId::new`]).
    ///
    /// ```
    /// use breaker_redis::BreakerId;
    /// let id = BreakerId::keyed("upstream", "host:8080/{x}").unwrap();
    /// assert_eq!(id.as_str(), "upstream#host%3A8080%2F%7Bx%7D");
    /// ```
    pub fn keyed(name: &str, key: &str) -> Result<Self, NameError> {
        validate("breaker name", name)?;
        let whole: usize = key.bytes().map(escaped_len).sum();
        let mut id = String::with_capacity(MAX_ID_LEN);
        id.push_str(name);
        id.push('#');
        if name.len() + 1 + whole <= MAX_ID_LEN {
            key.bytes().for_each(|b| push_escaped(&mut id, b));
        } else {
            // The readable prefix: whole escapes while they fit before `~` and the digest.
            let budget = MAX_ID_LEN - DIGEST_HEX - 1;
            for b in key.bytes() {
                if id.len() + escaped_len(b) > budget {
                    break;
                }
                push_escaped(&mut id, b);
            }
            id.push('~');
            let digest = Sha256::digest(key.as_bytes());
            for b in &digest[..DIGEST_HEX / 2] {
                id.push(char::from(LOWER_HEX[usize::from(b >> 4)]));
                id.push(char::from(LOWER_HEX[usize::from(b & 15)]));
            }
        }
        debug_assert!(id.len() <= MAX_ID_LEN);
        Ok(BreakerId(id.into()))
    }

    /// The id as it appears in keys and published messages: at most [`MAX_ID_LEN`] bytes of
    /// `A-Z a-z 0-9 _ . : - # % ~`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads back an id from a published message; `None` if it is not one this module makes.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        if s.len() > MAX_ID_LEN {
            return None;
        }
        let (name, key) = match s.split_once('#') {
            Some((n, k)) => (n, Some(k)),
            None => (s, None),
        };
        validate("breaker name", name).ok()?;
        if let Some(k) = key {
            let (escaped, digest) = match k.split_once('~') {
                Some((e, d)) => (e, Some(d)),
                None => (k, None),
            };
            let digest_ok = match digest {
                Some(d) => d.len() == DIGEST_HEX && d.bytes().all(|b| LOWER_HEX.contains(&b)),
                None => true,
            };
            let ok = digest_ok && escaped.bytes().all(|b| escaped_len(b) == 1 || b == b'%');
            if !ok {
                return None;
            }
        }
        Some(BreakerId(s.into()))
    }
}

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";
const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";

/// Bytes `b` takes escaped: 1 for `[A-Za-z0-9_.-]`, 3 (`%XX`) for any other.
fn escaped_len(b: u8) -> usize {
    if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') {
        1
    } else {
        3
    }
}

fn push_escaped(id: &mut String, b: u8) {
    if escaped_len(b) == 1 {
        id.push(char::from(b));
    } else {
        id.push('%');
        id.push(char::from(UPPER_HEX[usize::from(b >> 4)]));
        id.push(char::from(UPPER_HEX[usize::from(b & 15)]));
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
        assert!(BreakerId::parse("a#{x}").is_none());
    }

    /// Issue 26, item 5: 256 bytes of `é` escaped to 771 bytes, over the scripts' limit, and
    /// the key was accepted, never shared, and failed every flush batch it was in.
    #[test]
    fn a_key_too_long_for_an_id_is_hashed_to_fit() {
        let id = BreakerId::keyed("hosts", &"é".repeat(128)).unwrap();
        assert_eq!(
            id.as_str(),
            format!(
                "hosts#{}~e42dd264fd5cf1bc947505b995dceb9a",
                "%C3%A9".repeat(36)
            )
        );
        assert_eq!(id.as_str().len(), 255);
        assert_eq!(BreakerId::parse(id.as_str()), Some(id));
        // The prefix is cut at a whole escape, never inside one.
        let id = BreakerId::keyed("x", &"k".repeat(300)).unwrap();
        assert_eq!(
            id.as_str(),
            format!("x#{}~17b16d8ef494060fefa36a6a41567b8c", "k".repeat(221))
        );
        assert_eq!(id.as_str().len(), MAX_ID_LEN);
        // The longest key kept whole, and one byte more.
        let name = "n".repeat(MAX_NAME_LEN);
        let whole = "k".repeat(MAX_ID_LEN - MAX_NAME_LEN - 1);
        let id = BreakerId::keyed(&name, &whole).unwrap();
        assert_eq!(id.as_str(), format!("{name}#{whole}"));
        let id = BreakerId::keyed(&name, &format!("{whole}k")).unwrap();
        assert_eq!(id.as_str().len(), MAX_ID_LEN);
        assert!(id.as_str()[MAX_NAME_LEN..].starts_with(&format!("#{}~", "k".repeat(94))));
        // A `~` of a key is escaped: an escaped key never reads as a hashed one.
        assert_eq!(BreakerId::keyed("a", "b~c").unwrap().as_str(), "a#b%7Ec");
        for bad in ["a#b~", "a#b~E42DD264FD5CF1BC947505B995DCEB9A", "a#b~c~d"] {
            assert_eq!(BreakerId::parse(bad), None, "{bad}");
        }
        assert_eq!(
            BreakerId::parse(&format!("a#{}", "b".repeat(MAX_ID_LEN))),
            None
        );
    }

    #[test]
    fn names_in_messages_are_escaped() {
        let e = BreakerId::new("pay\nINFO forged").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid breaker name `pay\\nINFO forged`: character '\\n' at byte 3 is not \
             allowed; expected only `A-Z a-z 0-9 _ . : -`"
        );
        let e = Namespace::new(&format!("\u{1b}[2J{}", "a".repeat(200))).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid namespace `\\u{{1b}}[2J{}...`: 204 bytes; expected at most 128",
                "a".repeat(28)
            )
        );
        // The fields keep the name as given.
        assert!(matches!(
            BreakerId::new("a\rb"),
            Err(NameError::BadChar { ref name, ch: '\r', at: 1, .. }) if name == "a\rb"
        ));
    }

    proptest::proptest! {
        /// Every id fits the scripts' bound and reads back; distinct keys give distinct ids.
        #[test]
        fn every_id_fits_and_distinct_keys_stay_distinct(
            name in "[A-Za-z0-9_.:-]{1,128}",
            a in proptest::prop_oneof![".{0,300}", "\\PC{0,200}", "[a~%#]{0,600}"],
            b in proptest::prop_oneof![".{0,300}", "\\PC{0,200}", "[a~%#]{0,600}"],
        ) {
            let (ia, ib) = (BreakerId::keyed(&name, &a).unwrap(), BreakerId::keyed(&name, &b).unwrap());
            proptest::prop_assert!(ia.as_str().len() <= MAX_ID_LEN, "{}", ia.as_str().len());
            proptest::prop_assert_eq!(BreakerId::parse(ia.as_str()), Some(ia.clone()));
            proptest::prop_assert_eq!(a == b, ia == ib);
            // A long shared prefix: only the digest tells them apart.
            let (la, lb) = (format!("{}{a}", "p".repeat(300)), format!("{}{b}", "p".repeat(300)));
            let (ja, jb) = (BreakerId::keyed(&name, &la).unwrap(), BreakerId::keyed(&name, &lb).unwrap());
            proptest::prop_assert_eq!(a == b, ja == jb);
            proptest::prop_assert!(ja.as_str().len() <= MAX_ID_LEN);
        }
    }

    #[test]
    fn default_replica_id_is_valid() {
        let id = ReplicaId::from_host_and_pid();
        assert!(ReplicaId::new(id.as_str()).is_ok());
        assert!(id.as_str().ends_with(&format!("-{}", std::process::id())));
    }
}
