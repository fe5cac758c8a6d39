//! Hand-written traces with answers computed by hand, replayed against a few policies.
//!
//! Each test spells out, call by call, what the real breaker must decide; the counts asserted
//! are those of the comments.

use breaker_core::breaker::BreakerPolicy;
use breaker_core::layer::Layer;
use breaker_core::policy::Policy;
use breaker_sim::replay::{NamedPolicy, Options};
use breaker_sim::report::Report;
use breaker_sim::trace::{Format, TraceReader};
use std::time::Duration;

fn replay_with(trace: &str, format: Format, policies: &[NamedPolicy]) -> Vec<Report> {
    let mut reader = TraceReader::new(
        "test.trace",
        Box::new(trace.as_bytes().to_vec().leak() as &[u8]),
        format,
    )
    .unwrap();
    breaker_sim::run::run(&mut reader, policies, Options::default(), &|_| {}).unwrap()
}

fn replay(trace: &str, policies: &[NamedPolicy]) -> Vec<Report> {
    replay_with(trace, Format::JsonLines, policies)
}

fn dsl(s: &str) -> NamedPolicy {
    NamedPolicy::from_breaker_dsl(s).unwrap()
}

fn named(name: &str, policy: Policy) -> NamedPolicy {
    NamedPolicy {
        name: name.into(),
        policy,
        params: Vec::new(),
    }
}

/// The main hand-computed trace, "3 consecutive, open 1s":
/// - 0 ms success; 100, 200, 300 ms failures (10 ms each): the third ends at 310 ms and trips
///   the breaker (open until 1310 ms);
/// - 400 ms (a success) and 500 ms (a failure) are rejected: one success refused;
/// - 1400 ms: past the cooldown, the breaker goes half-open and admits the call as its probe,
///   which succeeds at 1410 ms and closes it; 1500 ms is admitted.
const TRIP: &str = r#"{"t_ms": 0, "latency_ms": 10, "outcome": "success"}
{"t_ms": 100, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 200, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 300, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 400, "latency_ms": 10, "outcome": "success"}
{"t_ms": 500, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 1400, "latency_ms": 10, "outcome": "success"}
{"t_ms": 1500, "latency_ms": 10, "outcome": "success"}
"#;

#[test]
fn consecutive_rule_trips_rejects_and_recovers_as_computed_by_hand() {
    let r = &replay(TRIP, &[dsl("3 consecutive, open 1s")])[0];
    assert_eq!(r.policy, "3 consecutive, open 1s");
    assert_eq!((r.calls, r.admitted, r.rejected, r.reached), (8, 6, 2, 6));
    assert_eq!((r.failures_reached, r.successes_rejected), (3, 1));
    assert_eq!((r.opens, r.half_opens, r.closes), (1, 1, 1));
    assert_eq!(r.first_open_ms, Some(310.0));
    // Open from 310 ms to the lazy promotion at 1400 ms.
    assert_eq!(r.time_open_ms, 1090.0);
    assert_eq!((r.succeeded, r.failed, r.cancelled), (3, 3, 0));
    // No labels: the first second (4 failures of 6 answers) is a detected outage, the next
    // one (2 successes) healthy from 1400 ms: opened 310 ms after the outage began, closed
    // 10 ms after the recovery began (open at 1400 ms, the probe closed it at 1410 ms).
    assert_eq!((r.detect_ms, r.recover_ms), (Some(310.0), Some(10.0)));
}

#[test]
fn a_more_tolerant_policy_never_opens_on_the_same_trace() {
    let [strict, lax] = <[Report; 2]>::try_from(replay(
        TRIP,
        &[dsl("2 consecutive, open 1s"), dsl("4 consecutive, open 1s")],
    ))
    .unwrap();
    // 2 in a row: trips at 210 ms; 300 (failure), 400 (success), 500 (failure) rejected;
    // 1400 ms is the probe (success, closes at 1410 ms).
    assert_eq!(
        (
            strict.rejected,
            strict.reached,
            strict.failures_reached,
            strict.successes_rejected
        ),
        (3, 5, 2, 1)
    );
    assert_eq!(strict.first_open_ms, Some(210.0));
    assert_eq!(strict.time_open_ms, 1190.0);
    // 4 in a row never happens (a success at 400 ms resets the count of 3).
    assert_eq!(
        (lax.rejected, lax.reached, lax.failures_reached, lax.opens),
        (0, 8, 4, 0)
    );
    assert_eq!(
        (lax.first_open_ms, lax.detect_ms, lax.recover_ms),
        (None, None, Some(0.0))
    );
}

