//! The sliding window's stores: where a closed breaker records its calls for the rate rules,
//! and how a reload that changes the window's shape replaces the store (the closed state's
//! rules and trips are `machine/closed.rs`).
//!
//! # Window stores and reloads
//! A breaker keeps its window in a [`WindowStore`] of one shape: a lock-free count window (the
//! last `n` calls have one global order; `ring.rs`), or a lock-free time window striped per
//! thread (`striped.rs`). A reload (`BreakerFactory::set_policy`) that changes the shape bumps
//! the factory's *window epoch*; each breaker notices at its next
//! recorded outcome that its store was built for an older epoch and puts a new, empty store of
//! the new shape in its [`WindowSlot`]. The check is one relaxed load of the epoch on the
//! recording path, and only a breaker that has been reshaped pays an `ArcSwap` load per
//! recorded outcome from then on.
//!
//! # The time window's clock
//! A time window picks its buckets with the breaker's coarse clock where it has one (the
//! system clock on Linux: `CLOCK_MONOTONIC_COARSE`, a tick of a few milliseconds; see
//! [`Clock`](crate::clock::Clock)), else with the precise clock, for its whole life: its bucket
//! indices are only ever compared with readings of that one clock ([`window_now`]). A coarse
//! reading lags the true time by at most one tick, so a bucket edge moves later by at most one
//! tick, the same for every call and for [`Snapshot`](super::Snapshot)'s counts. What needs
//! true durations reads the precise clock: the slow-call rule (a call's start and end both
//! precise) and a trip's entry stamps and cooldown deadline (the trip reads the clock itself).

use super::policy::SlidingWindow;
use super::ring::{CountWindow, Recorded};
use super::shared::Shared;
use super::striped::StripedTimeWindow;
use super::totals;
use super::window::WindowCounts;
use crate::clock::Clock;
use arc_swap::ArcSwap;
use std::sync::{Arc, OnceLock};

/// What recording one closed call's outcome in a window found.
pub(crate) enum Record {
    /// The window's totals, for the rate rules, and the precise reading taken for them, if
    /// one was (a trip reads one otherwise).
    Evaluate(WindowCounts, Option<u64>),
    /// No rule's verdict can have changed (see `striped.rs` and `ring.rs`).
    Skip,
    /// An outcome of an earlier closed period, which the window did not take.
    Late,
}

/// A sliding window of one shape, built for one window epoch.
pub(crate) struct WindowStore {
    epoch: u32,
    kind: StoreKind,
}

enum StoreKind {
    /// A count window: lock-free, its data tagged with the closed-state generation.
    Count(CountWindow),
    /// A time window: lock-free, striped per thread.
    Time(StripedTimeWindow),
}

impl WindowStore {
    /// A store of `shape` for window `epoch`, empty, for closed `generation` onwards.
    fn new(shape: SlidingWindow, epoch: u32, generation: u32) -> WindowStore {
        let kind = match shape {
            SlidingWindow::Count(n) => StoreKind::Count(CountWindow::new(n, generation)),
            SlidingWindow::Time { length, buckets } => {
                let buckets = buckets.max(1);
                StoreKind::Time(StripedTimeWindow::new(
                    (length.as_nanos() / u128::from(buckets)) as u64,
                    buckets,
                    totals::stripe_count(),
                ))
            }
        };
        WindowStore { epoch, kind }
    }

    fn heap_bytes(&self) -> usize {
        match &self.kind {
            StoreKind::Count(w) => w.heap_bytes(),
            StoreKind::Time(w) => w.heap_bytes(),
        }
    }

    fn counts(&self, generation: u32, now: u64) -> WindowCounts {
        match &self.kind {
            StoreKind::Count(w) => w.counts(generation),
            StoreKind::Time(s) => s.counts(generation, now),
        }
    }
}

