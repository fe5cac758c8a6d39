//! Unit tests of the pure decisions: words in, words out, no atomics.

use super::*;
use crate::breaker::state::*;

fn word(state: State, generation: u32) -> Word {
    Word {
        state,
        successes: 0,
        in_flight: 0,
        streak: 1,
        generation,
    }
}

const LIMITS: Limits = Limits {
    half_open_probes: 2,
    successes_to_close: 2,
    probe_wait: 3_000_000,
};

#[test]
fn word_round_trips() {
    let w = Word {
        state: State::HalfOpen,
        successes: 8191,
        in_flight: 65535,
        streak: 255,
        generation: GEN_MASK,
    };
    assert_eq!(Word::decode(w.encode()), w);
    let next = w.transition(State::Closed, 0);
    assert_eq!(next.generation, 0, "generation wraps at 24 bits");
    assert!(newer(0, GEN_MASK));
    assert!(!newer(GEN_MASK, 0));
}

#[test]
fn stamp_tag_detects_generation() {
    let s = pack_stamp(123_456, 7);
    assert_eq!(unpack_stamp(s, 7), Some(123_456));
    assert_eq!(unpack_stamp(s, 8), None);
}

#[test]
fn spans_are_serial_on_the_48_bit_circle() {
    let top = (1u64 << 48) - 1;
    assert_eq!(span(10, 25), 15);
    assert_eq!(span(25, 10), -15);
    // Across the wrap: a deadline 5 µs after a reading just below 2^48.
    let until = later(top - 2, 5);
    assert_eq!(until, 2);
    assert_eq!(span(top - 2, until), 5);
    assert_eq!(span(until, top - 2), -5);
    // A year of cooldown from a reading past 2^48 µs (a clock counting from 1970).
    let year = 365 * 86_400 * 1_000_000u64;
    let now = micros(1_700_000_000_000_000_000);
    assert_eq!(span(now, later(now, year)), year as i64);
    // `later` never goes past the representable span.
    assert_eq!(span(0, later(0, u64::MAX)), MAX_SPAN_MICROS as i64);
}

#[test]
fn admit_open_rejects_until_the_deadline_then_promotes() {
    let w = word(State::Open, 4);
    assert_eq!(
        admit(w, 10_000, 4_000, &LIMITS),
        Admit::Reject {
            reason: RejectReason::Open,
            retry_after: Some(6_000)
        }
    );
    let Admit::Probe { next, entered } = admit(w, 10_000, 10_000, &LIMITS) else {
        panic!("promoted at the deadline");
    };
    assert_eq!(entered, Some(TransitionReason::CooldownElapsed));
    assert_eq!(
        (next.state, next.generation, next.in_flight, next.streak),
        (State::HalfOpen, 5, 1, 1)
    );
}

#[test]
fn admit_half_open_reserves_then_waits_then_admits_one_more_in_the_same_period() {
    let w = Word {
        in_flight: 1,
        ..word(State::HalfOpen, 9)
    };
    let Admit::Probe { next, entered } = admit(w, 0, 0, &LIMITS) else {
        panic!("a free slot");
    };
    assert_eq!((next.in_flight, next.generation, entered), (2, 9, None));
    assert_eq!(
        admit(next, 1_000, 3_000_999, &LIMITS),
        Admit::Reject {
            reason: RejectReason::HalfOpenFull,
            retry_after: None
        }
    );
    // A newest-probe stamp *after* now (a reading that went backwards) waits, no panic.
    assert!(matches!(
        admit(next, 9_000_000, 1_000, &LIMITS),
        Admit::Reject { .. }
    ));
    let Admit::Probe {
        next: taken,
        entered,
    } = admit(next, 1_000, 3_001_000, &LIMITS)
    else {
        panic!("one more probe after the probe wait");
    };
    // The same half-open period: no transition, the held probes keep their slots (their
    // results still count), one slot more.
    assert_eq!(entered, None);
    assert_eq!(
        (
            taken.state,
            taken.generation,
            taken.in_flight,
            taken.successes
        ),
        (State::HalfOpen, 9, 3, 0)
    );
    // A late success of a held probe counts towards closing; a late failure re-opens.
    let Step::Update(counted) = end_probe(taken, 9, ProbeEnd::Success, &LIMITS) else {
        panic!("counted");
    };
    assert_eq!((counted.successes, counted.in_flight), (1, 2));
    assert!(matches!(
        end_probe(taken, 9, ProbeEnd::Failure, &LIMITS),
        Step::Enter(
            Word {
                state: State::Open,
                ..
            },
            TransitionReason::ProbeFailed
        )
    ));
    // The field's maximum is never passed: conservation of slots holds.
    let full = Word {
        in_flight: MAX_IN_FLIGHT,
        ..next
    };
    assert!(matches!(
        admit(full, 1_000, 3_001_000, &LIMITS),
        Admit::Reject {
            reason: RejectReason::HalfOpenFull,
            ..
        }
    ));
}

