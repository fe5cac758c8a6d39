//! The limits enclosing a point of a pipeline call, packed in one word.
//!
//! Every layer of a call copies its context and reads it right after it was written. A value
//! written in pieces (an instant's seconds, its nanoseconds, a tag, a flag) and then copied
//! whole defeats the CPU's store forwarding, and on the success path those stalls cost more
//! than the layers' own work: so a context is one `u64`, written and read with single moves.
//!
//! An instant is stored as a *mark*: nanoseconds from a process-wide epoch (the first instant
//! this module saw), biased by 2^61 so that instants up to about 73 years either side of the
//! epoch fit in 62 bits. Marks order exactly as the instants they stand for, ties included.
//! A limit later than the range can hold is no limit.

use crate::timeout::TimeoutKind;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant;

/// The bias of a mark: the epoch's own mark.
const BIAS: u64 = 1 << 61;
/// Marks are below this; the field's all-ones value means "no limit".
const END: u64 = (1 << 62) - 1;

const LAZY: u64 = 0b01;
const DEADLINE: u64 = 0b10;
/// The context of a call outside every limit.
const NONE: u64 = END << 2;

fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// The mark of `at`, or `None` if it is past the range a mark can hold.
fn mark(at: Instant) -> Option<u64> {
    let (at, epoch) = (at.into_std(), epoch());
    let m = match at.checked_duration_since(epoch) {
        Some(after) => u64::try_from(after.as_nanos())
            .ok()
            .and_then(|n| n.checked_add(BIAS)),
        // An instant before the epoch: a paused tokio clock lags the real one.
        None => u64::try_from((epoch - at).as_nanos())
            .ok()
            .and_then(|n| BIAS.checked_sub(n)),
    };
    m.filter(|&m| m < END)
}

/// The instant of mark `m`.
fn instant(m: u64) -> Instant {
    let epoch = epoch();
    let at = if m >= BIAS {
        epoch + Duration::from_nanos(m - BIAS)
    } else {
        epoch - Duration::from_nanos(BIAS - m)
    };
    Instant::from_std(at)
}

/// The earliest limit enclosing a point of the pipeline. Its length is the pipeline's timeout
/// or deadline, by `kind` (see `Pipeline::elapsed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limit {
    pub(super) at: Instant,
    pub(super) kind: TimeoutKind,
}

/// The limits enclosing a point of the pipeline: the earliest limit whose instant is known
/// (bits 2..64, all ones for none), its kind (bit 1) and whether the timeout layer's limit is
/// lazy (bit 0).
///
/// A *lazy* limit encloses nothing but one attempt and is not yet anchored to an instant. The
/// clock is read only when something needs the instant (the attempt's first `Pending`, a
/// bulkhead wait), so an attempt that completes in its first poll reads no clock at all. The
/// time that first poll takes is not counted against the limit: a future cannot be stopped
/// inside a poll anyway.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Ctx(u64);

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx(NONE)
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("limit", &self.limit())
            .field("lazy", &self.is_lazy())
            .finish()
    }
}

impl Ctx {
    /// The earliest limit whose instant is known.
    #[inline]
    pub(super) fn limit(self) -> Option<Limit> {
        let m = self.0 >> 2;
        (m != END).then(|| Limit {
            at: instant(m),
            kind: if self.0 & DEADLINE != 0 {
                TimeoutKind::Deadline
            } else {
                TimeoutKind::Attempt
            },
        })
    }

    /// Whether the timeout layer's limit is lazy (see the type's docs).
    #[inline]
    pub(super) fn is_lazy(self) -> bool {
        self.0 & LAZY != 0
    }

    /// This context with a lazy limit.
    #[inline]
    pub(super) fn lazy(self) -> Ctx {
        Ctx(self.0 | LAZY)
    }

    /// This context with a limit of `length` from now, if it ends before the current one.
    /// Ties go to the current (outer) limit.
    #[inline]
    pub(super) fn tighten(self, length: Duration, kind: TimeoutKind) -> Ctx {
        let Some(m) = Instant::now().checked_add(length).and_then(mark) else {
            return self;
        };
        if m >= self.0 >> 2 {
            return self;
        }
        let kind = match kind {
            TimeoutKind::Attempt => 0,
            TimeoutKind::Deadline => DEADLINE,
        };
        Ctx(m << 2 | kind | self.0 & LAZY)
    }

    /// This context with its lazy limit (the timeout layer's, if any) anchored at the current
    /// instant. The lazy limit is always the innermost one, so ties go to the known limit.
    #[inline]
    pub(super) fn anchor(self, timeout: Option<Duration>) -> Ctx {
        match (self.is_lazy(), timeout) {
            (true, Some(t)) => Ctx(self.0 & !LAZY).tighten(t, TimeoutKind::Attempt),
            _ => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_keep_order() {
        let now = Instant::now();
        let epoch = Instant::from_std(epoch());
        let instants = [
            epoch,
            now,
            now + Duration::from_nanos(1),
            now + Duration::from_secs(3600),
            epoch - Duration::from_nanos(1),
            epoch.checked_sub(Duration::from_secs(1)).unwrap_or(epoch),
            epoch + Duration::from_secs(60 * 60 * 24 * 365 * 50),
        ];
        for a in instants {
            assert_eq!(instant(mark(a).unwrap()), a);
            for b in instants {
                assert_eq!(mark(a).cmp(&mark(b)), a.cmp(&b), "{a:?} vs {b:?}");
            }
        }
        // Past the range: no mark.
        assert_eq!(
            mark(epoch + Duration::from_secs(60 * 60 * 24 * 365 * 80)),
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tighten_keeps_the_earliest_limit_and_gives_ties_to_the_outer_one() {
        let now = Instant::now();
        let outer = Ctx::default().tighten(Duration::from_secs(5), TimeoutKind::Deadline);
        let deadline = Limit {
            at: now + Duration::from_secs(5),
            kind: TimeoutKind::Deadline,
        };
        assert_eq!(outer.limit(), Some(deadline));
        // Later or equal: the outer limit stays.
        assert_eq!(
            outer.tighten(Duration::from_secs(9), TimeoutKind::Attempt),
            outer
        );
        assert_eq!(
            outer.tighten(Duration::from_secs(5), TimeoutKind::Attempt),
            outer
        );
        // Earlier: it replaces the outer one.
        let inner = outer.tighten(Duration::from_secs(2), TimeoutKind::Attempt);
        assert_eq!(
            inner.limit(),
            Some(Limit {
                at: now + Duration::from_secs(2),
                kind: TimeoutKind::Attempt
            })
        );
        // No limit at all, and a limit too far away to hold.
        assert_eq!(Ctx::default().limit(), None);
        assert_eq!(
            Ctx::default().tighten(Duration::MAX, TimeoutKind::Attempt),
            Ctx::default()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lazy_limit_is_anchored_when_asked_and_not_before() {
        let ctx = Ctx::default().lazy();
        assert!(ctx.is_lazy());
        assert_eq!(ctx.limit(), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        let anchored = ctx.anchor(Some(Duration::from_millis(300)));
        assert!(!anchored.is_lazy());
        assert_eq!(
            anchored.limit(),
            Some(Limit {
                at: Instant::now() + Duration::from_millis(300),
                kind: TimeoutKind::Attempt
            })
        );
        // Without a timeout, nothing to anchor.
        assert_eq!(ctx.anchor(None), ctx);
    }
}