/// Outcomes are recorded at `t_ms + latency_ms`, with calls in flight overlapping: two slow
/// failures (500 ms) arrive before three fast successes, so in the order outcomes are
/// recorded the failures are not in a row; only the failures at 600 and 710 ms are.
#[test]
fn outcomes_are_recorded_when_calls_end_not_when_they_arrive() {
    let trace = r#"{"t_ms": 0, "latency_ms": 500, "outcome": "failure"}
{"t_ms": 100, "latency_ms": 500, "outcome": "failure"}
{"t_ms": 200, "latency_ms": 10, "outcome": "success"}
{"t_ms": 300, "latency_ms": 10, "outcome": "success"}
{"t_ms": 550, "latency_ms": 10, "outcome": "success"}
{"t_ms": 700, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 800, "latency_ms": 10, "outcome": "success"}
"#;
    // Recorded: S@210, S@310, F@500, S@560, F@600, F@710 -> open at 710; 800 is rejected.
    let r = &replay(trace, &[dsl("2 consecutive, open 1s")])[0];
    assert_eq!(r.first_open_ms, Some(710.0));
    assert_eq!((r.rejected, r.successes_rejected, r.reached), (1, 1, 6));
    // Only the breaker refuses here: both counts agree.
    assert_eq!(r.successes_refused, 1);
}

/// A hanging outage under a 200 ms timeout: each hung call fails when its timeout passes, not
/// when it arrives. The third hung call was admitted before the breaker opened; its late
/// failure changes nothing.
#[test]
fn a_hang_fails_at_the_policys_timeout() {
    let trace = r#"{"t_ms": 0, "latency_ms": 2000, "outcome": "timeout"}
{"t_ms": 50, "latency_ms": 2000, "outcome": "timeout"}
{"t_ms": 100, "latency_ms": 2000, "outcome": "timeout"}
{"t_ms": 260, "latency_ms": 1, "outcome": "success"}
{"t_ms": 1400, "latency_ms": 1, "outcome": "success"}
"#;
    let policy = Policy {
        breaker: Some("2 consecutive, open 1s".parse().unwrap()),
        timeout: Some(Duration::from_millis(200)),
        ..Policy::default()
    };
    let r = &replay(trace, &[named("hang", policy)])[0];
    // Failures at 200 and 250 ms: open at 250 ms; 260 ms rejected; 1400 ms the probe.
    assert_eq!(r.first_open_ms, Some(250.0));
    assert_eq!((r.reached, r.failures_reached), (4, 3));
    assert_eq!((r.rejected, r.successes_rejected), (1, 1));
    assert_eq!((r.opens, r.half_opens, r.closes), (1, 1, 1));
    // Without a timeout the hangs fail where the trace's knowledge ends (2000 ms after each
    // arrival): the breaker opens at 2050 ms, after the successes have passed.
    let r = &replay(trace, &[dsl("2 consecutive, open 1s")])[0];
    assert_eq!(r.first_open_ms, Some(2050.0));
    assert_eq!(r.rejected, 0);
}

/// Case BR-42 replayed: 4 calls that always fail, 3 attempts each (no delay),
/// `consecutive_failures = 5`. Retry outside the breaker: the breaker trips at the 5th attempt
/// (during the 2nd call), the rejection is not retried, 5 attempts reach the dependency.
/// Breaker outside retry: one outcome per call, 4 failures, still closed, 12 attempts.
#[test]
fn retry_amplification_and_the_order_replay_as_live_br_42() {
    let trace = r#"{"t_ms": 0, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 100, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 200, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 300, "latency_ms": 10, "outcome": "failure"}
"#;
    let policy = |order: Vec<Layer>| Policy {
        breaker: Some(BreakerPolicy {
            consecutive_failures: Some(5),
            cooldown: Duration::from_secs(10),
            cooldown_max: Duration::from_secs(10),
            ..BreakerPolicy::default()
        }),
        retry: Some("3x fixed 0ms".parse().unwrap()),
        idempotent: true,
        order: Some(order),
        ..Policy::default()
    };
    let [a, b] = <[Report; 2]>::try_from(replay(
        trace,
        &[
            named(
                "retry > breaker",
                policy(vec![Layer::Retry, Layer::Breaker]),
            ),
            named(
                "breaker > retry",
                policy(vec![Layer::Breaker, Layer::Retry]),
            ),
        ],
    ))
    .unwrap();
    assert_eq!((a.reached, a.failures_reached), (5, 5));
    assert_eq!((a.opens, a.rejected, a.failed), (1, 3, 1));
    assert_eq!(a.first_open_ms, Some(120.0));
    assert_eq!((b.reached, b.failures_reached), (12, 12));
    assert_eq!((b.opens, b.rejected, b.failed), (0, 0, 4));
    // Not idempotent: one attempt per call, whatever the retry says.
    let once = Policy {
        idempotent: false,
        retry: Some("1x".parse().unwrap()),
        ..policy(vec![Layer::Retry, Layer::Breaker])
    };
    let r = &replay(trace, &[named("once", once)])[0];
    assert_eq!((r.reached, r.opens), (4, 0));
}