#[test]
fn admit_closed_and_forced_states_write_nothing() {
    assert_eq!(admit(word(State::Closed, 0), 0, 0, &LIMITS), Admit::Closed);
    assert_eq!(
        admit(word(State::ForcedClosed, 0), 0, 0, &LIMITS),
        Admit::Unrecorded
    );
    let forced = admit(word(State::ForcedOpen, 0), 0, 0, &LIMITS);
    assert_eq!(forced.next(), None);
    assert_eq!(
        forced,
        Admit::Reject {
            reason: RejectReason::ForcedOpen,
            retry_after: None
        }
    );
}

#[test]
fn end_probe_counts_releases_closes_and_reopens() {
    let w = Word {
        in_flight: 2,
        ..word(State::HalfOpen, 3)
    };
    let Step::Update(one) = end_probe(w, 3, ProbeEnd::Success, &LIMITS) else {
        panic!("one success of two");
    };
    assert_eq!((one.successes, one.in_flight, one.generation), (1, 1, 3));
    assert_eq!(
        end_probe(one, 3, ProbeEnd::Success, &LIMITS),
        Step::Enter(
            Word {
                state: State::Closed,
                successes: 0,
                in_flight: 0,
                streak: 0,
                generation: 4
            },
            TransitionReason::ProbesSucceeded
        )
    );
    assert_eq!(
        end_probe(w, 3, ProbeEnd::Neutral, &LIMITS),
        Step::Update(Word { in_flight: 1, ..w })
    );
    let Step::Enter(open, reason) = end_probe(w, 3, ProbeEnd::Failure, &LIMITS) else {
        panic!("a failed probe re-opens");
    };
    assert_eq!(reason, TransitionReason::ProbeFailed);
    assert_eq!(
        (open.state, open.streak, open.generation),
        (State::Open, 2, 4)
    );
    assert_eq!(
        end_probe(w, 3, ProbeEnd::Slow, &LIMITS)
            .next()
            .map(|w| w.state),
        Some(State::Open)
    );
    assert_eq!(end_probe(w, 2, ProbeEnd::Failure, &LIMITS), Step::Stale);
    assert_eq!(
        end_probe(word(State::Open, 3), 3, ProbeEnd::Success, &LIMITS),
        Step::Stale
    );
}

#[test]
fn trip_only_from_its_own_closed_period() {
    let closed = Word {
        streak: 0,
        ..word(State::Closed, 7)
    };
    let Step::Enter(open, reason) = trip(closed, 7, TransitionReason::FailureRate) else {
        panic!("trips");
    };
    assert_eq!(reason, TransitionReason::FailureRate);
    assert_eq!(
        (open.state, open.streak, open.generation),
        (State::Open, 1, 8)
    );
    assert_eq!(trip(closed, 6, TransitionReason::FailureRate), Step::Stale);
    assert_eq!(trip(open, 8, TransitionReason::FailureRate), Step::Stale);
}

#[test]
fn force_always_enters_with_the_streak_given_or_the_default() {
    let w = Word {
        streak: 9,
        in_flight: 3,
        ..word(State::HalfOpen, GEN_MASK)
    };
    let f = force(w, State::ForcedOpen, TransitionReason::Manual, None);
    assert_eq!(f.reason, TransitionReason::Manual);
    assert_eq!(
        (
            f.next.state,
            f.next.streak,
            f.next.in_flight,
            f.next.generation
        ),
        (State::ForcedOpen, 0, 0, 0)
    );
    // Opening: one more than the streak by default, as a re-opening.
    let f = force(w, State::Open, TransitionReason::ProbeFailed, None);
    assert_eq!((f.next.state, f.next.streak), (State::Open, 10));
    // A streak given (decided elsewhere) is kept, capped at the field's 255.
    let f = force(w, State::Open, TransitionReason::FailureRate, Some(300));
    assert_eq!(
        (f.next.streak, f.reason),
        (255, TransitionReason::FailureRate)
    );
    assert_eq!(
        Step::from(f),
        Step::Enter(f.next, TransitionReason::FailureRate)
    );
}