impl WindowStore {
    /// Records one closed call's outcome in this store. A time window reads its clock for its
    /// bucket ([`window_now`]) and the precise clock under a slow-call rule; a count window
    /// reads the precise clock only under a slow-call rule (a ticket has a start only then).
    #[inline(always)]
    fn record(
        &self,
        shared: &Shared,
        generation: u32,
        start: Option<u64>,
        failure: bool,
    ) -> Record {
        match &self.kind {
            StoreKind::Time(w) => {
                let clock = &shared.clock;
                // `precise`: a precise reading, if one was taken.
                let (now, mut precise) = match clock.coarse() {
                    Some(c) => (c.now, None),
                    None => {
                        let now = clock.now_nanos();
                        (now, Some(now))
                    }
                };
                if start.is_some() && precise.is_none() {
                    precise = Some(clock.now_nanos());
                }
                let slow = precise.is_some_and(|p| shared.is_slow(start, p));
                let min_calls = shared.hot.min_calls();
                match w.record(generation, now, failure, slow, min_calls) {
                    Some(counts) => Record::Evaluate(counts, precise),
                    None => Record::Skip,
                }
            }
            StoreKind::Count(w) => {
                let now = start.map(|_| shared.clock.now_nanos());
                let slow = now.is_some_and(|now| shared.is_slow(start, now));
                match w.record_outcome(generation, failure, slow) {
                    Recorded::Counts(counts) => Record::Evaluate(counts, now),
                    Recorded::Healthy => Record::Skip,
                    Recorded::Late => Record::Late,
                }
            }
        }
    }
}

/// [`StripedTimeWindow::record_steady_success`] at [`window_now`], out of line: the closed
/// path that calls it (shared with the count window's inline check) stays small, and this one
/// is compiled whole, the clock read and the thread's stripe lookup inlined.
#[inline(never)]
fn steady_time_success(w: &StripedTimeWindow, clock: &Clock, generation: u32) -> bool {
    w.record_steady_success(generation, window_now(clock))
}

