//! Where a breaker's state lives: this process (`local`), or the fleet of replicas through a
//! shared store (`shared`, `quorum(k)`), and what a shared breaker does when its store is
//! unreachable.
//!
//! This crate only names and parses the scopes; the shared state itself is the
//! `breaker-redis` crate's (so a user who does not need it compiles no Redis code). One parser
//! for the plain API ([`str::parse`]), config files (`scope = "shared"`) and the attribute
//! (`#[circuit_breaker(scope = "shared")]`, checked at compile time), with the same messages.
//!
//! - `local` (the default): today's behaviour, each process its own breaker.
//! - `shared`: one breaker state for the fleet: trips, cooldowns, probe caps and fleet-wide
//!   failure-rate rules.
//! - `quorum(k)`: the fleet opens when `k` distinct replicas tripped locally within the
//!   window, so one bad replica never opens the fleet. `k` in `1..=1000`; `quorum(1)` is
//!   `shared`.

use crate::syntax::DslError;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The largest `k` of `quorum(k)`.
pub const MAX_QUORUM: u32 = 1000;

/// The shortest flush interval of a shared store (`[store] flush_interval`, `breaker-redis`'s
/// `StoreConfig::flush_interval`): 1 ms.
pub const MIN_FLUSH_INTERVAL: Duration = Duration::from_millis(1);

/// The longest flush interval of a shared store: 1 h (a fleet rule counts a replica's calls
/// only once they are flushed).
pub const MAX_FLUSH_INTERVAL: Duration = Duration::from_secs(3600);

/// The most buckets of a shared breaker's time window (the store keeps a breaker's window in
/// a few hundred bytes: 20 buckets and its leases stay under 1 KiB).
pub const MAX_SHARED_BUCKETS: u32 = 20;

/// Where a breaker's state lives. See the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scope {
    /// This process only (the default).
    #[default]
    Local,
    /// One state for the fleet.
    Shared,
    /// The fleet opens when this many distinct replicas tripped locally within the window;
    /// `1..=`[`MAX_QUORUM`].
    Quorum(u32),
}

impl Scope {
    /// Whether the state lives in a shared store (`shared` or `quorum(k)`).
    pub fn is_shared(self) -> bool {
        !matches!(self, Scope::Local)
    }

    /// The distinct replicas whose trips open the fleet: 1 for `shared`, `k` for `quorum(k)`,
    /// `None` for `local`.
    pub fn quorum(self) -> Option<u32> {
        match self {
            Scope::Local => None,
            Scope::Shared => Some(1),
            Scope::Quorum(k) => Some(k),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Local => f.write_str("local"),
            Scope::Shared => f.write_str("shared"),
            Scope::Quorum(k) => write!(f, "quorum({k})"),
        }
    }
}

const SCOPES: [&str; 3] = ["`local`", "`shared`", "`quorum(k)` with k in 1..=1000"];

/// Where the text of `s` starts and ends once trimmed.
fn trimmed(s: &str) -> (usize, &str) {
    let start = s.len() - s.trim_start().len();
    (start, s.trim())
}

/// Reads `name(arg)`: the argument and its span, or `None` when `t` is not of that shape.
fn call<'a>(t: &'a str, name: &str) -> Option<(usize, &'a str)> {
    let rest = t.strip_prefix(name)?;
    let inner = rest.trim_start().strip_prefix('(')?.strip_suffix(')')?;
    let at = t.len() - 1 - inner.len();
    let (lead, arg) = trimmed(inner);
    Some((at + lead, arg))
}

impl FromStr for Scope {
    type Err = DslError;

    /// Parses `local`, `shared` or `quorum(k)`.
    ///
    /// # Errors
    /// A [`DslError`] naming the offending fragment: an unknown scope (with a suggestion), a
    /// `k` that is not a whole number or is outside `1..=1000`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (at, t) = trimmed(s);
        match t {
            "local" => return Ok(Scope::Local),
            "shared" => return Ok(Scope::Shared),
            _ => {}
        }
        if let Some((arg_at, arg)) = call(t, "quorum") {
            let span = at + arg_at..at + arg_at + arg.len();
            return match arg.parse::<u32>() {
                Ok(k) if (1..=MAX_QUORUM).contains(&k) => Ok(Scope::Quorum(k)),
                Ok(k) => Err(DslError::new(
                    s,
                    span,
                    format!("quorum `{k}` is out of range: must be in 1..=1000"),
                )),
                Err(_) => Err(DslError::new(
                    s,
                    span,
                    format!("invalid quorum `{arg}`: not a whole number"),
                )
                .expected(["a whole number of replicas in 1..=1000"])),
            };
        }
        let word = t
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .unwrap_or(t);
        let mut e =
            DslError::new(s, at..at + t.len(), format!("unknown scope `{t}`")).expected(SCOPES);
        if let Some(m) = crate::syntax::suggest(word, &["local", "shared", "quorum"]) {
            // A quorum needs its count in parentheses: `quorum 3` means `quorum(3)`.
            let help = if m == "quorum" {
                let digits: String = t
                    .chars()
                    .skip_while(|c| !c.is_ascii_digit())
                    .take_while(char::is_ascii_digit)
                    .collect();
                let k = if digits.is_empty() { "k" } else { &digits };
                format!("did you mean `quorum({k})`?")
            } else {
                format!("did you mean `{m}`?")
            };
            e = e.help(help);
        }
        Err(e)
    }
}

