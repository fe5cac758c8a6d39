//! Property test: random sequences of admissions, outcomes (success, failure, ignored,
//! cancellation), call durations and clock steps, run against both the real breaker and a
//! plain sequential reference model; state and counts must agree after every step.
//!
//! The model is deliberately naive: a `VecDeque` window recounted from scratch, explicit
//! fields for everything the real breaker packs into atomics. It checks the invariants of
//! CASES.md: probe bound, permit conservation, no dead end, generation tagging, evaluation
//! after every outcome, counters as a pure function of the window, neutral outcomes.

use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, SlidingWindow, SlowCall, State};
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::{Outcome, Permit};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    /// Complete the permit at this index (modulo the number held) with this outcome
    /// (`None` = the caller dropped it).
    Complete(usize, Option<Outcome>),
    Advance(u64),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Acquire),
        4 => (any::<usize>(), prop_oneof![
            3 => Just(Some(Outcome::Success)),
            3 => Just(Some(Outcome::Failure)),
            1 => Just(Some(Outcome::Ignored)),
            1 => Just(None),
        ]).prop_map(|(i, o)| Op::Complete(i, o)),
        2 => (1u64..4_000).prop_map(Op::Advance),
        1 => Just(Op::Reset),
    ]
}

/// Rates that small windows hit exactly, so the `>=` boundary is exercised.
fn percent() -> impl Strategy<Value = f64> {
    prop::sample::select(vec![20.0, 25.0, 50.0, 60.0, 75.0, 100.0])
}

fn policy() -> impl Strategy<Value = BreakerPolicy> {
    (
        prop::option::of(1u32..5),
        prop::option::of(percent()),
        prop::option::of((1u64..3_000, percent())),
        1u32..10,
        1u64..5,
        1u32..4,
        1u32..4,
        prop::option::of(1u64..8),
        prop::bool::ANY,
        prop::bool::ANY,
    )
        .prop_flat_map(
            |(consec, rate, slow, window, cooldown, probes, close, wait, grow, timed)| {
                (1u32..=window).prop_map(move |min_calls| {
                    let mut consec = consec;
                    if consec.is_none() && rate.is_none() && slow.is_none() {
                        consec = Some(3);
                    }
                    let cooldown = Duration::from_secs(cooldown);
                    BreakerPolicy {
                        consecutive_failures: consec,
                        failure_rate_percent: rate,
                        slow_call: slow.map(|(ms, r)| SlowCall {
                            duration: Duration::from_millis(ms),
                            rate_percent: r,
                        }),
                        // A time window of `window` one-second buckets, or the last `window` calls.
                        window: if timed {
                            SlidingWindow::Time {
                                length: Duration::from_secs(u64::from(window)),
                                buckets: window,
                            }
                        } else {
                            SlidingWindow::Count(window)
                        },
                        min_calls,
                        cooldown,
                        cooldown_multiplier: if grow { 2.0 } else { 1.0 },
                        cooldown_max: cooldown * if grow { 4 } else { 1 },
                        cooldown_jitter: 0.0,
                        half_open_probes: probes,
                        successes_to_close: close,
                        max_probe_wait: wait.map(Duration::from_secs),
                        neutral_probe: Default::default(),
                    }
                })
            },
        )
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Closed,
    Probe,
}

#[derive(Debug)]
struct ModelPermit {
    generation: u64,
    kind: Kind,
    start: u64,
}

struct Model {
    p: BreakerPolicy,
    now: u64, // ms
    state: State,
    generation: u64,
    consecutive: u32,
    window: VecDeque<(bool, bool, u64)>,
    open_until: u64,
    in_flight: u32,
    successes: u32,
    streak: u32,
    newest_probe: u64,
    /// When each probe in flight of the current generation was admitted.
    probes: Vec<u64>,
}

impl Model {
    fn new(p: BreakerPolicy) -> Model {
        Model {
            p,
            now: 0,
            state: State::Closed,
            generation: 0,
            consecutive: 0,
            window: VecDeque::new(),
            open_until: 0,
            in_flight: 0,
            successes: 0,
            streak: 0,
            newest_probe: 0,
            probes: Vec::new(),
        }
    }