/// A retry takes its answer from the trace at its own start: the latest line with a known
/// answer at or before it.
#[test]
fn a_retry_reads_the_dependency_at_its_own_time() {
    // The call at 0 fails at 10 ms; its retry starts at 60 ms (50 ms backoff), when the latest
    // line is the success at 50 ms: the retry succeeds. A rejected line says nothing about the
    // dependency and is skipped.
    let trace = r#"{"t_ms": 0, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 50, "latency_ms": 5, "outcome": "success"}
{"t_ms": 55, "latency_ms": 0, "outcome": "rejected"}
"#;
    let policy = Policy {
        retry: Some("2x fixed 50ms".parse().unwrap()),
        idempotent: true,
        ..Policy::default()
    };
    let r = &replay(trace, &[named("retry only", policy)])[0];
    // Calls: 0 (failure, then success on retry), 50 (success), 55 (no answer of its own: the
    // dependency's behaviour at 55 ms is the success at 50 ms).
    assert_eq!(
        (r.calls, r.reached, r.failures_reached, r.succeeded),
        (3, 4, 1, 3)
    );
}

/// A line the recording breaker rejected takes the nearest known answer, which may come after
/// it: when the replayed cooldown ends a few milliseconds before the recorded one, the probe
/// lands on a rejected line, and the recorded probe just after shows what the dependency did
/// then. "1 consecutive, open 100ms", timeout 50 ms:
/// - 0 ms hangs; the timeout fails it at 50 ms: open until 150 ms;
/// - 100 ms rejected; 152 ms, rejected live (the recorded cooldown ended late), is the
///   replay's probe: the nearest answer is the fast failure recorded at 155 ms (3 ms after),
///   not the hang at 0 ms, so the probe fails at 153 ms: open until 253 ms;
/// - 155 ms rejected (open); 260 ms the probe, a success: closed.
///
/// Taking the latest answer before it instead, the probe at 152 ms would hang until 202 ms,
/// the breaker would stay open until 302 ms and reject the success at 260 ms.
#[test]
fn a_rejected_line_takes_the_nearest_answer_even_just_after_it() {
    let trace = r#"{"t_ms": 0, "latency_ms": 2000, "outcome": "timeout"}
{"t_ms": 100, "latency_ms": 0, "outcome": "rejected"}
{"t_ms": 152, "latency_ms": 0, "outcome": "rejected"}
{"t_ms": 155, "latency_ms": 1, "outcome": "failure", "status": 503}
{"t_ms": 260, "latency_ms": 1, "outcome": "success"}
"#;
    let policy = Policy {
        breaker: Some("1 consecutive, open 100ms".parse().unwrap()),
        timeout: Some(Duration::from_millis(50)),
        ..Policy::default()
    };
    let r = &replay(trace, &[named("probe", policy)])[0];
    assert_eq!((r.reached, r.failures_reached), (3, 2));
    assert_eq!((r.rejected, r.successes_rejected), (2, 0));
    assert_eq!((r.opens, r.half_opens, r.closes), (2, 2, 1));
    // Open 50..152 ms and 153..260 ms.
    assert_eq!(r.time_open_ms, 209.0);
}

/// The answer after an instant is taken only within the look-ahead (1 s). "1 consecutive, open 2s", timeout 50 ms: the hang at 0 ms opens the
/// breaker at 50 ms until 2050 ms; the line at 2060 ms (no answer of its own) is the probe.
#[test]
fn the_answer_after_an_instant_counts_within_the_look_ahead_only() {
    let probe = |next_ms: u64| {
        let trace = format!(
            r#"{{"t_ms": 0, "latency_ms": 2000, "outcome": "timeout"}}
{{"t_ms": 2060, "latency_ms": 0, "outcome": "rejected"}}
{{"t_ms": {next_ms}, "latency_ms": 1, "outcome": "success"}}
"#
        );
        let policy = Policy {
            breaker: Some("1 consecutive, open 2s".parse().unwrap()),
            timeout: Some(Duration::from_millis(50)),
            ..Policy::default()
        };
        let r = replay(&trace, &[named("look-ahead", policy)]).remove(0);
        (r.opens, r.closes)
    };
    // 1000 ms after the probe, nearer than the hang 2060 ms before it: the probe succeeds.
    assert_eq!(probe(3060), (1, 1));
    // 1001 ms after: past the look-ahead, the probe takes the hang, fails at 2110 ms and
    // opens the breaker again (the success at 3061 ms is rejected).
    assert_eq!(probe(3061), (2, 0));
}

