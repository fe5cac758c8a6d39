//! The replay: a trace's calls through one policy, on a virtual clock, with the library's own
//! [`CircuitBreaker`].
//!
//! # Why
//! A model of a breaker answers what the model does. The replay builds the real breaker of the
//! policy, with [`Clock::manual`], and moves the clock from event to event; every admission,
//! rejection and transition is the breaker's own decision, so what the replay reports is what
//! the breaker in production would have done with these calls.
//!
//! # The rules
//! - **Arrival.** Each trace line with `attempt` 1 is a logical call arriving at `t_ms`. The
//!   layers are entered in the policy's order at that instant, as the live pipeline does (the
//!   layers outside retry once per call, those inside it once per attempt, those inside hedge
//!   once per attempt and hedge): a breaker decides
//!   at arrival, a bulkhead takes a slot, a timeout or deadline starts its limit.
//! - **An attempt** that passes every layer *reaches* the dependency. Its answer is the
//!   dependency's behaviour at the attempt's start: for a call's first attempt, its own line;
//!   for a hedge, the next line's (see **Hedging** below); otherwise (a retry, or a `rejected` line, whose outcome says nothing about the
//!   dependency) the **known answer nearest in time** among the lines with one
//!   (`success`, `failure`, `ignored`, `timeout`), the retries of the recording caller
//!   (`attempt > 1`) included: the latest at or before that instant, or the first after it
//!   when that one is nearer and at most [`LOOK_AHEAD`] (1 s) later; on a tie, the earlier
//!   (at one instant, the last in the file); with neither, a success. The answer comes
//!   `latency_ms` later (a `timeout` never comes: the dependency hangs).
//!
//!   Why the nearest and not only the latest before: the lines a recording breaker rejected
//!   have no answer, and while it was open the latest answer before them is as old as the
//!   opening, from the outage. When the replayed breaker's cooldown ends a few milliseconds
//!   before the recorded one did (a live timer fires late), its probe lands on such a line;
//!   the recorded probe a moment later shows the dependency as it then was (a fast `503`, say,
//!   where the outage's start was a hang). Taking the nearest answer keeps the replay of the
//!   recording's own policy on the recorded cycle instead of drifting a timeout per probe.
//! - **Limits.** An attempt ends at the earliest of its answer and its limits (the policy's
//!   timeout from the instant its layer is entered: inside hedge, per attempt and hedge;
//!   inside retry, per attempt; outside retry, and the deadline, from the arrival). An answer due exactly at a limit wins. A limit reached first is a timeout: a
//!   breaker failure. A hang without any limit fails at `t_ms + latency_ms` (where the
//!   trace's knowledge ends).
//! - **Outcomes are recorded when they happen**: at the attempt's end, on the manual clock
//!   set to that instant, so calls overlap in flight, a hanging call's failure arrives only
//!   after its timeout and a slow call is slow, as in production.
//! - **Retry.** After a failed attempt, the retry rules of the pipeline apply: only transient
//!   answers are retried (a failure with no status or a 5xx, 408 or 429 status, and the
//!   timeout layer's own timeouts while the limit outside retry has not passed), at most
//!   `max_attempts` in all and only for a policy declared idempotent; a rejection is never
//!   retried. The next attempt starts after the backoff delay (jitter drawn from a generator
//!   seeded with the replay's seed and the call's index), unless that delay would end past
//!   the limit outside retry. `Retry-After` hints are not in traces.
//! - **Adaptive throttling** (`throttle`) is the library's own `Throttler` on the replay's
//!   clock, its draws seeded with the replay's seed: an attempt it sheds is a local rejection
//!   (the dependency is not reached), and what the dependency answered (not a local refusal, not
//!   a cancellation) goes into its window. So `breaker simulate` compares a policy with and
//!   without throttling on one trace.
//! - **Rate limit** (`rate`) is the library's own `RateLimiter` (GCRA) on the replay's clock:
//!   a call over the rate is a local rejection. With a `max_wait`, the call waits for its
//!   permit's instant when that comes within the wait and before every enclosing limit (the
//!   deadline, a timeout outside the rate layer), and is refused at once otherwise, as the
//!   live layer does; a waiter is not queued, so a call arriving at that instant may take the
//!   permit first, and the waiter then waits again within what is left of its wait. A rate
//!   limit `per key` is replayed as one key's limit: a trace is the calls of one dependency
//!   with no keys in it (as a keyed breaker is replayed as one key's breaker), so record one
//!   key's calls to replay a limit per key.
//! - **Adaptive limit** (`adaptive`) is the library's own `AdaptiveLimiter` on the replay's
//!   clock: a call over the limit is a local rejection; each admitted attempt's end gives the
//!   algorithm its sample (the replayed latency, from its admission to its end, and whether
//!   it failed or timed out), a refusal by a layer inside it and a cancellation none. So the
//!   limit falls and rises with the replayed latencies, as it would have live.
//! - **Hedging** (`hedge`) follows the live hedged call, with the library's own `Hedge` (its
//!   delay, fixed or a percentile of the latencies the replay records in it). The layers
//!   inside the hedge layer run once per *leg* (the first attempt and each hedge), those
//!   between retry and hedge once per attempt. After the delay from the latest leg's start
//!   without an answer, a hedge starts, up to `max_hedges`; a failed leg (a failure answer or
//!   a timeout) starts the next at once, a leg refused by a layer inside hedge does not. The first
//!   acceptable answer (a success, or an answer the classifier ignores) ends the attempt and
//!   the other legs are dropped: their permits are released as cancellations. With no leg
//!   left running, the attempt ends with the last failure (a refusal only when nothing
//!   failed). No hedge starts at or after an enclosing limit.
//!
//!   **A hedge's answer is the next line's**: the dependency's answer to the first line with
//!   a known answer arriving at or after the hedge's start, within [`LOOK_AHEAD`] (with none,
//!   at a gap or the trace's end, the behaviour rule above, which may then be the call's own
//!   line). Why: a hedge is another request, sent at that instant, and the trace's next
//!   request is the closest recorded evidence of how the dependency answered a request sent
//!   then. Not the call's own line (its latency is the bad luck the hedge bets against: a
//!   slow line would make every hedge as slow, and hedging useless by construction), not a
//!   line before the start (a hedge would read the past), and not a draw from recent
//!   latencies (which needs a generator, mixes in answers from before an outage began, and
//!   cannot be checked against the trace by hand): the next line follows the trace through
//!   an outage (a hedge sent into one fails as the recorded calls did) and each hedge's
//!   answer can be pointed at in the file.
//!
//!   A trace recorded through a pipeline with a hedge layer has one line per hedged group
//!   (the group's answer and latency, as retry sees it), not one per hedge: it tells what the
//!   callers got with hedging, so compare hedging on and off on a trace recorded without it.
//! - **Bulkhead.** A full bulkhead rejects at once; waiting for a slot (`max_wait`) is not
//!   replayed.
//! - **Cancelled lines.** A line recorded as `cancelled` is dropped by its caller at
//!   `t_ms + latency_ms`: every permit it holds is released as a cancellation.
//! - **Ties.** Events at the same instant run in this order: trace lines first, in file order,
//!   then the outcomes and retries due, in the order they were scheduled.
//!
//! # What is counted
//! See [`crate::report::Report`]: calls and how they ended, attempts that reached the
//! dependency, failures among them, rejected calls that would have succeeded, and the
//! breaker's transitions, hedges sent, and the median and 99th percentile of the answered
//! calls' latencies.

