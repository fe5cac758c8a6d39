//! Rejections: a call the breaker did not let through.

use super::state::State;
use std::fmt;
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
///
/// A plain value (`Copy`, 32 bytes, no drop): why, for how long, and the breaker's name, as
/// Resilience4j's `CallNotPermittedException` names its breaker. It owns nothing, so a caller
/// that drops one unread pays nothing for it, and the closed path of every caller of
/// [`try_acquire`](super::CircuitBreaker::try_acquire) keeps its permit in registers (a
/// rejection that owned a key had drop glue, and the caller kept the whole result in memory for
/// its unwinding path). A keyed breaker's key is the caller's own (it chose the breaker by it);
/// the breaker's `tracing` events name it.
#[derive(Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
#[repr(C)] // `reason` last: its spare values are the niche of `Rejection` and `Error` (below)
pub struct Rejected {
    /// The rest of the cooldown in nanoseconds, [`NO_RETRY_AFTER`] for none.
    retry_after: u64,
    name: &'static str,
    reason: RejectReason,
}

// A rejection travels in every pipeline call's result type (`Result<T, Error<E>>`), which a
// call moves a few times, so its size is paid on the success path too: 8 bytes of
// `retry_after` where an `Option<Duration>` takes 16, and `reason` placed last, where the enums
// that carry a rejection keep their tags in its unused values.
const _: () = assert!(std::mem::size_of::<Rejected>() == 32);

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
    ) -> Rejected {
        Rejected {
            retry_after,
            name,
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
    ///
    /// With the system clock, a rejection decided by the coarse clock (an open breaker whose
    /// cooldown has well over a tick to go: see the [module docs](super)) reads early by up to
    /// the coarse clock's resolution (a kernel tick, 4 ms with `HZ=250`) plus 0.1 % of the
    /// cooldown, so a call made exactly `retry_after` later may be rejected once more, with the
    /// exact rest; the breaker itself never admits its probe later than by the precise clock.
    /// The tokio, manual and custom clocks give the exact rest.
    pub fn retry_after(&self) -> Option<Duration> {
        (self.retry_after != NO_RETRY_AFTER).then(|| Duration::from_nanos(self.retry_after))
    }

    /// The breaker's name (empty if it has none).
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn describe(&self) -> String {
        let who = if self.name.is_empty() {
            "circuit breaker".to_string()
        } else {
            format!("circuit breaker `{}`", self.name)
        };
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
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_is_a_plain_value() {
        let r = Rejected::from_nanos(RejectReason::Open, 5_000_000, "db");
        let copy = r;
        assert_eq!(r, copy);
        assert_eq!(
            (r.name(), r.reason(), r.retry_after()),
            ("db", RejectReason::Open, Some(Duration::from_millis(5)))
        );
        assert_eq!(
            r.to_string(),
            "circuit breaker `db` is open; a probe may be admitted in 5ms"
        );
        assert!(!std::mem::needs_drop::<Rejected>());
        let none = Rejected::from_nanos(RejectReason::ForcedOpen, NO_RETRY_AFTER, "");
        assert_eq!(
            (none.retry_after(), none.to_string()),
            (None, "circuit breaker was forced open".to_string())
        );
    }
}