/// On a tie between the answers before and after an instant, the earlier one wins: the retry
/// at 60 ms is 10 ms from the failure at 50 ms and from the success at 70 ms.
#[test]
fn a_tie_between_answers_goes_to_the_earlier() {
    let trace = r#"{"t_ms": 0, "latency_ms": 10, "outcome": "failure"}
{"t_ms": 50, "latency_ms": 5, "outcome": "failure"}
{"t_ms": 70, "latency_ms": 5, "outcome": "success"}
"#;
    let policy = Policy {
        retry: Some("2x fixed 50ms".parse().unwrap()),
        idempotent: true,
        ..Policy::default()
    };
    let r = replay(trace, &[named("tie", policy)]).remove(0);
    // The call at 0 ms fails at 10 ms and retries at 60 ms: it reads the failure at 50 ms and
    // fails (its 2 attempts spent). The call at 50 ms fails at 55 ms and retries at 105 ms,
    // reading the success at 70 ms; the call at 70 ms succeeds. Reading the later answer on
    // the tie would give 2 failures reached and 3 successes.
    assert_eq!(
        (r.calls, r.reached, r.failures_reached, r.succeeded),
        (3, 5, 3, 2)
    );
}

/// Labelled phases: detect and recover are measured from the phases' starts.
#[test]
fn labelled_phases_measure_detection_and_recovery() {
    let trace = r#"{"t_ms": 0, "latency_ms": 1, "outcome": "success", "phase": "healthy"}
{"t_ms": 1000, "latency_ms": 1, "status": 503, "phase": "down"}
{"t_ms": 1100, "latency_ms": 1, "status": 503, "phase": "down"}
{"t_ms": 1200, "latency_ms": 1, "status": 503, "phase": "down"}
{"t_ms": 2000, "latency_ms": 1, "status": 200, "phase": "recovery"}
{"t_ms": 2600, "latency_ms": 1, "status": 200, "phase": "recovery"}
"#;
    // 2 consecutive, open 1s: open at 1101 ms (detect 101 ms); 1200 rejected; 2000 ms is
    // still inside the cooldown (until 2101 ms): rejected; 2600 ms the probe, closed at
    // 2601 ms: recovery 601 ms after the recovery phase began at 2000 ms.
    let r = &replay(trace, &[dsl("2 consecutive, open 1s")])[0];
    assert_eq!((r.detect_ms, r.recover_ms), (Some(101.0), Some(601.0)));
    assert_eq!((r.rejected, r.successes_rejected), (2, 1));
}

/// The same trace as CSV gives the same report.
#[test]
fn csv_reads_like_json_lines() {
    let csv = "t_ms,latency_ms,outcome,status\n0,10,success,\n100,10,failure,\n200,10,,503\n\
               300,10,failure,\n400,10,success,\n500,10,failure,\n1400,10,,200\n1500,10,success,\n";
    let from_csv = replay_with(csv, Format::Csv, &[dsl("3 consecutive, open 1s")]);
    assert_eq!(from_csv, replay(TRIP, &[dsl("3 consecutive, open 1s")]));
}

/// Byte-identical output for the same trace, policies and seed.
#[test]
fn replays_are_deterministic() {
    let policy = Policy {
        breaker: Some(
            "2 consecutive, open 300ms factor 2 max 2s jitter 0.5"
                .parse()
                .unwrap(),
        ),
        retry: Some("3x exp(10ms, max 100ms) full-jitter".parse().unwrap()),
        idempotent: true,
        timeout: Some(Duration::from_millis(50)),
        ..Policy::default()
    };
    let trace = breaker_sim::generate::generate(
        &"healthy 5s, hang 5s timeout 2s, flapping 5s 20%, recovery 5s"
            .parse()
            .unwrap(),
        7,
    );
    let run = || {
        let text = breaker_sim::generate::to_json_lines(&trace);
        replay(&text, &[named("p", policy.clone())])
            .iter()
            .map(Report::to_json)
            .collect::<Vec<_>>()
    };
    let first = run();
    assert_eq!(first, run());
    assert!(first[0].contains("\"opens\":"), "{first:?}");
}