mod call;

use crate::report::{ms, Counts, Report, Timeline};
use crate::trace::{Call, CallOutcome, Phase};
use breaker_core::adaptive::{AdaptiveLimiter, OwnedAdaptivePermit};
use breaker_core::breaker::{BreakerPolicy, CircuitBreaker, OwnedPermit, State};
use breaker_core::classify::Outcome;
use breaker_core::clock::{Clock, ManualClock};
use breaker_core::hedge::Hedge;
use breaker_core::layer::Layer;
use breaker_core::policy::Policy;
use breaker_core::ratelimit::RateLimiter;
use breaker_core::retry::{Delays, RetryPolicy};
use breaker_core::throttle::{OwnedThrottlePermit, Throttler};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A policy to replay, with the name it is reported under.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedPolicy {
    /// Its name in the config file, or the DSL string as given, or a sweep point's name.
    pub name: String,
    /// The policy.
    pub policy: Policy,
    /// For a sweep point: the swept keys and their values, in the order given.
    pub params: Vec<(String, String)>,
}

impl NamedPolicy {
    /// A policy with only the breaker of `dsl` (`"3 consecutive, open 10s"`), named `dsl`.
    ///
    /// # Errors
    /// The DSL parser's error, naming the bad fragment.
    pub fn from_breaker_dsl(dsl: &str) -> Result<NamedPolicy, breaker_core::dsl::DslError> {
        Ok(NamedPolicy {
            name: dsl.to_owned(),
            policy: Policy {
                breaker: Some(breaker_core::dsl::parse_breaker(dsl)?),
                ..Policy::default()
            },
            params: Vec::new(),
        })
    }
}