/// What a shared breaker does while its store is unreachable (the store's own breaker is
/// open): `local` (the default), `open` or `closed(grace)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StoreErrorMode {
    /// Local rules go on; a known shared deadline is honoured; fleet-rate rules fall back to
    /// the local window.
    #[default]
    Local,
    /// Ignore the shared state: decide as a local breaker.
    Open,
    /// As `local` for `grace`, then reject every call until the store is back.
    Closed {
        /// How long the store may be unreachable before calls are rejected.
        grace: Duration,
    },
}

impl fmt::Display for StoreErrorMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreErrorMode::Local => f.write_str("local"),
            StoreErrorMode::Open => f.write_str("open"),
            StoreErrorMode::Closed { grace } => {
                write!(f, "closed({})", crate::syntax::fmt_duration(*grace))
            }
        }
    }
}

impl FromStr for StoreErrorMode {
    type Err = DslError;

    /// Parses `local`, `open` or `closed(grace)` (`closed(30s)`).
    ///
    /// # Errors
    /// A [`DslError`] naming the offending fragment.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (at, t) = trimmed(s);
        match t {
            "local" => return Ok(StoreErrorMode::Local),
            "open" => return Ok(StoreErrorMode::Open),
            _ => {}
        }
        if let Some((arg_at, arg)) = call(t, "closed") {
            return crate::syntax::parse_duration(arg)
                .map(|grace| StoreErrorMode::Closed { grace })
                .map_err(|e| e.offset(s, at + arg_at));
        }
        if t == "closed" {
            return Err(DslError::new(
                s,
                at..at + t.len(),
                "store-error mode `closed` needs its grace",
            )
            .expected(["`closed(grace)` such as `closed(30s)`"]));
        }
        Err(DslError::new(
            s,
            at..at + t.len(),
            format!("unknown store-error mode `{t}`"),
        )
        .expected(["`local`", "`open`", "`closed(grace)` such as `closed(30s)`"]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_without_its_grace_says_so() {
        assert_eq!(
            " closed".parse::<StoreErrorMode>().unwrap_err().to_string(),
            "store-error mode `closed` needs its grace at 1..7; expected `closed(grace)` such as \
             `closed(30s)`"
        );
    }

    #[test]
    fn scopes_parse_and_print_back() {
        for (s, want) in [
            ("local", Scope::Local),
            (" shared ", Scope::Shared),
            ("quorum(3)", Scope::Quorum(3)),
            ("quorum( 1000 )", Scope::Quorum(1000)),
        ] {
            let got: Scope = s.parse().unwrap();
            assert_eq!(got, want);
            assert_eq!(got.to_string().parse::<Scope>().unwrap(), want);
        }
        assert_eq!(Scope::Shared.quorum(), Some(1));
        assert!(!Scope::Local.is_shared());
    }

    #[test]
    fn bad_scopes_name_the_fragment() {
        let e = "sharde".parse::<Scope>().unwrap_err();
        assert_eq!(
            e.describe(),
            "unknown scope `sharde`; expected one of `local`, `shared` or `quorum(k)` with k \
             in 1..=1000; did you mean `shared`?"
        );
        assert_eq!(e.span, 0..6);
        let e = "quorum(0)".parse::<Scope>().unwrap_err();
        assert_eq!(
            (e.fragment.as_str(), e.message.as_str()),
            ("0", "quorum `0` is out of range: must be in 1..=1000")
        );
        let e = "quorum(two)".parse::<Scope>().unwrap_err();
        assert_eq!((e.fragment.as_str(), e.span.clone()), ("two", 7..10));
        // The count goes in parentheses.
        let e = "quorum 3".parse::<Scope>().unwrap_err();
        assert!(
            e.describe().ends_with("did you mean `quorum(3)`?"),
            "{}",
            e.describe()
        );
        let e = "quorum".parse::<Scope>().unwrap_err();
        assert!(
            e.describe().ends_with("did you mean `quorum(k)`?"),
            "{}",
            e.describe()
        );
    }

    #[test]
    fn store_error_modes() {
        assert_eq!("local".parse(), Ok(StoreErrorMode::Local));
        assert_eq!("open".parse(), Ok(StoreErrorMode::Open));
        assert_eq!(
            "closed(30s)".parse(),
            Ok(StoreErrorMode::Closed {
                grace: Duration::from_secs(30)
            })
        );
        let e = "closed(30 parsecs)".parse::<StoreErrorMode>().unwrap_err();
        assert!(e.fragment.contains("parsecs"), "{e:?}");
        let e = "shut".parse::<StoreErrorMode>().unwrap_err();
        assert!(e.describe().starts_with("unknown store-error mode `shut`"));
    }
}