/// The replay looks ahead for answers across the chunks it is fed: fed one line at a time, in
/// chunks of 7 or all at once, the same calls give the same report. The trace has lines
/// without an answer (every third line of the outage is marked rejected, as a recording
/// breaker leaves them) and retries, so answers are taken from lines not fed yet.
#[test]
fn the_report_does_not_depend_on_how_the_calls_are_fed() {
    use breaker_sim::replay::Sim;
    use breaker_sim::trace::CallOutcome;
    let mut trace = breaker_sim::generate::generate(
        &"healthy 3s, hang 3s timeout 2s, down 2s, flapping 3s 30%, recovery 3s"
            .parse()
            .unwrap(),
        11,
    );
    for (i, call) in trace.calls.iter_mut().enumerate() {
        if (3_000_000_000..11_000_000_000).contains(&call.t_ns) && i % 3 == 0 {
            call.outcome = CallOutcome::Rejected;
            call.latency_ns = 0;
            call.transient = false;
        }
    }
    let policy = named(
        "p",
        Policy {
            breaker: Some("3 consecutive, open 400ms".parse().unwrap()),
            retry: Some("3x exp(20ms, max 100ms)".parse().unwrap()),
            idempotent: true,
            timeout: Some(Duration::from_millis(100)),
            ..Policy::default()
        },
    );
    let report = |chunk: usize| {
        let mut sim = Sim::new(&policy, Options::default()).unwrap();
        for calls in trace.calls.chunks(chunk) {
            sim.feed(calls);
        }
        sim.finish(&trace.phases).to_json()
    };
    let whole = report(trace.calls.len());
    assert_eq!(report(1), whole);
    assert_eq!(report(7), whole);
    // The rejected lines were replayed: some admitted as probes, some rejected again.
    let r = Sim::new(&policy, Options::default()).map(|mut sim| {
        sim.feed(&trace.calls);
        sim.finish(&trace.phases)
    });
    let r = r.unwrap();
    assert_eq!(r.calls, trace.calls.len() as u64);
    assert!(r.opens >= 2 && r.closes >= 1, "{r:?}");
}

/// An overloaded dependency that rejects 9 calls in 10 (a 429 every time but every tenth call)
/// while callers keep sending 100 calls a second: the same trace replayed with and without
/// adaptive throttling (`K = 2`). The breaker alone (a failure rate it never reaches: 90% <
/// 95%) lets every call through; with throttling most are shed locally and the dependency
/// sees a trickle of probes.
#[test]
fn adaptive_throttling_sheds_an_overloaded_dependencys_calls_on_the_same_trace() {
    let mut trace = String::new();
    for i in 0..2000u32 {
        let (outcome, status) = if i % 10 == 0 {
            ("success", 200)
        } else {
            ("failure", 429)
        };
        trace.push_str(&format!(
            "{{\"t_ms\": {}, \"latency_ms\": 5, \"outcome\": \"{outcome}\", \"status\": {status}}}\n",
            i * 10
        ));
    }
    let breaker: BreakerPolicy = "95% of 100 calls, open 1s".parse().unwrap();
    let without = named(
        "breaker",
        Policy {
            breaker: Some(breaker.clone()),
            ..Policy::default()
        },
    );
    let with = named(
        "breaker + throttle",
        Policy {
            breaker: Some(breaker),
            throttle: Some("k 2 over 10s".parse().unwrap()),
            ..Policy::default()
        },
    );
    let [plain, throttled] = <[Report; 2]>::try_from(replay(&trace, &[without, with])).unwrap();
    assert_eq!(
        (plain.calls, plain.reached, plain.rejected),
        (2000, 2000, 0)
    );
    assert_eq!(plain.opens, 0);
    assert_eq!(throttled.calls, 2000);
    // Every call either reached the dependency or was shed locally.
    assert_eq!(throttled.reached + throttled.rejected, 2000);
    // This dependency accepts a fixed share (1 in 10) of what reaches it, never `K` times
    // more than it accepts, so the rule has no fixed point below its ceiling: with about
    // 1,000 requests in the 10 s window and a handful accepted, `p = (R - 2A) / (R + 1)` is
    // about 0.98, and about 2 calls in 100 still reach it (its probes). Exact counts, for the
    // replay's default seed:
    assert_eq!(
        (throttled.reached, throttled.rejected, throttled.succeeded),
        (43, 1957, 4)
    );
    // Deterministic: the same seed sheds the same calls.
    let again = replay(
        &trace,
        &[named(
            "breaker + throttle",
            Policy {
                breaker: Some("95% of 100 calls, open 1s".parse().unwrap()),
                throttle: Some("k 2 over 10s".parse().unwrap()),
                ..Policy::default()
            },
        )],
    );
    assert_eq!(
        (again[0].reached, again[0].rejected),
        (throttled.reached, throttled.rejected)
    );
    // The trace holds 200 successes (every 10th line). A call that reached the dependency
    // answered as its line did (5 ms, no timeout), so the 4 that succeeded are the successes
    // that reached it, and the other 196 were shed: availability the throttle cost, though
    // the breaker refused none of them.
    assert_eq!(throttled.successes_refused, 200 - 4);
    assert_eq!(plain.successes_refused, 0);
}

