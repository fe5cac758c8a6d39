//! State-change events and listeners.

use super::state::State;
use super::window::WindowCounts;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransitionReason {
    /// `consecutive_failures` failures in a row while closed.
    ConsecutiveFailures,
    /// The failure rate of the window reached its threshold.
    FailureRate,
    /// The slow-call rate of the window reached its threshold.
    SlowCallRate,
    /// The cooldown ended and a call arrived: it was admitted as the first probe.
    CooldownElapsed,
    /// A probe failed: the breaker re-opened with a fresh cooldown.
    ProbeFailed,
    /// Enough probes succeeded: the breaker closed.
    ProbesSucceeded,
    /// Not produced any more (kept so code matching on it still builds). It marked a new
    /// half-open period started because every probe slot was held longer than
    /// `max_probe_wait`; such a takeover now admits one more probe in the *same* period, with no
    /// transition, so the held probes' late results still count (a `tracing` debug event, target
    /// `breaker`, reports it).
    ProbeExpired,
    /// `force_open`, `force_closed` or `reset` was called.
    Manual,
}

impl TransitionReason {
    /// Every reason, in declaration order (for example to read a reason back from its
    /// [`as_str`](Self::as_str) name in a log or a metric label).
    pub const ALL: [TransitionReason; 8] = [
        TransitionReason::ConsecutiveFailures,
        TransitionReason::FailureRate,
        TransitionReason::SlowCallRate,
        TransitionReason::CooldownElapsed,
        TransitionReason::ProbeFailed,
        TransitionReason::ProbesSucceeded,
        TransitionReason::ProbeExpired,
        TransitionReason::Manual,
    ];

    /// A lowercase, snake_case name for logs and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransitionReason::ConsecutiveFailures => "consecutive_failures",
            TransitionReason::FailureRate => "failure_rate",
            TransitionReason::SlowCallRate => "slow_call_rate",
            TransitionReason::CooldownElapsed => "cooldown_elapsed",
            TransitionReason::ProbeFailed => "probe_failed",
            TransitionReason::ProbesSucceeded => "probes_succeeded",
            TransitionReason::ProbeExpired => "probe_expired",
            TransitionReason::Manual => "manual",
        }
    }
}

impl fmt::Display for TransitionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change of one breaker, as given to listeners.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The breaker's name (empty if none was given).
    pub name: Arc<str>,
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// Why.
    pub reason: TransitionReason,
    /// The breaker clock's reading at the transition.
    pub at: Duration,
    /// The generation entered (it counts transitions, wrapping at 2^24).
    pub generation: u32,
    /// The window's totals that caused a rate trip (zero otherwise).
    pub window: WindowCounts,
    /// Consecutive failures that caused a trip (zero otherwise).
    pub consecutive_failures: u32,
    /// When entering open: how long until a probe may be admitted.
    pub cooldown: Option<Duration>,
    /// Who decided the transition when it was not this process: the id of the replica whose
    /// decision was applied from shared state. `None` for a transition decided here.
    pub origin: Option<Arc<str>>,
}

/// A state-change listener. Listeners run synchronously on the thread that made the transition,
/// after the transition, with no lock held; exactly once per transition. Listeners of
/// transitions made by different threads may run in either order: order them by
/// [`Transition::generation`].
pub type Listener = Arc<dyn Fn(&Transition) + Send + Sync>;

/// What caused a transition beyond its reason: the counts that tripped it, and for a
/// transition decided elsewhere, its deadline and who decided it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cause {
    /// The window's totals that caused a rate trip.
    pub(crate) window: WindowCounts,
    /// The consecutive failures that caused a trip.
    pub(crate) consecutive_failures: u32,
    /// An open state's deadline (nanoseconds on this breaker's clock) decided elsewhere;
    /// `None`: from the policy, here.
    pub(crate) open_until: Option<u64>,
    /// Who decided the transition, if not this process (a replica id).
    pub(crate) origin: Option<Arc<str>>,
}