/// Options of a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Seeds the retry jitter (with each call's index), so a replay is reproducible.
    pub seed: u64,
    /// Keep the timeline (transitions and calls per time bucket) for a plot.
    pub timeline: bool,
}

/// No limit.
const NEVER: u64 = u64::MAX;

/// How far after an instant the replay looks for the dependency's behaviour there, in trace
/// time (see the module's rules). A second spans a few answers at any rate worth a breaker
/// and keeps the lines held per policy to one second of the trace.
pub const LOOK_AHEAD: Duration = Duration::from_secs(1);

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NEVER)
}

/// A line's answer, when its outcome is known.
fn answer(call: &Call) -> Answer {
    Answer {
        outcome: call.outcome,
        latency_ns: call.latency_ns,
        transient: call.transient,
    }
}

/// Where the breaker's listener puts its transitions (the listener must be `Send + Sync`; the
/// replay is single-threaded, so the flag is all the hot path reads).
#[derive(Default)]
struct Sink {
    pending: AtomicBool,
    list: Mutex<Vec<(u64, State)>>,
}

/// A run of layers: the call's (the layers outside retry, once per call), an attempt's (from
/// retry to hedge, once per attempt) or a leg's (inside hedge: the first attempt of a hedged
/// group and each hedge; without a hedge layer, each attempt has one leg and no layers in it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Call,
    Attempt,
    Leg(u16),
}

/// What an event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The leg in flight ends.
    LegEnd(u16),
    /// The next attempt starts, after its backoff.
    Retry,
    /// The caller drops the call.
    Cancel,
    /// The hedge delay has passed since the leg before this one started: this one starts,
    /// unless another started meanwhile.
    Hedge(u16),
    /// A rate-limit wait is over: the run goes on at the rate layer (its index in the order).
    Resume(Level, u16),
}

/// An event in the queue: ordered by time, then by when it was scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: u64,
    seq: u64,
    slot: u32,
    /// The slot's token when scheduled: a stale event (its call ended) is skipped.
    token: u32,
    /// The call's attempt when scheduled: an event of an attempt that ended is skipped.
    attempt: u32,
    kind: Kind,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Ok,
    /// An answer that is not a success: its breaker outcome and whether it may be retried.
    Error {
        outcome: Outcome,
        transient: bool,
    },
    /// A limit passed first.
    Timeout,
    /// Refused by a breaker (`true`) or another layer (bulkhead, throttle, rate limit,
    /// adaptive limit).
    Rejected(bool),
}

/// The dependency's behaviour at an instant: a known answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Answer {
    outcome: CallOutcome,
    latency_ns: u64,
    transient: bool,
}

const SUCCESS_AT_ONCE: Answer = Answer {
    outcome: CallOutcome::Success,
    latency_ns: 0,
    transient: false,
};

