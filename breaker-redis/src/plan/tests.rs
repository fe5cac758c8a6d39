//! Unit tests of the fleet's decisions: the reconciliation table row by row, and the plans of
//! lease requests, probe ends, trips and manual changes (each the core's decider).

use super::*;

fn word(state: State, generation: u32, streak: u32) -> Word {
    Word {
        state,
        successes: 0,
        in_flight: 0,
        streak,
        generation,
    }
}

fn view(w: Word) -> View {
    View {
        word: w,
        deadline_ms: if w.state == State::Open { 1_000 } else { 0 },
        known: true,
        seen_ms: 5_000,
    }
}

/// An answer newer than every view of these tests.
const NOW: u64 = 6_000;

fn local(state: State, moved: bool) -> LocalNow {
    LocalNow {
        state,
        streak: u32::from(state != State::Closed) * 2,
        cooldown_left_ms: if state == State::Open { 7_000 } else { 0 },
        moved,
        trip_reason: TransitionReason::ConsecutiveFailures,
    }
}

const FIXED: fn(u32) -> u64 = |streak| u64::from(streak) * 10_000;

/// Lost (missing, or older than the view): seeded from the local breaker *now*, one
/// generation past the view, expecting what the store holds. (Issue 26 item 1: the replicas
/// had recovered locally, the store was rebuilt from their last fleet view instead.)
#[test]
fn a_lost_breaker_is_seeded_from_the_local_state_now() {
    let v = view(word(State::Open, 9, 1));
    let cases = [
        (State::Closed, State::Closed, None, 0),
        (State::Open, State::Open, Some(7_000), 2),
        (State::HalfOpen, State::Open, Some(0), 2),
        (State::ForcedOpen, State::ForcedOpen, None, 0),
        (State::ForcedClosed, State::ForcedClosed, None, 0),
    ];
    for (now, to, cooldown, streak) in cases {
        for moved in [false, true] {
            let Reconcile::Write(w) = reconcile(None, NOW, false, &v, &local(now, moved), false)
            else {
                panic!("{now}: seeded")
            };
            assert_eq!(w.expect, None);
            assert_eq!(
                (
                    w.next.state,
                    w.next.generation,
                    w.next.streak,
                    w.cooldown_ms
                ),
                (to, 10, streak, cooldown),
                "local {now}"
            );
        }
    }
    // Older than the view (a lagging replica promoted, a key evicted and written again).
    let older = word(State::Closed, 4, 0);
    let Reconcile::Write(w) = reconcile(
        Some(&older),
        NOW,
        false,
        &v,
        &local(State::Closed, false),
        false,
    ) else {
        panic!("seeded over the older word")
    };
    assert_eq!((w.expect, w.next.generation), (Some(older), 10));
    // Across the 24-bit wrap: generation 2 is newer than 0xff_fffe.
    let v = view(word(State::Closed, 2, 0));
    let wrapped = word(State::Open, 0xff_fffe, 1);
    assert!(matches!(
        reconcile(
            Some(&wrapped),
            NOW,
            false,
            &v,
            &local(State::Closed, false),
            false
        ),
        Reconcile::Write(_)
    ));
}

/// A breaker never seen in the store: nothing was lost, whatever happened locally (its first
/// write creates it); a local trip the store missed during a fault is sent as a trip (a vote
/// under quorum), never as a seed.
#[test]
fn a_breaker_never_seen_in_the_store_is_not_seeded() {
    let v = View::INITIAL;
    for after_fault in [false, true] {
        assert_eq!(
            reconcile(
                None,
                NOW,
                false,
                &v,
                &local(State::Closed, true),
                after_fault
            ),
            Reconcile::Keep
        );
    }
    assert_eq!(
        reconcile(None, NOW, false, &v, &local(State::Open, true), false),
        Reconcile::Keep
    );
    assert_eq!(
        reconcile(None, NOW, false, &v, &local(State::Open, true), true),
        Reconcile::Trip
    );
}

/// A newer word is adopted whatever happened locally, but for a local breaker closed by its own
/// probes while the newer word is half-open or open past its deadline (the next test): here
/// the open deadline is ahead, and for a local breaker that did not move, passed too.
#[test]
fn a_newer_word_is_adopted_whatever_happened_locally() {
    let v = view(word(State::Closed, 3, 0));
    let newer = word(State::Open, 4, 1);
    for (state, moved, after_fault, passed) in [
        (State::Closed, false, false, true),
        (State::Closed, false, false, false),
        (State::Closed, true, true, false),
        (State::Open, true, true, true),
    ] {
        assert_eq!(
            reconcile(
                Some(&newer),
                NOW,
                passed,
                &v,
                &local(state, moved),
                after_fault
            ),
            Reconcile::Adopt
        );
    }
}