/// The window store in force: the first one, borrowed, or one that replaced it.
enum StoreRef<'a> {
    First(&'a WindowStore),
    Reshaped(Arc<WindowStore>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = WindowStore;

    #[inline(always)]
    fn deref(&self) -> &WindowStore {
        match self {
            StoreRef::First(s) => s,
            StoreRef::Reshaped(s) => s,
        }
    }
}

/// Whether epoch `a` is `b` or newer (wrapping).
fn at_least(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// A reading for a time window's buckets: the coarse clock's where `clock` has one, else the
/// precise clock's (see the module docs). Nanoseconds, on that clock's own origin.
#[inline(always)]
pub(crate) fn window_now(clock: &Clock) -> u64 {
    match clock.coarse() {
        Some(c) => c.now,
        None => clock.now_nanos(),
    }
}

/// A breaker's window: the store built with the breaker, and the one that replaced it after a
/// reload changed the shape.
pub(crate) struct WindowSlot {
    first: WindowStore,
    /// Set at the first reshape. Not an `ArcSwapOption`: an empty one still costs its drop a
    /// walk of `arc_swap`'s debt list (about 400 instructions, more than the rest of creating
    /// and dropping a breaker with a window); an empty `OnceLock` costs nothing.
    reshaped: OnceLock<ArcSwap<WindowStore>>,
}

impl WindowSlot {
    pub(crate) fn new(shape: SlidingWindow, epoch: u32) -> WindowSlot {
        WindowSlot {
            first: WindowStore::new(shape, epoch, 0),
            reshaped: OnceLock::new(),
        }
    }

    /// The store of the shape in force, if it is the first one (the common case: no reload
    /// changed the shape since the breaker was made).
    #[inline(always)]
    fn first_in_force(&self, shared: &Shared) -> Option<&WindowStore> {
        (self.first.epoch == shared.hot.window_epoch_relaxed()).then_some(&self.first)
    }

    /// Whether a plain success (not slow) of closed `generation` needs nothing more, decided
    /// inline: the store in force is the first one and either a count window full of plain
    /// successes of that closed period (see [`CountWindow::is_healthy`]), or a time window in
    /// its steady state, which then has recorded the success (see
    /// [`StripedTimeWindow::record_steady_success`]).
    #[inline(always)]
    pub(super) fn plain_success_is_done(&self, shared: &Shared, generation: u32) -> bool {
        match self.first_in_force(shared) {
            Some(WindowStore {
                kind: StoreKind::Count(w),
                ..
            }) => w.is_healthy(generation),
            Some(WindowStore {
                kind: StoreKind::Time(w),
                ..
            }) => steady_time_success(w, &shared.clock, generation),
            None => false,
        }
    }

    /// The store of the shape in force after a reload changed it: made first (for closed
    /// `generation`) if none of that shape exists yet.
    #[cold]
    #[inline(never)]
    fn reshaped_store(&self, shared: &Shared, generation: u32) -> StoreRef<'_> {
        let epoch = shared.hot.window_epoch();
        if epoch == self.first.epoch {
            return StoreRef::First(&self.first);
        }
        loop {
            let Some(swap) = self.reshaped.get() else {
                // The first reshape: whoever sets the cell returns its store; the others go
                // round and check its epoch.
                let fresh = Self::fresh_store(shared, epoch, generation);
                let mut mine = false;
                self.reshaped.get_or_init(|| {
                    mine = true;
                    ArcSwap::new(Arc::clone(&fresh))
                });
                if mine {
                    return StoreRef::Reshaped(fresh);
                }
                continue;
            };
            let cur = swap.load();
            if at_least(cur.epoch, epoch) {
                return StoreRef::Reshaped(Arc::clone(&cur));
            }
            let fresh = Self::fresh_store(shared, epoch, generation);
            let prev = swap.compare_and_swap(&cur, Arc::clone(&fresh));
            if Arc::ptr_eq(&prev, &cur) {
                return StoreRef::Reshaped(fresh);
            }
        }
    }

    /// A new, empty store of the policy's shape, for window `epoch`.
    fn fresh_store(shared: &Shared, epoch: u32, generation: u32) -> Arc<WindowStore> {
        // Loaded after the epoch: this policy has the epoch's shape or a newer one.
        let shape = shared.policy.load().window;
        Arc::new(WindowStore::new(shape, epoch, generation))
    }

    /// Records one closed call's outcome (a failure or not) in the store in force: a call of
    /// closed `generation` that started at `start` (a precise reading, under a slow-call rule).
    #[inline(never)]
    pub(crate) fn record(
        &self,
        shared: &Shared,
        generation: u32,
        start: Option<u64>,
        failure: bool,
    ) -> Record {
        match self.first_in_force(shared) {
            Some(store) => store.record(shared, generation, start, failure),
            None => self.record_reshaped(shared, generation, start, failure),
        }
    }

    #[cold]
    #[inline(never)]
    fn record_reshaped(
        &self,
        shared: &Shared,
        generation: u32,
        start: Option<u64>,
        failure: bool,
    ) -> Record {
        self.reshaped_store(shared, generation)
            .record(shared, generation, start, failure)
    }

    /// The window's totals for closed `generation` now (zero if no outcome has been recorded
    /// since the shape last changed). A time window reads its own clock ([`window_now`]).
    pub(crate) fn counts(&self, shared: &Shared, generation: u32) -> WindowCounts {
        let now = window_now(&shared.clock);
        let epoch = shared.hot.window_epoch();
        if epoch == self.first.epoch {
            return self.first.counts(generation, now);
        }
        match self.reshaped.get().map(|swap| swap.load()) {
            Some(store) if at_least(store.epoch, epoch) => store.counts(generation, now),
            _ => WindowCounts::default(),
        }
    }

    /// Heap bytes of the window's stores.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.first.heap_bytes()
            + self.reshaped.get().map_or(0, |swap| {
                std::mem::size_of::<WindowStore>() + swap.load().heap_bytes()
            })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow, SlowCall, State};
    use crate::clock::{Clock, ManualClock};
    use std::sync::Arc;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    /// 50 % over 10 s in 10 buckets (min 4), 30 s cooldown, on a precise and a coarse manual
    /// clock; the coarse one starts 1,000 s "later" (its own origin).
    fn on_two_clocks(slow_call: Option<SlowCall>) -> (CircuitBreaker, ManualClock, ManualClock) {
        let (precise, coarse) = (ManualClock::new(), ManualClock::new());
        coarse.set(Duration::from_secs(1000));
        let clock =
            Clock::custom_with_coarse(Arc::new(precise.clone()), Arc::new(coarse.clone()), 4 * MS);
        let policy = BreakerPolicy {
            consecutive_failures: None,
            failure_rate_percent: Some(50.0),
            window: SlidingWindow::Time {
                length: Duration::from_secs(10),
                buckets: 10,
            },
            min_calls: 4,
            slow_call,
            cooldown: Duration::from_secs(30),
            cooldown_max: Duration::from_secs(30),
            ..BreakerPolicy::default()
        };
        let b = CircuitBreaker::builder(policy)
            .clock(clock)
            .build()
            .unwrap();
        (b, precise, coarse)
    }

    #[test]
    fn a_time_window_picks_buckets_with_the_coarse_clock() {
        let (b, precise, coarse) = on_two_clocks(None);
        b.try_acquire().unwrap().failure();
        for _ in 0..3 {
            b.try_acquire().unwrap().success();
        }
        // Ten seconds on the precise clock only: the window has not moved.
        precise.advance(Duration::from_secs(10));
        assert_eq!(b.snapshot().window.calls, 4);
        // Ten seconds on the coarse clock: the first bucket aged out.
        coarse.advance(Duration::from_secs(10));
        assert_eq!(b.snapshot().window.calls, 0);
        for _ in 0..2 {
            b.try_acquire().unwrap().success();
        }
        assert_eq!(b.snapshot().window.calls, 2);
    }

    #[test]
    fn a_trip_from_a_coarse_window_stamps_with_the_precise_clock() {
        let (b, precise, coarse) = on_two_clocks(None);
        precise.set(Duration::from_secs(5));
        for _ in 0..4 {
            b.try_acquire().unwrap().failure();
        }
        let s = b.snapshot();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.time_in_state, Duration::ZERO);
        // The deadline is 30 s after the precise reading (35 s), not after the coarse one.
        assert_eq!(s.retry_after, Some(Duration::from_secs(30)));
        precise.advance(Duration::from_secs(30) - MS);
        coarse.advance(Duration::from_secs(30) - MS);
        assert!(b.try_acquire().is_err(), "cooldown not over at 35 s - 1 ms");
        precise.advance(MS);
        coarse.advance(MS);
        assert!(b.try_acquire().is_ok(), "cooldown over at 35 s (precise)");
    }

    #[test]
    fn slow_calls_are_timed_with_the_precise_clock() {
        let (b, precise, coarse) = on_two_clocks(Some(SlowCall {
            duration: Duration::from_secs(1),
            rate_percent: 50.0,
        }));
        b.try_acquire().unwrap().success();
        // A second on the coarse clock only: not slow.
        let p = b.try_acquire().unwrap();
        coarse.advance(Duration::from_secs(1));
        p.success();
        assert_eq!(b.snapshot().window.slow, 0);
        // A second on the precise clock: slow (2 of 4 calls are slow: trips).
        let p = b.try_acquire().unwrap();
        let q = b.try_acquire().unwrap();
        precise.advance(Duration::from_secs(1));
        p.success();
        assert_eq!(b.snapshot().window.slow, 1);
        assert_eq!(b.state(), State::Closed, "3 calls: under the minimum");
        q.success(); // 2 of 4 calls slow: 50 %
        assert_eq!(b.state(), State::Open);
    }
}
