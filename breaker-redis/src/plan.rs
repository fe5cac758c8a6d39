//! The fleet's decisions: pure functions over the store's word, this replica's view of it and
//! its local breaker. A leaf: it imports nothing of this crate, so the store's coordinator, the
//! fleet hook and a model checker use it without importing each other. No I/O, no clock, no lock: the coordinator applies each [`Write`] with the
//! store's fenced compare-and-set (`protocol`), and a model checker can drive them as they are.
//!
//! Every breaker rule comes from the core's deciders (`breaker_core::breaker::decide`): the
//! promotion out of open ([`admit_open`](decide::admit_open)), probe ends
//! ([`end_probe`](decide::end_probe)), trips ([`trip`](decide::trip)), the rate rules
//! ([`rate_trip`](decide::rate_trip)), manual changes ([`force`](decide::force)) and the
//! cooldown ([`cooldown`](decide::cooldown), which the caller draws and passes in as
//! `cooldown_ms`). What is the fleet's own is *which* word to decide on and what to do when
//! the store and the replicas disagree: [`reconcile`].
//!
//! # Reconciliation
//! A store can lose what it held: restarted without persistence, `FLUSHALL`, keys evicted, a
//! failover to a replica that had not caught up. It is detected per breaker at every reply (the
//! word is missing while this replica knew it, or older than its view) and for the whole
//! namespace when its epoch changes; and after every degraded period every breaker is read
//! again. Then [`reconcile`] decides from the store's word, the view, and the local breaker *as
//! it is now* (never from an old view: the replicas may have recovered on their own while the
//! store was away):
//!
//! | the store | the local breaker | action |
//! |---|---|---|
//! | lost the breaker (missing while this replica knew it, or older than the view) | any | **seed** it from the local state, one generation past the view: closed -> closed; open -> open for the rest of the local cooldown; half-open -> open until now (the next probe promotes it); forced -> forced. The first replica's seed wins, the others adopt it. |
//! | half-open, or open past its deadline, the view's generation or newer | moved on its own: closed (its own probes succeeded, while the store was away or with a reply lost) | **close** it (this replica's probes were the evidence) |
//! | newer than the view | any other | **adopt** it (an open store whose deadline is ahead, too) |
//! | the view's generation, after a fault | moved on its own: open or half-open, the store closed | **send the trip** it missed (a vote under quorum) |
//! | the view's generation, after a fault | moved on its own: half-open, the store open past its deadline | keep (the local breaker is only ahead: its probe asks for a lease) |
//! | otherwise | | adopt (nothing to do when they agree) |
//!
//! A local breaker *moved on its own* when it made transitions by its own rules since the
//! fleet last told it anything; a look that finds it where the store is ends that
//! (`Core::adopt` takes the local generation as told). The **close** row applies at every look
//! while it has moved, not only at the first look after a fault: reconciled at that one look
//! only, local probes that closed every replica after it left the store open with its deadline
//! long past, every replica's counts dropped, until the key expired (model finding F4). The
//! trip row stays with the look after a fault: under `quorum(k)` a replica open alone beside
//! a closed fleet is the rule working, and its trip was sent when it happened.

use breaker_core::breaker::decide::{self, newer, Admit, Limits, ProbeEnd, Step, Word};
use breaker_core::breaker::{BreakerPolicy, State, TransitionReason, WindowCounts};

/// What this replica knows of a breaker's word in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// The word (its probes in flight as of the last reply).
    pub(crate) word: Word,
    /// Open: the deadline, server ms (0: none).
    pub(crate) deadline_ms: u64,
    /// Whether a reply has shown the store holding a word for it.
    pub(crate) known: bool,
    /// The store's time (ms) of the newest answer this view was taken from: an answer no
    /// newer than that (a push or a reply that arrived after a newer one) cannot tell that the
    /// store lost the breaker.
    pub(crate) seen_ms: u64,
}

impl View {
    /// A breaker never seen in the store: closed, generation 0.
    pub(crate) const INITIAL: View = View {
        word: Word {
            state: State::Closed,
            successes: 0,
            in_flight: 0,
            streak: 0,
            generation: 0,
        },
        deadline_ms: 0,
        known: false,
        seen_ms: 0,
    };

    /// The word a write expects the store to hold: `None` for a breaker the store has never
    /// been seen holding (its first write creates it).
    pub(crate) fn expect(&self) -> Option<Word> {
        self.known.then_some(self.word)
    }
}

/// The local breaker as it is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalNow {
    /// Its state.
    pub(crate) state: State,
    /// Its open streak.
    pub(crate) streak: u32,
    /// Open: the rest of its cooldown, ms.
    pub(crate) cooldown_left_ms: u64,
    /// Whether it made transitions of its own since the fleet last told it anything (it
    /// tripped, recovered or promoted by its own rules).
    pub(crate) moved: bool,
    /// The reason of its last trip (a trip the store missed is sent with it).
    pub(crate) trip_reason: TransitionReason,
}