/// After a fault, the same generation: a local breaker that moved on its own is evidence.
/// (Issue 26 item 2: a store hung past the cooldown with a healthy dependency.)
#[test]
fn after_a_fault_what_the_replicas_did_alone_counts() {
    let open = word(State::Open, 5, 1);
    let half = word(State::HalfOpen, 6, 1);
    let closed = word(State::Closed, 7, 0);
    // Recovered locally; the store open past its deadline, or half-open: closed.
    for (store, passed) in [(open, true), (half, false)] {
        let Reconcile::Write(w) = reconcile(
            Some(&store),
            NOW,
            passed,
            &view(store),
            &local(State::Closed, true),
            true,
        ) else {
            panic!("closed")
        };
        assert_eq!(w.expect, Some(store));
        assert_eq!(
            (w.next.state, w.next.generation, w.next.streak, w.reason),
            (
                State::Closed,
                store.generation + 1,
                0,
                TransitionReason::ProbesSucceeded
            )
        );
    }
    // ... but an open store whose deadline is still ahead is honoured.
    assert_eq!(
        reconcile(
            Some(&open),
            NOW,
            false,
            &view(open),
            &local(State::Closed, true),
            true
        ),
        Reconcile::Adopt
    );
    // Tripped locally, the store closed: the trip it missed is sent.
    for l in [State::Open, State::HalfOpen] {
        assert_eq!(
            reconcile(
                Some(&closed),
                NOW,
                false,
                &view(closed),
                &local(l, true),
                true
            ),
            Reconcile::Trip
        );
    }
    // Only ahead of the store (a local promotion past the deadline): its probe asks.
    assert_eq!(
        reconcile(
            Some(&open),
            NOW,
            true,
            &view(open),
            &local(State::HalfOpen, true),
            true
        ),
        Reconcile::Keep
    );
    // Nothing happened locally: the store's word is adopted (applied where the local state
    // differs, as after a store-error mode moved it); not after a fault, it stands.
    assert_eq!(
        reconcile(
            Some(&open),
            NOW,
            true,
            &view(open),
            &local(State::Closed, false),
            true
        ),
        Reconcile::Adopt
    );
    // A word of the same generation but another state (two seeds that met): adopted.
    assert_eq!(
        reconcile(
            Some(&open),
            NOW,
            false,
            &view(closed_as(open)),
            &local(State::Closed, false),
            false
        ),
        Reconcile::Adopt
    );
}

/// A local breaker closed by its own probes closes a half-open store, or one open past its
/// deadline, at every look while it has moved, not only at the first look after a fault (model
/// finding F4: local probes that closed every replica after that look left the store open past
/// its deadline, every replica's counts dropped, until the key expired), and whatever the
/// generation: a lease request whose reply was lost made a newer
/// half-open period, which adopted would reject every call for the lease time (the faults
/// suite's partition dropping replies); an open store with its deadline ahead is adopted.
#[test]
fn a_local_breaker_closed_alone_closes_the_store_at_every_look() {
    let open = word(State::Open, 5, 1);
    let half = word(State::HalfOpen, 6, 1);
    let closed = word(State::Closed, 7, 0);
    for after_fault in [false, true] {
        // The view's generation, or newer (the view open 5, the store half-open 6: promoted by
        // this replica's lost-reply lease request).
        for (store, passed, seen) in [(open, true, open), (half, false, half), (half, false, open)]
        {
            let Reconcile::Write(w) = reconcile(
                Some(&store),
                NOW,
                passed,
                &view(seen),
                &local(State::Closed, true),
                after_fault,
            ) else {
                panic!("closed: store {store:?}, view {seen:?}")
            };
            assert_eq!(
                (w.expect, w.next.state, w.next.generation, w.reason),
                (
                    Some(store),
                    State::Closed,
                    store.generation + 1,
                    TransitionReason::ProbesSucceeded
                )
            );
        }
        // Open with its deadline ahead: adopted (newer than the view, or after a fault).
        for seen in [open, word(State::Closed, 4, 0)] {
            let adopt = after_fault || seen != open;
            assert_eq!(
                reconcile(
                    Some(&open),
                    NOW,
                    false,
                    &view(seen),
                    &local(State::Closed, true),
                    after_fault
                ),
                if adopt {
                    Reconcile::Adopt
                } else {
                    Reconcile::Keep
                }
            );
        }
    }
    // Tripped alone, the store closed in the view's period: the trip was sent when it happened
    // (under quorum a replica open alone is the rule working); only the look after a fault
    // sends the trip the store missed.
    for (after_fault, decision) in [(false, Reconcile::Keep), (true, Reconcile::Trip)] {
        assert_eq!(
            reconcile(
                Some(&closed),
                NOW,
                false,
                &view(closed),
                &local(State::Open, true),
                after_fault
            ),
            decision
        );
    }
    // Not moved: the fleet put it there; a newer half-open word is adopted (not closed).
    assert_eq!(
        reconcile(
            Some(&half),
            NOW,
            false,
            &view(open),
            &local(State::Closed, false),
            false
        ),
        Reconcile::Adopt
    );
    // Agreeing: nothing to do.
    assert_eq!(
        reconcile(
            Some(&closed),
            NOW,
            false,
            &view(closed),
            &local(State::Closed, true),
            false
        ),
        Reconcile::Keep
    );
}

