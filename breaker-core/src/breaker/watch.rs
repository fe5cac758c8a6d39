//! Process-wide transition watchers: every breaker's transitions, whoever built it.
//!
//! # Why
//! A breaker's [listeners](super::Listener) are fixed when it is built, by whoever builds it.
//! An observer that arrives later and did not build the breakers it shows (a status page, an
//! event stream) would otherwise have to poll each breaker's state, and two transitions between
//! two polls look like one, or like none. A watcher is told of every transition of every
//! breaker of the process, as it happens, with the same [`Transition`] a listener gets.
//!
//! # Cost
//! Nothing on a call's path: a transition reads one relaxed atomic to learn whether any
//! watcher is registered, and with one registered, takes a read lock and calls each watcher on
//! the thread that made the transition. Keep a watcher short (push into a bounded queue) and
//! never call the breaker from it.

use super::event::Transition;
use super::CircuitBreaker;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// The identity of one breaker: equal for a breaker and its clones, different for two
/// breakers (even of one name, or of one factory). Valid while the breaker lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BreakerId(pub(crate) usize);

impl CircuitBreaker {
    /// This breaker's identity, as [`watch_transitions`] reports it.
    pub fn id(&self) -> BreakerId {
        BreakerId(self.inner.id())
    }
}

/// A watcher: the breaker's identity, its key (`""` unless made by
/// [`BreakerFactory::create_keyed`](super::BreakerFactory::create_keyed)) and the transition.
type Watcher = Arc<dyn Fn(BreakerId, &str, &Transition) + Send + Sync>;

static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicU64 = AtomicU64::new(0);
static WATCHERS: RwLock<Vec<(u64, Watcher)>> = RwLock::new(Vec::new());

/// Registers `watcher` for every transition of every breaker of the process, from now until
/// the returned [`Watch`] is dropped. It is called once per transition, on the thread that
/// made it, after the breaker's own listeners, with no breaker lock held; watchers of
/// transitions made by different threads may run in either order (order them by
/// [`Transition::generation`]).
///
/// For an observer that did not build the breakers it shows (a status page, an event stream):
/// it is told of each transition as it happens, where reading states at intervals would merge
/// two transitions into one, or miss one. It costs a call nothing, and a transition one
/// relaxed load while no watcher is registered; with one, a read lock and the watchers' calls
/// on the transitioning thread, so keep a watcher short (push into a bounded queue) and never
/// call the breaker from it.
pub fn watch_transitions(
    watcher: impl Fn(BreakerId, &str, &Transition) + Send + Sync + 'static,
) -> Watch {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut all = WATCHERS.write().unwrap_or_else(|e| e.into_inner());
    all.push((id, Arc::new(watcher)));
    ACTIVE.store(all.len(), Ordering::Release);
    Watch { id }
}

/// A registered watcher; dropping it unregisters the watcher.
#[derive(Debug)]
#[must_use = "dropping a `Watch` unregisters its watcher at once"]
pub struct Watch {
    id: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut all = WATCHERS.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|(id, _)| *id != self.id);
        ACTIVE.store(all.len(), Ordering::Release);
    }
}

/// Whether any watcher is registered (one relaxed load).
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// Tells every watcher of `t`.
pub(crate) fn notify(id: usize, key: &str, t: &Transition) {
    let all: Vec<Watcher> = {
        let all = WATCHERS.read().unwrap_or_else(|e| e.into_inner());
        all.iter().map(|(_, w)| Arc::clone(w)).collect()
    };
    for w in all {
        w(BreakerId(id), key, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::{BreakerPolicy, State, TransitionReason};
    use crate::clock::{Clock, ManualClock};
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn a_watcher_sees_every_transition_of_a_breaker_it_did_not_build() {
        let time = ManualClock::new();
        let b = CircuitBreaker::builder(BreakerPolicy {
            consecutive_failures: Some(1),
            cooldown: Duration::from_secs(1),
            cooldown_max: Duration::from_secs(1),
            ..BreakerPolicy::default()
        })
        .name("watched")
        .clock(Clock::manual(&time))
        .build()
        .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let me = b.id();
        let watch = watch_transitions(move |id, key, t| {
            if id == me {
                assert_eq!(key, "");
                sink.lock().unwrap().push((t.from, t.to, t.reason));
            }
        });
        assert_eq!(b.clone().id(), me, "clones share an identity");
        b.try_acquire().unwrap().failure();
        time.advance(Duration::from_secs(1));
        b.try_acquire().unwrap().success();
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (
                    State::Closed,
                    State::Open,
                    TransitionReason::ConsecutiveFailures
                ),
                (
                    State::Open,
                    State::HalfOpen,
                    TransitionReason::CooldownElapsed
                ),
                (
                    State::HalfOpen,
                    State::Closed,
                    TransitionReason::ProbesSucceeded
                ),
            ]
        );
        drop(watch);
        b.force_open();
        assert_eq!(seen.lock().unwrap().len(), 3, "dropped: no longer told");
    }
}