/// A compare-and-set to make: `next` in place of `expect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Write {
    /// The word decided on (`None`: the store holds none).
    pub(crate) expect: Option<Word>,
    /// The word decided.
    pub(crate) next: Word,
    /// Why (for a transition).
    pub(crate) reason: TransitionReason,
    /// `next` is open: its cooldown, ms, from the store's now.
    pub(crate) cooldown_ms: Option<u64>,
}

/// What [`reconcile`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reconcile {
    /// Take the store's word as the view, and apply it to the local breaker where its state
    /// differs.
    Adopt,
    /// Take the store's word as the view; nothing to apply.
    Keep,
    /// Write this, then adopt what the store answers.
    Write(Write),
    /// Send the local trip the store missed (a trip, or a vote under quorum).
    Trip,
    /// Nothing: the answer is older than the view (it arrived out of order), so its missing or
    /// older word tells nothing.
    Ignore,
}

/// Decides what to do with the store's answer `store` (`None`: it holds no word), given at the
/// store's time `at_ms`, for a breaker of view `view` and local breaker `local`;
/// `after_fault`: the first look after a store fault (a degraded period ended, the namespace's
/// epoch changed). `passed`: whether the store's open deadline has passed at `at_ms`. Only an
/// answer newer than the view (`at_ms > view.seen_ms`) can show a loss: answers and pushes may
/// be handled out of order. A local breaker closed by its own probes (`local.moved`) closes a
/// store done probing at every look, not only the first after a fault. See the
/// [module docs](self).
pub(crate) fn reconcile(
    store: Option<&Word>,
    at_ms: u64,
    passed: bool,
    view: &View,
    local: &LocalNow,
    after_fault: bool,
) -> Reconcile {
    let fresh = at_ms > view.seen_ms;
    let Some(store) = store else {
        if !view.known && view.word.generation == 0 {
            // Never seen in the store: nothing was lost. Its first write (a flush, a trip, a
            // vote, a lease request) creates it; a local trip the store missed during a fault
            // is sent as one (a trip, or a vote under quorum), never as a seed.
            let tripped = matches!(local.state, State::Open | State::HalfOpen);
            return if after_fault && local.moved && tripped {
                Reconcile::Trip
            } else {
                Reconcile::Keep
            };
        }
        if !fresh {
            return Reconcile::Ignore;
        }
        return Reconcile::Write(seed(None, view, local));
    };
    if newer(view.word.generation, store.generation) {
        if !fresh {
            return Reconcile::Ignore;
        }
        return Reconcile::Write(seed(Some(*store), view, local));
    }
    // Closed by its own probes (while the store was away, or with a reply lost): that is the
    // evidence the half-open question asks for, at every look while the local breaker has
    // moved, not only at the look after a fault (model finding F4: local probes that closed
    // every replica after that look left the store open, their counts dropped, until the key
    // expired), and whatever the store's generation (a lease request whose reply was lost
    // made a newer half-open period). An open store whose deadline is ahead is adopted.
    let done_probing = store.state == State::HalfOpen || (store.state == State::Open && passed);
    if local.moved && local.state == State::Closed && done_probing {
        let f = decide::force(
            *store,
            State::Closed,
            TransitionReason::ProbesSucceeded,
            Some(0),
        );
        return Reconcile::Write(Write {
            expect: Some(*store),
            next: f.next,
            reason: f.reason,
            cooldown_ms: None,
        });
    }
    if newer(store.generation, view.word.generation) {
        return Reconcile::Adopt;
    }
    if after_fault && local.moved && local.state != store.state {
        if matches!(local.state, State::Open | State::HalfOpen) && store.state == State::Closed {
            return Reconcile::Trip;
        }
        if local.state == State::HalfOpen && store.state == State::Open && passed {
            // The local breaker is only ahead: its probe asks for a lease.
            return Reconcile::Keep;
        }
        return Reconcile::Adopt;
    }
    if after_fault || store.state != view.word.state {
        // After a fault the local breaker may have been left elsewhere (a store-error mode
        // moved it): the store's word is applied where the local state differs.
        Reconcile::Adopt
    } else {
        Reconcile::Keep
    }
}

/// The seed of a breaker the store lost: the local breaker's state now, one generation past
/// the view.
fn seed(expect: Option<Word>, view: &View, local: &LocalNow) -> Write {
    let (to, cooldown_ms) = match local.state {
        State::Closed => (State::Closed, None),
        State::Open => (State::Open, Some(local.cooldown_left_ms)),
        // The next probe promotes it.
        State::HalfOpen => (State::Open, Some(0)),
        forced => (forced, None),
    };
    let streak = match to {
        State::Open => local.streak.max(1),
        _ => 0,
    };
    let f = decide::force(view.word, to, TransitionReason::Manual, Some(streak));
    Write {
        expect,
        next: f.next,
        reason: f.reason,
        cooldown_ms,
    }
}

/// A lease request: the compare-and-set that asks for `want` leases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ask {
    /// The write (the promotion out of open, or the half-open word unchanged).
    pub(crate) write: Write,
    /// Applies only once the store's clock is at least this (server ms; 0: now).
    pub(crate) not_before: u64,
    /// Whether a store that already holds `next` (another replica promoted it first) is
    /// joined.
    pub(crate) join: bool,
    /// Leases wanted.
    pub(crate) want: u32,
}