/// What a run of layers holds, and its limits.
struct Held {
    permit: Option<OwnedPermit>,
    bulkhead: bool,
    throttle: Option<OwnedThrottlePermit>,
    adaptive: Option<OwnedAdaptivePermit>,
    /// The earliest limit set in this run (a timeout layer in it; the deadline for the call's
    /// run), `NEVER` for none.
    limit: u64,
    /// When the rate-limit wait in progress in this run began, `NEVER` for none.
    wait_since: u64,
}

impl Held {
    const fn new(limit: u64) -> Held {
        Held {
            permit: None,
            bulkhead: false,
            throttle: None,
            adaptive: None,
            limit,
            wait_since: NEVER,
        }
    }
}

/// A leg: the first attempt of a hedged group, or a hedge.
struct Leg {
    held: Held,
    /// When it started (its hedge delay and its latency are measured from there).
    start: u64,
    /// Still running: entering its layers or waiting for its answer.
    running: bool,
    /// Once it reached the dependency: how it ends.
    ending: Ending,
}

/// A logical call in flight.
struct Slot {
    token: u32,
    arrival: u64,
    index: u64,
    /// Its own line's answer, for its first attempt (`None`: take the dependency's behaviour).
    own: Option<Answer>,
    /// Whether the call would have succeeded (its own answer, or the behaviour at arrival).
    would_succeed: bool,
    call: Held,
    attempt: Held,
    /// Whether an attempt is in progress (not between attempts).
    in_attempt: bool,
    /// The legs of the attempt in progress.
    legs: Vec<Leg>,
    /// The result kept for the hedged group while another leg may still answer.
    kept: Option<Ending>,
    attempts: u32,
    delays: Option<Box<Delays<SmallRng>>>,
}

/// One policy's replay in progress. Feed it calls in arrival order with [`Sim::feed`], then
/// [`Sim::finish`].
pub struct Sim {
    name: String,
    params: Vec<(String, String)>,
    clock: ManualClock,
    breaker: Option<CircuitBreaker>,
    transitions: Arc<Sink>,
    layers: Vec<Layer>,
    outer: usize,
    inner: usize,
    has_retry: bool,
    timeout: Option<u64>,
    deadline: Option<u64>,
    bulkhead: Option<u32>,
    bulkhead_in_use: u32,
    /// The policy's adaptive throttling: the library's own `Throttler`, on the replay's clock,
    /// its draws seeded with the replay's seed.
    throttle: Option<Throttler>,
    /// The policy's rate limit, adaptive limit and hedging: the library's own types, the first
    /// two on the replay's clock.
    rate: Option<RateLimiter>,
    adaptive: Option<AdaptiveLimiter>,
    hedge: Option<Hedge>,
    /// Where the hedge layer is in the order (the order's length without one): the legs'
    /// layers follow it.
    hedge_at: usize,
    max_attempts: u32,
    retry: RetryPolicy,
    seed: u64,
    queue: BinaryHeap<Reverse<Event>>,
    seq: u64,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Lines fed but not replayed yet: the last [`LOOK_AHEAD`] of trace time.
    pending: VecDeque<Call>,
    /// Where the first line with a known answer is in `pending` (its length if none).
    next_known: usize,
    /// The latest line with a known answer replayed, and when it arrived.
    latest: Option<(u64, Answer)>,
    now: u64,
    counts: Counts,
    state: State,
    state_since: u64,
    /// Per phase: the first instant at or after its start when the breaker opened, and when
    /// it was closed.
    first_open: Vec<Option<u64>>,
    first_closed: Vec<Option<u64>>,
    phase: Option<u32>,
    timeline: Option<Timeline>,
}