fn closed_as(w: Word) -> Word {
    Word {
        state: State::Closed,
        ..w
    }
}

/// A lease request promotes an open word (the core's `admit_open`) once the store's clock
/// passed its deadline, joinable; a half-open one asks the semaphore; closed or forced none.
#[test]
fn lease_requests_promote_or_join_the_half_open_period() {
    let open = view(word(State::Open, 5, 2));
    let ask = plan_acquire(&open, 3).unwrap();
    assert_eq!(
        (ask.not_before, ask.join, ask.want, ask.write.reason),
        (1_000, true, 3, TransitionReason::CooldownElapsed)
    );
    assert_eq!(ask.write.expect, Some(open.word));
    assert_eq!(
        (
            ask.write.next.state,
            ask.write.next.generation,
            ask.write.next.streak
        ),
        (State::HalfOpen, 6, 2)
    );
    let half = view(word(State::HalfOpen, 6, 2));
    let ask = plan_acquire(&half, 1).unwrap();
    assert_eq!(
        (ask.write.next, ask.not_before, ask.join),
        (half.word, 0, false)
    );
    for s in [State::Closed, State::ForcedOpen, State::ForcedClosed] {
        assert_eq!(plan_acquire(&view(word(s, 1, 0)), 1), None);
    }
}

/// Probe ends are the core's `end_probe`: a late success of the period in force still counts
/// and a late failure re-opens with the grown cooldown (issue 26 item 4, across the fleet); a
/// probe of an earlier period changes nothing.
#[test]
fn probe_ends_count_closes_and_reopen_by_the_core_rule() {
    let policy = BreakerPolicy {
        successes_to_close: 2,
        half_open_probes: 2,
        ..BreakerPolicy::default()
    };
    let half = Word {
        in_flight: 1,
        ..word(State::HalfOpen, 6, 2)
    };
    let w = plan_end(half, 6, ProbeEnd::Success, &policy, FIXED).unwrap();
    assert_eq!(
        (w.next.successes, w.next.generation, w.cooldown_ms),
        (1, 6, None)
    );
    let w = plan_end(w.next, 6, ProbeEnd::Success, &policy, FIXED).unwrap();
    assert_eq!((w.next.state, w.next.generation), (State::Closed, 7));
    let w = plan_end(half, 6, ProbeEnd::Failure, &policy, FIXED).unwrap();
    assert_eq!(
        (w.next.state, w.next.streak, w.cooldown_ms, w.reason),
        (State::Open, 3, Some(30_000), TransitionReason::ProbeFailed)
    );
    assert_eq!(plan_end(half, 5, ProbeEnd::Failure, &policy, FIXED), None);
}