#[test]
fn cooldown_is_the_grown_cooldown_less_the_jitter() {
    let secs = Duration::from_secs;
    let p = BreakerPolicy {
        cooldown: secs(10),
        cooldown_multiplier: 2.0,
        cooldown_max: secs(60),
        cooldown_jitter: 0.5,
        ..BreakerPolicy::default()
    };
    assert_eq!(cooldown(&p, 1, 0.0), secs(10));
    assert_eq!(cooldown(&p, 2, 1.0), secs(10), "20 s less half");
    assert_eq!(cooldown(&p, 3, 0.5), secs(30), "40 s less a quarter");
    assert_eq!(cooldown(&p, 9, 0.0), secs(60), "capped");
    assert_eq!(
        cooldown(&p, 1, 7.0),
        secs(5),
        "the draw is clamped to [0, 1]"
    );
    let flat = BreakerPolicy {
        cooldown_jitter: 0.0,
        ..p
    };
    assert_eq!(
        cooldown(&flat, 2, 0.9),
        secs(20),
        "no jitter: the draw is unused"
    );
}

#[test]
fn rate_trip_waits_for_min_calls_then_failure_rate_before_slow_rate() {
    let p = BreakerPolicy {
        consecutive_failures: None,
        failure_rate_percent: Some(50.0),
        slow_call: Some(crate::breaker::SlowCall {
            duration: Duration::from_secs(1),
            rate_percent: 20.0,
        }),
        min_calls: 10,
        ..BreakerPolicy::default()
    };
    let counts = |calls, failures, slow| WindowCounts {
        calls,
        failures,
        slow,
    };
    assert_eq!(
        rate_trip(&p, counts(9, 9, 9)),
        None,
        "under min_calls (BR-17)"
    );
    assert_eq!(
        rate_trip(&p, counts(10, 5, 10)),
        Some(TransitionReason::FailureRate),
        "50 % >= 50 % (BR-14), before the slow rate"
    );
    assert_eq!(
        rate_trip(&p, counts(10, 4, 2)),
        Some(TransitionReason::SlowCallRate)
    );
    assert_eq!(rate_trip(&p, counts(10, 4, 1)), None);
}

#[test]
fn the_open_streak_grows_and_caps() {
    let closed = word(State::Closed, 0);
    assert_eq!(reopen(closed).streak, 1);
    let half_open = Word {
        streak: 254,
        ..word(State::HalfOpen, 0)
    };
    assert_eq!(reopen(half_open).streak, 255);
    assert_eq!(reopen(reopen(half_open)).streak, 255);
}

/// The consecutive-failure rule on the counter word: a failure counts one more in its period
/// (the first of a period from zero, BR-25), a success resets only a non-zero count of its own
/// period, and an outcome of an older period changes nothing.
#[test]
fn the_consecutive_failure_rule() {
    let c = pack_count(5, 2);
    assert_eq!(
        count_outcome(c, 5, true),
        Count::Write {
            next: pack_count(5, 3),
            failures: Some(3)
        }
    );
    assert_eq!(
        count_outcome(c, 5, false),
        Count::Write {
            next: pack_count(5, 0),
            failures: None
        }
    );
    assert_eq!(count_outcome(pack_count(5, 0), 5, false), Count::Keep);
    // A newer period starts from zero; an older one leaves the counter alone.
    assert_eq!(
        count_outcome(c, 6, true),
        Count::Write {
            next: pack_count(6, 1),
            failures: Some(1)
        }
    );
    assert_eq!(count_outcome(c, 6, false), Count::Keep);
    assert_eq!(count_outcome(c, 4, true), Count::Keep);
    assert_eq!(count_outcome(c, 4, false), Count::Keep);
    // Generations wrap at 24 bits.
    assert_eq!(
        count_outcome(pack_count(GEN_MASK, 7), 0, true),
        Count::Write {
            next: pack_count(0, 1),
            failures: Some(1)
        }
    );
}