    fn enter(&mut self, state: State) {
        self.generation += 1;
        self.state = state;
        self.in_flight = 0;
        self.probes.clear();
        self.successes = 0;
        self.consecutive = 0;
        self.window.clear();
    }

    fn open(&mut self) {
        self.streak = if self.state == State::Closed {
            1
        } else {
            self.streak + 1
        };
        self.enter(State::Open);
        self.open_until = self.now + self.p.cooldown_for(self.streak).as_millis() as u64;
    }

    fn probe(&mut self) -> Option<ModelPermit> {
        self.in_flight += 1;
        self.newest_probe = self.now;
        self.probes.push(self.now);
        Some(ModelPermit {
            generation: self.generation,
            kind: Kind::Probe,
            start: self.now,
        })
    }

    fn acquire(&mut self) -> Option<ModelPermit> {
        match self.state {
            State::Closed => Some(ModelPermit {
                generation: self.generation,
                kind: Kind::Closed,
                start: self.now,
            }),
            State::Open if self.now < self.open_until => None,
            State::Open => {
                self.enter(State::HalfOpen);
                self.probe()
            }
            State::HalfOpen if self.in_flight < self.p.half_open_probes => self.probe(),
            // Every slot held and the newest probe outstanding for the probe wait: one more
            // probe in the same half-open period (the held ones still count).
            State::HalfOpen if self.now - self.newest_probe >= self.probe_wait() => self.probe(),
            State::HalfOpen => None,
            _ => unreachable!(),
        }
    }

    fn probe_wait(&self) -> u64 {
        self.p
            .max_probe_wait
            .unwrap_or_else(|| self.p.cooldown_for(self.streak))
            .as_millis() as u64
    }

    /// Probes in flight admitted within the last probe wait.
    fn young_probes(&self) -> u32 {
        let wait = self.probe_wait();
        self.probes.iter().filter(|t| self.now - **t < wait).count() as u32
    }

    fn complete(&mut self, permit: ModelPermit, outcome: Option<Outcome>) {
        let slow = self
            .p
            .slow_call
            .is_some_and(|s| self.now - permit.start >= s.duration.as_millis() as u64);
        match permit.kind {
            Kind::Closed => {
                let failure = match outcome {
                    Some(Outcome::Success) => false,
                    Some(Outcome::Failure) => true,
                    _ => return,
                };
                if self.state != State::Closed || self.generation != permit.generation {
                    return;
                }
                if let Some(t) = self.p.consecutive_failures {
                    self.consecutive = if failure { self.consecutive + 1 } else { 0 };
                    if self.consecutive >= t {
                        self.open();
                        return;
                    }
                }
                if self.p.failure_rate_percent.is_none() && self.p.slow_call.is_none() {
                    return;
                }
                self.window.push_back((failure, slow, self.now / 1000));
                if let SlidingWindow::Count(n) = self.p.window {
                    while self.window.len() > n as usize {
                        self.window.pop_front();
                    }
                }
                let (calls, failures, slows) = self.counts();
                if calls < self.p.min_calls {
                    return;
                }
                let pct = |x: u32| f64::from(x) * 100.0 / f64::from(calls);
                let trip = self
                    .p
                    .failure_rate_percent
                    .is_some_and(|r| pct(failures) >= r)
                    || self
                        .p
                        .slow_call
                        .is_some_and(|s| pct(slows) >= s.rate_percent);
                if trip {
                    self.open();
                }
            }
            Kind::Probe => {
                if self.state != State::HalfOpen || self.generation != permit.generation {
                    return;
                }
                let at = self.probes.iter().position(|t| *t == permit.start);
                self.probes
                    .swap_remove(at.expect("a probe of this generation is booked"));
                match outcome {
                    Some(Outcome::Failure) => self.open(),
                    Some(Outcome::Success) if slow => self.open(),
                    Some(Outcome::Success) => {
                        self.successes += 1;
                        self.in_flight -= 1;
                        if self.successes >= self.p.successes_to_close {
                            self.streak = 0;
                            self.enter(State::Closed);
                        }
                    }
                    _ => self.in_flight -= 1,
                }
            }
        }
    }

