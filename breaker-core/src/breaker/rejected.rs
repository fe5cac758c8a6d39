//! Rejections: a call the breaker did not let through.

use super::state::State;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a call was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The breaker is open and its cooldown has not ended.
    Open,
    /// The breaker is half-open and every probe slot is taken.
    HalfOpenFull,
    /// The breaker was forced open.
    ForcedOpen,
}

impl RejectReason {
    /// A lowercase, snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::HalfOpenFull => "half_open_full",
            RejectReason::ForcedOpen => "forced_open",
        }
    }
}

/// A call rejected locally by a breaker: the dependency was not called.
///
/// This is never a failure of the dependency: it is not recorded by any breaker, it is never
/// retried, and it is a distinct variant of the pipeline's error so callers can pick a
/// fallback and metrics can tell it apart.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
#[repr(C)] // `reason` last: its spare values are the niche of `Rejection` and `Error` (below)
pub struct Rejected {
    /// The rest of the cooldown in nanoseconds, [`NO_RETRY_AFTER`] for none.
    retry_after: u64,
    name: &'static str,
    key: Key,
    reason: RejectReason,
}

/// A rejection's key. Its drop hands the `Arc` by value to a function out of line, so that
/// dropping a rejection never takes its address (`Arc`'s own drop passes a pointer to the
/// field to its slow path): a caller that drops a rejection it did not read can then keep it
/// in registers, and drop the fields it never wrote (`BREAKER_IR=open/new`, benches/breaker.rs).
#[derive(Clone, PartialEq, Eq)]
struct Key(Option<Arc<str>>);

impl Drop for Key {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            release(key);
        }
    }
}

#[inline(never)]
fn release(key: Arc<str>) {
    drop(key);
}

// A rejection travels in every pipeline call's result type (`Result<T, Error<E>>`), which a
// call moves a few times, so its size is paid on the success path too: 8 bytes of
// `retry_after` where an `Option<Duration>` takes 16, and `reason` placed last, where the enums
// that carry a rejection keep their tags in its unused values (`Rejection` is no larger than
// `Rejected`, and `Error` is as large as its `GaveUp` variant, not larger).
const _: () = assert!(std::mem::size_of::<Rejected>() == 48);

/// `Rejected::retry_after` when there is none. Cooldowns are at most 365 days
/// ([`MAX_COOLDOWN`](super::MAX_COOLDOWN)); a duration beyond `u64::MAX - 1` nanoseconds
/// (584 years) is clamped.
const NO_RETRY_AFTER: u64 = u64::MAX;

impl Rejected {
    /// `retry_after` in the encoding of [`Rejected::from_nanos`].
    pub(super) fn retry_after_nanos(retry_after: Option<Duration>) -> u64 {
        retry_after.map_or(NO_RETRY_AFTER, |d| {
            u64::try_from(d.as_nanos()).map_or(NO_RETRY_AFTER - 1, |n| n.min(NO_RETRY_AFTER - 1))
        })
    }

    /// A rejection whose rest of the cooldown is `retry_after` nanoseconds, `u64::MAX` for
    /// none.
    #[inline]
    pub(super) fn from_nanos(
        reason: RejectReason,
        retry_after: u64,
        name: &'static str,
        key: Option<Arc<str>>,
    ) -> Rejected {
        Rejected {
            retry_after,
            name,
            key: Key(key),
            reason,
        }
    }

    /// Why.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The state that rejected the call.
    pub fn state(&self) -> State {
        match self.reason() {
            RejectReason::Open => State::Open,
            RejectReason::HalfOpenFull => State::HalfOpen,
            RejectReason::ForcedOpen => State::ForcedOpen,
        }
    }

    /// How long until a probe may be admitted: the rest of the cooldown when open, `None` when
    /// half-open (a slot frees when a probe completes) or forced open.
    pub fn retry_after(&self) -> Option<Duration> {
        (self.retry_after != NO_RETRY_AFTER).then(|| Duration::from_nanos(self.retry_after))
    }

    /// The breaker's name (empty if it has none).
    pub fn name(&self) -> &str {
        self.name
    }

    /// The key of the breaker that refused, for a breaker of a keyed set
    /// ([`BreakerFactory::create_keyed`](super::BreakerFactory::create_keyed), a tagged
    /// [`Registry`](crate::registry::Registry)).
    pub fn key(&self) -> Option<&str> {
        self.key.0.as_deref()
    }

    fn describe(&self) -> String {
        let mut who = if self.name.is_empty() {
            "circuit breaker".to_string()
        } else {
            format!("circuit breaker `{}`", self.name)
        };
        if let Some(key) = &self.key.0 {
            who.push_str(&format!(" for key `{key}`"));
        }
        match (self.reason(), self.retry_after()) {
            (RejectReason::Open, Some(d)) => {
                // To the millisecond, rounded up (never sooner than the truth): a message is
                // read by people; `retry_after` keeps the breaker's own value.
                let ms = u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
                let d = Duration::from_millis(ms);
                format!("{who} is open; a probe may be admitted in {d:?}")
            }
            (RejectReason::Open, None) => format!("{who} is open"),
            (RejectReason::HalfOpenFull, _) => {
                format!("{who} is half-open and every probe slot is taken")
            }
            (RejectReason::ForcedOpen, _) => format!("{who} was forced open"),
        }
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after())
            .field("name", &self.name)
            .field("key", &self.key.0)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_keeps_its_key_and_releases_it_once_when_dropped() {
        let key: Arc<str> = Arc::from("tenant-7");
        let r = Rejected::from_nanos(RejectReason::Open, 5, "db", Some(Arc::clone(&key)));
        let copy = r.clone();
        assert_eq!(Arc::strong_count(&key), 3);
        assert_eq!((r.key(), copy.key()), (Some("tenant-7"), Some("tenant-7")));
        assert_eq!(r, copy);
        drop(r);
        assert_eq!(Arc::strong_count(&key), 2);
        drop(copy);
        assert_eq!(Arc::strong_count(&key), 1);
        let none = Rejected::from_nanos(RejectReason::ForcedOpen, NO_RETRY_AFTER, "", None);
        assert_eq!((none.key(), none.retry_after()), (None, None));
    }
}