#[test]
fn trips_and_rate_rules_are_the_cores() {
    let closed = word(State::Closed, 3, 0);
    let w = plan_trip(closed, TransitionReason::ConsecutiveFailures, FIXED).unwrap();
    assert_eq!(
        (
            w.next.state,
            w.next.generation,
            w.next.streak,
            w.cooldown_ms
        ),
        (State::Open, 4, 1, Some(10_000))
    );
    assert_eq!(
        plan_trip(
            word(State::Open, 4, 1),
            TransitionReason::FailureRate,
            FIXED
        ),
        None
    );
    let policy = BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        min_calls: 40,
        ..BreakerPolicy::default()
    };
    let counts = |calls, failures| WindowCounts {
        calls,
        failures,
        slow: 0,
    };
    assert_eq!(
        plan_rate(closed, counts(39, 39), &policy, FIXED),
        None,
        "under min_calls"
    );
    let w = plan_rate(closed, counts(40, 20), &policy, FIXED).unwrap();
    assert_eq!(w.reason, TransitionReason::FailureRate);
    assert_eq!(plan_rate(closed, counts(40, 19), &policy, FIXED), None);
}

/// A trip that lost its compare-and-set (model finding F2): decided again on the word that won
/// when that is still the closed period it tripped in (for a view that never knew the store's
/// word, the first period, generation 0), late otherwise.
#[test]
fn a_trip_that_lost_to_its_own_closed_period_trips_the_word_that_won() {
    let never_known = Write {
        expect: None,
        ..plan_trip(
            View::INITIAL.word,
            TransitionReason::ConsecutiveFailures,
            FIXED,
        )
        .unwrap()
    };
    // Another replica's first flush created the breaker: closed, generation 0.
    let created = word(State::Closed, 0, 0);
    let w = plan_retrip(&never_known, created, FIXED).unwrap();
    assert_eq!(w.expect, Some(created));
    assert_eq!(
        (w.next.state, w.next.generation, w.reason, w.cooldown_ms),
        (
            State::Open,
            1,
            TransitionReason::ConsecutiveFailures,
            Some(10_000)
        )
    );
    // A known closed period, won by a write that made no transition (its probes in flight
    // differ, say): the same period, tripped.
    let closed = word(State::Closed, 3, 0);
    let lost = plan_trip(closed, TransitionReason::FailureRate, FIXED).unwrap();
    let won = Word {
        in_flight: 1,
        ..closed
    };
    let w = plan_retrip(&lost, won, FIXED).unwrap();
    assert_eq!(
        (w.expect, w.next.state, w.next.generation, w.reason),
        (Some(won), State::Open, 4, TransitionReason::FailureRate)
    );
    // The period has ended: late.
    assert_eq!(plan_retrip(&lost, word(State::Open, 4, 1), FIXED), None);
    assert_eq!(plan_retrip(&lost, word(State::Closed, 5, 0), FIXED), None);
    assert_eq!(
        plan_retrip(&never_known, word(State::Closed, 2, 0), FIXED),
        None,
        "a never-known view trips the first period only"
    );
}

#[test]
fn manual_changes_always_write() {
    let half = word(State::HalfOpen, 6, 2);
    let w = plan_force(Some(half), State::Open, FIXED);
    assert_eq!(
        (
            w.next.state,
            w.next.generation,
            w.next.streak,
            w.cooldown_ms
        ),
        (State::Open, 7, 3, Some(30_000))
    );
    let w = plan_force(Some(half), State::Closed, FIXED);
    assert_eq!(
        (w.next.state, w.next.streak, w.cooldown_ms),
        (State::Closed, 0, None)
    );
    let w = plan_force(None, State::ForcedOpen, FIXED);
    assert_eq!((w.expect, w.next.generation), (None, 1));
}

/// Answers and pushes are handled out of order: one no newer than the view (a read sent
/// before a write, answered in the same read of the socket; a push delayed behind a reply)
/// cannot show that the store lost the breaker.
#[test]
fn an_answer_older_than_the_view_shows_no_loss() {
    let v = view(word(State::Open, 9, 1));
    let older = word(State::Closed, 8, 0);
    for at in [4_000, 5_000] {
        assert_eq!(
            reconcile(None, at, false, &v, &local(State::Open, false), false),
            Reconcile::Ignore
        );
        assert_eq!(
            reconcile(
                Some(&older),
                at,
                false,
                &v,
                &local(State::Open, false),
                false
            ),
            Reconcile::Ignore
        );
    }
    assert!(matches!(
        reconcile(
            Some(&older),
            5_001,
            false,
            &v,
            &local(State::Open, false),
            false
        ),
        Reconcile::Write(_)
    ));
}