/// What a replica whose local breaker granted a probe slot asks the store: a promotion out
/// of open (the core's [`admit_open`](decide::admit_open), applied once the store's clock has
/// passed the deadline, joined when another replica made the same promotion first) with
/// leases, or leases of the half-open period in force (the store grants what the semaphore
/// allows). `None`: the fleet is closed or forced, no probe to lease.
pub(crate) fn plan_acquire(view: &View, want: u32) -> Option<Ask> {
    match view.word.state {
        State::Open => {
            let dl = view.deadline_ms;
            let Admit::Probe {
                next,
                entered: Some(reason),
            } = decide::admit_open(view.word, dl, dl)
            else {
                unreachable!("an open word promotes at its deadline")
            };
            Some(Ask {
                write: Write {
                    expect: view.expect(),
                    next,
                    reason,
                    cooldown_ms: None,
                },
                not_before: dl,
                join: true,
                want,
            })
        }
        State::HalfOpen => Some(Ask {
            write: Write {
                expect: view.expect(),
                next: view.word,
                reason: TransitionReason::CooldownElapsed,
                cooldown_ms: None,
            },
            not_before: 0,
            join: false,
            want,
        }),
        _ => None,
    }
}

/// The half-open limits the fleet's probe ends read.
pub(crate) fn limits(policy: &BreakerPolicy) -> Limits {
    Limits {
        half_open_probes: policy.half_open_probes,
        successes_to_close: policy.successes_to_close,
        probe_wait: 0,
    }
}

/// A leased probe of `generation` ended with `end`, decided on the store's word `w` (the
/// core's [`end_probe`](decide::end_probe)): the write, or `None` when the probe belongs to an
/// earlier period. `cooldown_ms` gives the cooldown of an opening of a streak.
pub(crate) fn plan_end(
    w: Word,
    generation: u32,
    end: ProbeEnd,
    policy: &BreakerPolicy,
    cooldown_ms: impl Fn(u32) -> u64,
) -> Option<Write> {
    step_write(
        w,
        decide::end_probe(w, generation, end, &limits(policy)),
        &cooldown_ms,
    )
}

/// A trip of closed `w`'s period for `reason` (the core's [`trip`](decide::trip)); `None` when
/// `w` is not closed.
pub(crate) fn plan_trip(
    w: Word,
    reason: TransitionReason,
    cooldown_ms: impl Fn(u32) -> u64,
) -> Option<Write> {
    step_write(w, decide::trip(w, w.generation, reason), &cooldown_ms)
}

/// A trip that lost its compare-and-set to the word `won`, decided again (the core's
/// [`trip`](decide::trip)) on that word: when `won` is still the closed period the trip was
/// decided in (a write that made no transition won: another replica's first flush created the
/// breaker, a vote or a flush of the same period), the trip applies to it; a trip of a period
/// that has ended is late (`None`). The period is the generation `lost` expected, 0 for a view
/// that never knew the store's word (a breaker's first word is closed generation 0).
pub(crate) fn plan_retrip(
    lost: &Write,
    won: Word,
    cooldown_ms: impl Fn(u32) -> u64,
) -> Option<Write> {
    let period = lost.expect.map_or(0, |e| e.generation);
    step_write(won, decide::trip(won, period, lost.reason), &cooldown_ms)
}

/// The rate rules on the fleet window's totals of closed `w` (the core's
/// [`rate_trip`](decide::rate_trip)): the trip, if one fires.
pub(crate) fn plan_rate(
    w: Word,
    totals: WindowCounts,
    policy: &BreakerPolicy,
    cooldown_ms: impl Fn(u32) -> u64,
) -> Option<Write> {
    let reason = decide::rate_trip(policy, totals)?;
    plan_trip(w, reason, cooldown_ms)
}

/// A manual change of `w` to `to` (the core's [`force`](decide::force)): always a write.
pub(crate) fn plan_force(w: Option<Word>, to: State, cooldown_ms: impl Fn(u32) -> u64) -> Write {
    let f = decide::force(
        w.unwrap_or(View::INITIAL.word),
        to,
        TransitionReason::Manual,
        None,
    );
    Write {
        expect: w,
        next: f.next,
        reason: f.reason,
        cooldown_ms: (to == State::Open).then(|| cooldown_ms(f.next.streak)),
    }
}

fn step_write(w: Word, step: Step, cooldown_ms: &impl Fn(u32) -> u64) -> Option<Write> {
    let (next, reason) = match step {
        Step::Stale => return None,
        Step::Update(next) => (next, TransitionReason::ProbesSucceeded),
        Step::Enter(next, reason) => (next, reason),
    };
    Some(Write {
        expect: Some(w),
        next,
        reason,
        cooldown_ms: (next.state == State::Open && next.generation != w.generation)
            .then(|| cooldown_ms(next.streak)),
    })
}

#[cfg(test)]
mod tests;