/// Ten calls 10 ms apart, 5 ms each but for two 300 ms ones (at 10 and 50 ms): the slow tail.
const SLOW_TAIL: &str = r#"{"t_ms": 0, "latency_ms": 5, "outcome": "success"}
{"t_ms": 10, "latency_ms": 300, "outcome": "success"}
{"t_ms": 20, "latency_ms": 5, "outcome": "success"}
{"t_ms": 30, "latency_ms": 5, "outcome": "success"}
{"t_ms": 40, "latency_ms": 5, "outcome": "success"}
{"t_ms": 50, "latency_ms": 300, "outcome": "success"}
{"t_ms": 60, "latency_ms": 5, "outcome": "success"}
{"t_ms": 70, "latency_ms": 5, "outcome": "success"}
{"t_ms": 80, "latency_ms": 5, "outcome": "success"}
{"t_ms": 90, "latency_ms": 5, "outcome": "success"}
"#;

fn hedged(hedge: &str) -> Policy {
    Policy {
        hedge: Some(hedge.parse().unwrap()),
        idempotent: true,
        ..Policy::default()
    }
}

/// Hedging on and off on one trace. Off: eight calls take 5 ms and two 300 ms; the p99 (the
/// 10th of 10 by nearest rank) is 300 ms, the median (the 5th) 5 ms; 10 attempts. On (`after
/// 20ms`): the fast calls answer before their hedge is due and send none. The call at 10 ms
/// hedges at 30 ms; the hedge's answer is the next line's at or after 30 ms, the line at
/// 30 ms (5 ms): it answers at 35 ms, 25 ms after arrival, and the first attempt is dropped.
/// Likewise the call at 50 ms: hedge at 70 ms, the line at 70 ms, done at 75 ms. So p99 25 ms,
/// median 5 ms, 2 hedges, 12 attempts reached the dependency.
#[test]
fn hedging_cuts_the_p99_of_a_slow_tail_as_computed_by_hand() {
    let [off, on] = <[Report; 2]>::try_from(replay(
        SLOW_TAIL,
        &[
            named("off", Policy::default()),
            named("on", hedged("after 20ms")),
        ],
    ))
    .unwrap();
    assert_eq!(
        (off.calls, off.succeeded, off.reached, off.hedges),
        (10, 10, 10, 0)
    );
    assert_eq!((off.p50_ms, off.p99_ms), (Some(5.0), Some(300.0)));
    assert_eq!(
        (on.calls, on.succeeded, on.reached, on.hedges),
        (10, 10, 12, 2)
    );
    assert_eq!((on.p50_ms, on.p99_ms), (Some(5.0), Some(25.0)));
    assert_eq!((on.failures_reached, on.rejected), (0, 0));
}

/// A failed attempt sends the next hedge at once, and the declared order says what the
/// breaker sees. The call at 0 fails (503) at 5 ms.
/// - `breaker > hedge` (the default): the hedge goes out at 5 ms; its answer is the next
///   line's, the success at 10 ms (5 ms): the call succeeds at 10 ms and the breaker sees one
///   success for the group; "1 consecutive" never opens. 3 attempts, 1 hedge, latencies
///   10 ms and 5 ms (median 5, p99 10).
/// - `hedge > breaker`: each attempt has its own permit. The first attempt's failure opens
///   the breaker at 5 ms; the hedge sent then is refused by it; the failure, not the refusal,
///   is the call's result. The call at 10 ms is refused by the open breaker, though its line
///   succeeded; a refused attempt starts no hedge at once (as live: another would be refused
///   too), and with nothing else running the call ends refused. 1 attempt reached, 1 hedge
///   started (refused).
#[test]
fn a_failed_attempt_hedges_at_once_and_the_order_says_what_the_breaker_sees() {
    let trace = r#"{"t_ms": 0, "latency_ms": 5, "outcome": "failure", "status": 503}
{"t_ms": 10, "latency_ms": 5, "outcome": "success"}
"#;
    let policy = |order: Vec<Layer>| Policy {
        breaker: Some("1 consecutive, open 1s".parse().unwrap()),
        order: Some(order),
        ..hedged("after 50ms")
    };
    let [inside, outside] = <[Report; 2]>::try_from(replay(
        trace,
        &[
            named(
                "breaker > hedge",
                policy(vec![Layer::Breaker, Layer::Hedge]),
            ),
            named(
                "hedge > breaker",
                policy(vec![Layer::Hedge, Layer::Breaker]),
            ),
        ],
    ))
    .unwrap();
    assert_eq!(
        (inside.reached, inside.hedges, inside.failures_reached),
        (3, 1, 1)
    );
    assert_eq!((inside.succeeded, inside.failed, inside.opens), (2, 0, 0));
    assert_eq!((inside.p50_ms, inside.p99_ms), (Some(5.0), Some(10.0)));
    assert_eq!((outside.reached, outside.hedges, outside.opens), (1, 1, 1));
    assert_eq!(
        (outside.failed, outside.rejected, outside.succeeded),
        (1, 1, 0)
    );
    assert_eq!(
        (outside.successes_rejected, outside.successes_refused),
        (1, 1)
    );
    assert_eq!(outside.first_open_ms, Some(5.0));
}