impl Sim {
    /// A replay of `policy`.
    ///
    /// # Errors
    /// The policy's validation error (`Policy::validate`), as text naming the field.
    pub fn new(policy: &NamedPolicy, options: Options) -> Result<Sim, String> {
        let p = &policy.policy;
        p.validate()
            .map_err(|e| format!("policy `{}`: {e}", policy.name))?;
        let clock = ManualClock::new();
        let transitions: Arc<Sink> = Arc::default();
        let breaker = match &p.breaker {
            None => None,
            Some(b) => Some(build_breaker(b, &clock, &transitions)?),
        };
        let throttle = match p.throttle {
            None => None,
            Some(t) => Some(
                Throttler::with_clock(t, Clock::manual(&clock))
                    .map_err(|e| format!("policy `{}`: {e}", policy.name))?
                    .seeded(options.seed),
            ),
        };
        let err = |e: &dyn std::fmt::Display| format!("policy `{}`: {e}", policy.name);
        let rate = match p.rate_limit {
            None => None,
            Some(r) => {
                Some(RateLimiter::with_clock(r, Clock::manual(&clock)).map_err(|e| err(&e))?)
            }
        };
        let adaptive = match p.adaptive {
            None => None,
            Some(a) => {
                Some(AdaptiveLimiter::with_clock(a, Clock::manual(&clock)).map_err(|e| err(&e))?)
            }
        };
        let hedge = match p.hedge {
            None => None,
            Some(h) => Some(Hedge::new(h).map_err(|e| err(&e))?),
        };
        let layers = p.effective_order();
        let retry_at = layers.iter().position(|l| *l == Layer::Retry);
        let (outer, inner) = match retry_at {
            Some(i) => (i, i + 1),
            None => (0, 0),
        };
        let hedge_at = layers
            .iter()
            .position(|l| *l == Layer::Hedge)
            .unwrap_or(layers.len());
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(NEVER);
        let retry = p.retry.unwrap_or(RetryPolicy::NONE);
        Ok(Sim {
            name: policy.name.clone(),
            params: policy.params.clone(),
            clock,
            breaker,
            transitions,
            layers,
            outer,
            inner,
            has_retry: retry_at.is_some(),
            timeout: p.timeout.map(nanos),
            deadline: p.deadline.map(nanos),
            bulkhead: p.bulkhead.map(|b| b.max_concurrent),
            bulkhead_in_use: 0,
            throttle,
            rate,
            adaptive,
            hedge,
            hedge_at,
            max_attempts: if p.idempotent {
                retry.max_attempts.max(1)
            } else {
                1
            },
            retry,
            seed: options.seed,
            queue: BinaryHeap::new(),
            seq: 0,
            slots: Vec::new(),
            free: Vec::new(),
            pending: VecDeque::new(),
            next_known: 0,
            latest: None,
            now: 0,
            counts: Counts::default(),
            state: State::Closed,
            state_since: 0,
            first_open: Vec::new(),
            first_closed: Vec::new(),
            phase: None,
            timeline: options.timeline.then(Timeline::default),
        })
    }

    /// Replays `calls`, which continue the calls fed so far in arrival order.
    ///
    /// A line is replayed once a line more than [`LOOK_AHEAD`] later is fed (or at
    /// [`finish`](Self::finish)), so that the dependency's behaviour after it is known; the
    /// replay holds that much of the trace, whatever its length.
    pub fn feed(&mut self, calls: &[Call]) {
        let ahead = duration_ns(LOOK_AHEAD);
        for call in calls {
            if self.next_known == self.pending.len() && !call.outcome.is_known() {
                self.next_known += 1;
            }
            self.pending.push_back(*call);
            while let Some(first) = self.pending.front() {
                if call.t_ns.saturating_sub(first.t_ns) <= ahead {
                    break;
                }
                self.replay_next();
            }
        }
    }

    /// Takes the first pending line off, keeping `next_known` on the first known one.
    fn pop_pending(&mut self) {
        self.pending.pop_front();
        if self.next_known > 0 {
            self.next_known -= 1;
        } else {
            // The line taken was the first known one: find the next (each line is passed
            // over once, so feeding stays O(1) per line).
            while self
                .pending
                .get(self.next_known)
                .is_some_and(|c| !c.outcome.is_known())
            {
                self.next_known += 1;
            }
        }
    }

    /// Replays the first pending line at its instant, after the events due before it (which
    /// may read its answer: it stays pending until they have run).
    fn replay_next(&mut self) {
        let Some(&call) = self.pending.front() else {
            return;
        };
        self.run_until(call.t_ns);
        self.pop_pending();
        self.set_now(call.t_ns);
        if call.outcome.is_known() {
            self.latest = Some((call.t_ns, answer(&call)));
        }
        self.line(&call);
    }