    fn counts(&self) -> (u32, u32, u32) {
        let live: Vec<_> = match self.p.window {
            SlidingWindow::Count(_) => self.window.iter().collect(),
            SlidingWindow::Time { buckets, .. } => {
                // One-second buckets: the window holds the buckets (now - buckets, now].
                let index = self.now / 1000;
                let oldest = index.saturating_sub(u64::from(buckets) - 1);
                self.window.iter().filter(|w| w.2 >= oldest).collect()
            }
        };
        let calls = live.len() as u32;
        let failures = live.iter().filter(|w| w.0).count() as u32;
        let slow = live.iter().filter(|w| w.1).count() as u32;
        (calls, failures, slow)
    }
}

fn check(b: &CircuitBreaker, m: &Model, step: usize) -> Result<(), TestCaseError> {
    let s = b.snapshot();
    prop_assert_eq!(s.state, m.state, "state after step {}", step);
    match m.state {
        State::Closed => {
            if m.p.consecutive_failures.is_some() {
                prop_assert_eq!(s.consecutive_failures, m.consecutive, "step {}", step);
            }
            let (calls, failures, slow) = m.counts();
            prop_assert_eq!(
                (s.window.calls, s.window.failures, s.window.slow),
                (calls, failures, slow),
                "window after step {}",
                step
            );
        }
        State::HalfOpen => {
            prop_assert_eq!(s.probes_in_flight, m.in_flight, "step {}", step);
            prop_assert_eq!(s.probe_successes, m.successes, "step {}", step);
            // The probe bound: at most `half_open_probes` probes admitted within the last
            // probe wait (a held probe past the wait lets one more in; its result still counts).
            prop_assert!(
                m.young_probes() <= m.p.half_open_probes,
                "probe bound, step {}",
                step
            );
            prop_assert_eq!(m.probes.len() as u32, m.in_flight);
        }
        State::Open => {
            // No dead end: an open breaker always knows when it will admit a probe.
            prop_assert_eq!(
                s.retry_after,
                Some(Duration::from_millis(m.open_until.saturating_sub(m.now))),
                "step {}",
                step
            );
        }
        _ => unreachable!(),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn breaker_agrees_with_the_reference_model(p in policy(), ops in prop::collection::vec(op(), 1..120)) {
        let time = ManualClock::new();
        let b = CircuitBreaker::builder(p.clone()).clock(Clock::manual(&time)).totals(true).build().unwrap();
        let mut m = Model::new(p);
        let mut held: Vec<(Permit<'_>, ModelPermit)> = Vec::new();
        let mut admitted = 0u64;
        let mut ended = 0u64;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Acquire => {
                    let real = b.try_acquire();
                    let model = m.acquire();
                    prop_assert_eq!(real.is_ok(), model.is_some(), "admission at step {}", step);
                    if let (Ok(r), Some(mp)) = (real, model) {
                        prop_assert_eq!(r.is_probe(), mp.kind == Kind::Probe);
                        admitted += 1;
                        held.push((r, mp));
                    }
                }
                Op::Complete(i, outcome) => {
                    if held.is_empty() { continue; }
                    let (r, mp) = held.remove(i % held.len());
                    match outcome {
                        Some(o) => r.record(o),
                        None => drop(r),
                    }
                    ended += 1;
                    m.complete(mp, outcome);
                }
                Op::Advance(ms) => {
                    m.now += ms;
                    time.advance(Duration::from_millis(ms));
                }
                Op::Reset => {
                    b.reset();
                    m.streak = 0;
                    m.enter(State::Closed);
                }
            }
            check(&b, &m, step)?;
        }
        // Permit conservation: every admitted call ended exactly once.
        let held_count = held.len() as u64;
        drop(held);
        let t = b.snapshot().totals.unwrap();
        prop_assert_eq!(t.admitted, admitted);
        prop_assert_eq!(t.succeeded + t.failed + t.ignored + t.cancelled, ended + held_count);
        let s = b.snapshot();
        if s.state == State::HalfOpen {
            prop_assert_eq!(s.probes_in_flight, 0, "every probe slot returned");
        }
    }
}