/// The rate limit `2/100ms burst 1`: one permit every 50 ms (GCRA), none saved up. Six calls
/// of 5 ms at 0, 10, 20, 60, 100 and 110 ms.
/// - No wait: 0 passes (the next permit at 50), 10 and 20 are refused, 60 passes (next at
///   110), 100 is refused, 110 passes: 3 reached, 3 rejected.
/// - `wait 35ms`: 10 would wait 40 ms, over the bound: refused at once. 20 waits 30 ms, takes
///   the permit at 50 (next at 100) and answers at 55 ms, 35 ms after arrival. 60 would wait
///   40 ms: refused. 100 passes (next at 150); 110 would wait 40: refused. 3 reached, 3
///   rejected, latencies 5, 35, 5: median 5, p99 35.
#[test]
fn the_rate_limit_refuses_and_waits_on_the_replays_clock_as_computed_by_hand() {
    let trace: String = [0, 10, 20, 60, 100, 110]
        .iter()
        .map(|t| format!("{{\"t_ms\": {t}, \"latency_ms\": 5, \"outcome\": \"success\"}}\n"))
        .collect();
    let rate = |r: &str| Policy {
        rate_limit: Some(r.parse().unwrap()),
        ..Policy::default()
    };
    let [refuse, wait] = <[Report; 2]>::try_from(replay(
        &trace,
        &[
            named("refuse", rate("2/100ms burst 1")),
            named("wait", rate("2/100ms burst 1 wait 35ms")),
        ],
    ))
    .unwrap();
    assert_eq!((refuse.calls, refuse.reached, refuse.rejected), (6, 3, 3));
    assert_eq!((refuse.p50_ms, refuse.p99_ms), (Some(5.0), Some(5.0)));
    assert_eq!((wait.calls, wait.reached, wait.rejected), (6, 3, 3));
    assert_eq!((wait.succeeded, wait.successes_rejected), (3, 0));
    // Every line is a success: each refused call is a success refused (10, 20, 100 without
    // the wait; 10, 60, 110 with it), though no breaker refused any.
    assert_eq!(
        (refuse.successes_refused, refuse.successes_rejected),
        (3, 0)
    );
    assert_eq!(wait.successes_refused, 3);
    assert_eq!((wait.p50_ms, wait.p99_ms), (Some(5.0), Some(35.0)));
}

/// The adaptive limit `aimd 1..4 from 2` (AIMD: +1 after a call that ran with at least half
/// the limit in use, ×0.9 rounded down after a failure), on the replayed latencies:
/// - 0 and 10 (100 ms each) take the two slots; 20 finds 2 in flight: refused.
/// - 100: the call at 0 succeeds, having run with 1 in flight (1 × 2 >= 2): limit 3.
/// - 105 (a failure, 100 ms) is admitted (1 in flight < 3), running with 2.
/// - 110: the call at 10 succeeds, having run with 2 (2 × 2 >= 3): limit 4, the ceiling.
/// - 205: the failure: 4 × 0.9 = 3.6, limit 3.
/// - 210, 211, 212 (50 ms) take three slots; 213 finds 3 in flight: refused.
///
/// 8 calls, 2 refused, 6 reached, 1 failure. Without the limit every call reaches it.
#[test]
fn the_adaptive_limit_moves_with_the_replayed_latencies_as_computed_by_hand() {
    let trace = r#"{"t_ms": 0, "latency_ms": 100, "outcome": "success"}
{"t_ms": 10, "latency_ms": 100, "outcome": "success"}
{"t_ms": 20, "latency_ms": 100, "outcome": "success"}
{"t_ms": 105, "latency_ms": 100, "outcome": "failure"}
{"t_ms": 210, "latency_ms": 50, "outcome": "success"}
{"t_ms": 211, "latency_ms": 50, "outcome": "success"}
{"t_ms": 212, "latency_ms": 50, "outcome": "success"}
{"t_ms": 213, "latency_ms": 50, "outcome": "success"}
"#;
    let [plain, limited] = <[Report; 2]>::try_from(replay(
        trace,
        &[
            named("plain", Policy::default()),
            named(
                "adaptive",
                Policy {
                    adaptive: Some("aimd 1..4 from 2".parse().unwrap()),
                    ..Policy::default()
                },
            ),
        ],
    ))
    .unwrap();
    assert_eq!((plain.reached, plain.rejected), (8, 0));
    assert_eq!(
        (limited.calls, limited.reached, limited.rejected),
        (8, 6, 2)
    );
    assert_eq!(
        (limited.failures_reached, limited.succeeded, limited.failed),
        (1, 5, 1)
    );
    // A refusal by the adaptive limit is no breaker's: no success counted as refused by one.
    assert_eq!(limited.successes_rejected, 0);
    // But both refused calls (20 and 213) were successes: availability the limit cost.
    assert_eq!((limited.successes_refused, plain.successes_refused), (2, 0));
}