    /// The dependency's behaviour now: the known answer nearest in time, among every line
    /// at or before now and those at most [`LOOK_AHEAD`] after (the earlier one on a tie,
    /// the later in the file at one instant); a success at once when there is none.
    fn behaviour(&self) -> Answer {
        let now = self.now;
        // Every pending line is at or after now.
        let after = self
            .pending
            .get(self.next_known)
            .filter(|c| c.t_ns.saturating_sub(now) <= duration_ns(LOOK_AHEAD));
        match (self.latest, after) {
            (Some((tb, b)), Some(a)) => {
                let ta = a.t_ns.saturating_sub(now);
                if ta == 0 || ta < now - tb {
                    answer(a)
                } else {
                    b
                }
            }
            (Some((_, b)), None) => b,
            (None, Some(a)) => answer(a),
            (None, None) => SUCCESS_AT_ONCE,
        }
    }

    /// Runs every event still queued and returns the report; `phases` are the trace's
    /// ([`TraceReader::phases`](crate::trace::TraceReader::phases) once the trace is read).
    pub fn finish(mut self, phases: &[Phase]) -> Report {
        while !self.pending.is_empty() {
            self.replay_next();
        }
        self.run_until(NEVER);
        let end = self.now;
        if self.state == State::Open {
            self.counts.time_open_ns += end - self.state_since;
        }
        let (mut detect_ms, mut recover_ms) = (None, None);
        if let Some(p) = phases.iter().position(Phase::is_outage) {
            let start = phases[p].start_ns;
            detect_ms = self
                .first_open
                .get(p)
                .copied()
                .flatten()
                .map(|t| ms(t - start));
            // The outage lasts while phases are outages (a hang, then fast failures).
            let end = (p..phases.len())
                .find(|&q| !phases[q].is_outage())
                .unwrap_or(phases.len());
            if let Some(next) = phases.get(end) {
                recover_ms = self
                    .first_closed
                    .get(end)
                    .copied()
                    .flatten()
                    .map(|t| ms(t - next.start_ns));
            }
        }
        if let Some(t) = &mut self.timeline {
            t.transitions.push((end, self.state));
            t.end_ns = end;
            t.phases = phases.to_vec();
        }
        Report::new(
            self.name,
            self.params,
            self.counts,
            detect_ms,
            recover_ms,
            self.timeline,
        )
    }

    fn set_now(&mut self, t: u64) {
        if t != self.now {
            self.now = t;
            self.clock.set(Duration::from_nanos(t));
        }
    }

    /// Runs the events due before `t` (trace lines at `t` come first).
    fn run_until(&mut self, t: u64) {
        while let Some(&Reverse(e)) = self.queue.peek() {
            if e.at >= t && t != NEVER {
                break;
            }
            self.queue.pop();
            if !self.live(&e) {
                continue;
            }
            self.set_now(e.at);
            match e.kind {
                Kind::LegEnd(leg) => self.leg_end(e.slot, leg),
                Kind::Retry => self.start_attempt(e.slot),
                Kind::Cancel => self.cancel(e.slot),
                Kind::Hedge(leg) => self.start_leg(e.slot, leg),
                Kind::Resume(level, at) => self.proceed(e.slot, level, usize::from(at)),
            }
        }
    }

    fn schedule(&mut self, at: u64, slot: u32, kind: Kind) {
        self.seq += 1;
        let s = &self.slots[slot as usize];
        self.queue.push(Reverse(Event {
            at,
            seq: self.seq,
            slot,
            token: s.token,
            attempt: s.attempts,
            kind,
        }));
    }

    /// Whether an event still applies: its call, attempt and leg are the ones it was
    /// scheduled for.
    fn live(&self, e: &Event) -> bool {
        let s = &self.slots[e.slot as usize];
        if s.token != e.token {
            return false;
        }
        let this_attempt = s.in_attempt && s.attempts == e.attempt;
        match e.kind {
            Kind::Retry | Kind::Cancel | Kind::Resume(Level::Call, _) => true,
            Kind::Resume(Level::Attempt, _) => this_attempt,
            Kind::LegEnd(leg) | Kind::Resume(Level::Leg(leg), _) => {
                this_attempt && s.legs.get(usize::from(leg)).is_some_and(|l| l.running)
            }
            Kind::Hedge(leg) => this_attempt && s.legs.len() == usize::from(leg),
        }
    }

    /// Applies the transitions the breaker made since the last look.
    #[inline]
    fn transitions(&mut self) {
        if !self.transitions.pending.swap(false, Ordering::Relaxed) {
            return;
        }
        let list: Vec<_> = std::mem::take(
            &mut *self
                .transitions
                .list
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for (at, to) in list {
            if self.state == State::Open {
                self.counts.time_open_ns += at.saturating_sub(self.state_since);
            }
            match to {
                State::Open => {
                    self.counts.opens += 1;
                    self.counts.first_open_ns.get_or_insert(at);
                    mark(&mut self.first_open, self.phase, at);
                }
                State::HalfOpen => self.counts.half_opens += 1,
                State::Closed => {
                    self.counts.closes += 1;
                    mark(&mut self.first_closed, self.phase, at);
                }
                _ => {}
            }
            self.state = to;
            self.state_since = at;
            if let Some(t) = &mut self.timeline {
                t.transitions.push((at, to));
            }
        }
    }

    /// A trace line at the current instant.
    fn line(&mut self, call: &Call) {
        if self.phase != Some(call.phase) {
            self.phase = Some(call.phase);
            let p = call.phase as usize;
            if self.first_open.len() <= p {
                self.first_open.resize(p + 1, None);
                self.first_closed.resize(p + 1, None);
            }
            if self.state == State::Closed && self.first_closed[p].is_none() {
                self.first_closed[p] = Some(self.now);
            }
        }
        let known = call.outcome.is_known().then(|| answer(call));
        if call.attempt > 1 {
            return;
        }
        let index = self.counts.calls;
        self.counts.calls += 1;
        // A cancelled line: the dependency had not answered when the caller dropped the call.
        let own = match call.outcome {
            CallOutcome::Cancelled => Some(Answer {
                outcome: CallOutcome::Timeout,
                latency_ns: call.latency_ns,
                transient: true,
            }),
            _ => known,
        };
        let would_succeed = own.unwrap_or_else(|| self.behaviour()).outcome == CallOutcome::Success;
        if let Some(t) = &mut self.timeline {
            t.reserve(self.now);
        }
        let deadline = self.deadline.map_or(NEVER, |d| self.now.saturating_add(d));
        let slot = self.alloc(Slot {
            token: 0,
            arrival: self.now,
            index,
            own,
            would_succeed,
            call: Held::new(deadline),
            attempt: Held::new(NEVER),
            in_attempt: false,
            legs: Vec::new(),
            kept: None,
            attempts: 0,
            delays: None,
        });
        if call.outcome == CallOutcome::Cancelled {
            self.schedule(self.now.saturating_add(call.latency_ns), slot, Kind::Cancel);
        }
        // The layers outside retry, once per call.
        self.proceed(slot, Level::Call, 0);
    }
}

/// Sets `at` as the first instant for every phase up to `current` that has none yet.
fn mark(marks: &mut [Option<u64>], current: Option<u32>, at: u64) {
    let Some(c) = current else { return };
    for m in marks.iter_mut().take(c as usize + 1).rev() {
        if m.is_some() {
            break;
        }
        *m = Some(at);
    }
}

fn build_breaker(
    policy: &BreakerPolicy,
    clock: &ManualClock,
    transitions: &Arc<Sink>,
) -> Result<CircuitBreaker, String> {
    let sink = Arc::clone(transitions);
    CircuitBreaker::builder(policy.clone())
        .clock(Clock::manual(clock))
        .totals(false)
        .on_transition(move |t| {
            let at = u64::try_from(t.at.as_nanos()).unwrap_or(u64::MAX);
            sink.list
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((at, t.to));
            sink.pending.store(true, Ordering::Relaxed);
        })
        .build()
        .map_err(|e| e.to_string())
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