/// Hedging under a timeout outside it (`timeout > hedge`: one limit for the group, and no
/// hedge at or after it), `2x after 20ms`, on three calls: 200 ms at 0 and 20, 5 ms at 40.
/// - Timeout 50 ms. The call at 0 hedges at 20 ms (the line at 20: 200 ms) and again at 40 ms
///   (the line at 40: 5 ms), which answers at 45 ms; the two slow attempts are dropped before
///   their timeout, so they are no failures. The call at 20 hedges at 40 ms (the line at 40)
///   and answers at 45 ms. 6 attempts, 3 hedges, no failure; latencies 45, 25 and 5 ms.
/// - Timeout 40 ms. The call at 0 hedges at 20 ms; its second hedge would be due at 40 ms, at
///   the limit: none. Both attempts time out at 40 ms: the call fails there, 2 failures. The
///   call at 20 (limit 60 ms) hedges at 40 ms and answers at 45 ms. 5 attempts, 2 hedges;
///   latencies 40, 25 and 5 ms.
#[test]
fn no_hedge_starts_at_the_groups_limit_and_dropped_attempts_are_no_failures() {
    let trace = r#"{"t_ms": 0, "latency_ms": 200, "outcome": "success"}
{"t_ms": 20, "latency_ms": 200, "outcome": "success"}
{"t_ms": 40, "latency_ms": 5, "outcome": "success"}
"#;
    let policy = |timeout: u64| Policy {
        timeout: Some(Duration::from_millis(timeout)),
        order: Some(vec![Layer::Timeout, Layer::Hedge]),
        ..hedged("2x after 20ms")
    };
    let [wide, tight] = <[Report; 2]>::try_from(replay(
        trace,
        &[named("50ms", policy(50)), named("40ms", policy(40))],
    ))
    .unwrap();
    assert_eq!(
        (wide.reached, wide.hedges, wide.failures_reached),
        (6, 3, 0)
    );
    assert_eq!((wide.succeeded, wide.failed), (3, 0));
    assert_eq!((wide.p50_ms, wide.p99_ms), (Some(25.0), Some(45.0)));
    assert_eq!(
        (tight.reached, tight.hedges, tight.failures_reached),
        (5, 2, 2)
    );
    assert_eq!((tight.succeeded, tight.failed), (2, 1));
    assert_eq!((tight.p50_ms, tight.p99_ms), (Some(25.0), Some(40.0)));
}

/// A sweep ranks by the availability every layer costs, not the breaker's alone: on a healthy
/// trace (six successes of 5 ms, at 0, 10, 20, 60, 100 and 110 ms) a rate limit
/// `2/100ms burst 1` refuses 10, 20 and 100 (see the rate limit's test above): 0 failures,
/// 3 successes refused, cost 3. `20/100ms` (a permit every 5 ms, one saved up) and no limit at
/// all refuse none: cost 0. The tight limit, first in grid order, must rank last and be off
/// the Pareto front (beaten on both counts by either other point); the two others tie and are
/// on it, ranked in grid order.
#[test]
fn a_sweep_ranks_a_load_shedding_layers_refused_successes_as_computed_by_hand() {
    let trace: String = [0, 10, 20, 60, 100, 110]
        .iter()
        .map(|t| format!("{{\"t_ms\": {t}, \"latency_ms\": 5, \"outcome\": \"success\"}}\n"))
        .collect();
    let rate = |r: &str| Policy {
        rate_limit: Some(r.parse().unwrap()),
        ..Policy::default()
    };
    let mut reports = replay(
        &trace,
        &[
            named("tight", rate("2/100ms burst 1")),
            named("loose", rate("20/100ms")),
            named("none", Policy::default()),
        ],
    );
    breaker_sim::sweep::rank(&mut reports);
    let got: Vec<_> = reports
        .iter()
        .map(|r| {
            (
                r.policy.as_str(),
                r.failures_reached,
                r.successes_refused,
                r.rank,
                r.pareto,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("loose", 0, 0, Some(1), Some(true)),
            ("none", 0, 0, Some(2), Some(true)),
            ("tight", 0, 3, Some(3), Some(false)),
        ]
    );
    // The breaker's own figure stays the breaker's: none here.
    assert!(reports.iter().all(|r| r.successes_rejected == 0));
}
