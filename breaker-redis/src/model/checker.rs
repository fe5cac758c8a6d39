//! The model checker: N replicas of one shared breaker and the store, explored exhaustively
//! (breadth first, every interleaving of every enabled action, states deduplicated by a 64-bit
//! fingerprint) to a bounded depth.
//!
//! # What is real and what is modelled
//! - **Real**: every fleet decision is `plan.rs`'s (`reconcile`, `plan_acquire`,
//!   `plan_end`, `plan_trip`, `plan_rate`), every breaker decision the core's
//!   (`decide::admit_open`, `free_slot`, `admit_half_open`, `end_probe`, `trip`, `force`,
//!   `rate_trip`), and the store is the reference store ([`RefStore`], `store.lua`
//!   transliterated and cross-checked against `redis-server` in `cross_check.rs`), driven with
//!   the arguments `protocol/client.rs` builds.
//! - **Modelled** (kept step for step with the code it names, which the fleet may change):
//!   the coordinator's glue (`store/ops.rs`: `flush`, `trip`, `acquire_job`, `end_job`,
//!   `absorb`, `done`, `cas_done`, `retry`, `cas_failed`, `nonce_answered`, `reconcile_all`;
//!   `store/coordinator.rs`: the lease request nonce of `launch_cas` and `nonce_for`, the health
//!   and epoch bookkeeping) and the fleet hook (`fleet/hook.rs`,
//!   `fleet/mod.rs`: `admit_probe`, `end_probe`, `local_trip`, `adopt`, `grant_probes`,
//!   `local_now`), and the local breaker's machine (`machine.rs`: the word and its one stamp,
//!   the consecutive-failure rule, a count of the closed period's calls for the rate rule).
//!
//! One clock: the store's and the replicas' (ticks are milliseconds), so a replica's estimate
//! of the server's clock is exact and `valid_until` is `now + op_timeout`. The store's own
//! health breaker opens at the first failed operation (`store_failures = 1`) and allows a
//! retry one tick later. Mode `local` (`OnStoreError::Local`). Quorum 1. One breaker.
//!
//! # Actions
//! A call on a replica (its outcome: the dependency's health), the end of a running probe, a
//! flush, the store running a replica's next request (its reply delivered later, or lost),
//! a reply delivered, an operation timing out at the client (its request may still run later:
//! delayed execution), a published transition delivered or lost, time advancing one tick, the
//! dependency's health flipping, the store crashing (its connections fail), restarting empty,
//! or losing its data while up (`FLUSHALL`, a failover to a replica that had none). Faults and
//! ticks have budgets ([`Bounds`]).
//!
//! # Properties
//! - **Probe cap**: at every state, the probes running under an unexpired lease of the store
//!   (leases expire on the store's clock: a lease's expiry is the fleet's takeover, as the
//!   probe wait is the local one) number at most `cap` per store incarnation whose leases are
//!   still unexpired: at most `cap` with no store loss in the last lease period, and `cap` more
//!   per loss within it (the store-loss bound: a store that lost its leases grants `cap` new
//!   ones while the old ones' probes still run, until they expire). Probes admitted by the
//!   local rules while the store is unreachable (mode `local`) are at most `half_open_probes`
//!   per replica within a probe wait (the local breaker's own bound), so at most `N x cap`
//!   across the fleet while it lasts.
//! - **No late effect**: no `cas` applies after its client gave up on it (timed out).
//! - **Replies pass the client's checks** (`protocol::parse::check`).
//! - **No dead end**: from every state reached, with the dependency healthy and no more faults,
//!   a fair schedule (everything in flight delivered, every replica flushing and calling, its
//!   probes succeeding, time passing) brings every replica and the store to closed, agreeing.
//! - **Agreement within one flush interval**: from every state where every fault has ended
//!   (the store up, no reply lost in flight, no failure still on its way back, no request
//!   queued that will run past its `valid_until`, every replica's health breaker allowing a
//!   retry),
//!   once everything in flight is delivered and each replica has flushed once, every replica
//!   decides with the fleet: its view is of the store's generation, and its local breaker
//!   decides as the store's word does (closed admits and counts; open and half-open reject
//!   every call but probes holding a fleet lease; forced the same).
//! - **No lease held by nobody**, checked with agreement: no unexpired lease of the store's
//!   half-open word that no replica holds (no probe runs under it, no grant waits to be used),
//!   but for one the hook dropped at its own deadline (the request's time plus the lease:
//!   earlier than the store's expiry by the request's delay), and but for one granted to a
//!   replica's pending request nonce while that replica runs a probe by the local rules (its
//!   request got no answer, so it was degraded: the lease is its own, and its next lease request
//!   gets it back, its next compare-and-set releases it). A lease whose reply was lost or came
//!   after the timeout costs at most one retry (the request nonce, fleet@5d9d401; finding F5
//!   before it; checked with a lease long enough to outlive the timeout).

use super::store::{RefStore, APPLIED, BAD, EARLY, EXPIRED, MISSING, STALE, V};
use crate::names::{BreakerId, Namespace};
use crate::plan::{self, LocalNow, Reconcile, View, Write};
use crate::protocol::{reason_code, reason_of, wire_word, MAX_LEASES_PER_GRANT};
use breaker_core::breaker::decide::{self, Admit, Limits, ProbeEnd, Step, Word};
use breaker_core::breaker::{BreakerPolicy, State, TransitionReason, WindowCounts};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

/// The model's parameters, in ticks (ms).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Replicas.
    pub(crate) replicas: usize,
    /// Half-open probes (the fleet's cap).
    pub(crate) cap: u32,
    /// The cooldown (no growth, no jitter), and the probe wait and lease (`max_probe_wait`
    /// unset: the cooldown).
    pub(crate) cooldown: i64,
    /// The operation timeout.
    pub(crate) op_timeout: i64,
    /// The breaker's own rules trip it (a consecutive failure); `false`: only the fleet's
    /// rate rule does (the local window never reaches `min_calls`).
    pub(crate) local_trips: bool,
    /// The rate rule's `min_calls` (failure rate 50 %).
    pub(crate) min_calls: u32,
    /// Successful probes to close (`successes_to_close`).
    pub(crate) successes: u32,
}

/// How far the exploration goes.
#[derive(Clone, Debug)]
pub(crate) struct Bounds {
    pub(crate) depth: usize,
    /// The latest tick.
    pub(crate) max_time: i64,
    /// Store crashes (each followed by a restart, empty) and data losses while up.
    pub(crate) losses: u8,
    /// Replies lost.
    pub(crate) lost_replies: u8,
    /// Published transitions lost.
    pub(crate) lost_pushes: u8,
    /// Flips of the dependency's health.
    pub(crate) flips: u8,
    /// Requests in flight per replica.
    pub(crate) queue: usize,
    /// Calls per replica.
    pub(crate) calls: u8,
}

const NS: &str = "m";
const NAME: &str = "b";
const FP: &str = "0123456789abcdef";
const TTL: i64 = 100_000;
const WINDOW: i64 = 100_000;

fn policy(c: &Config) -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: c.local_trips.then_some(1),
        failure_rate_percent: Some(50.0),
        min_calls: c.min_calls,
        half_open_probes: c.cap,
        successes_to_close: c.successes,
        ..BreakerPolicy::default()
    }
}

fn keys() -> Vec<String> {
    let ns = Namespace::new(NS).unwrap();
    let k = ns.keys();
    let b = ns.breaker_keys(&BreakerId::new(NAME).unwrap());
    vec![k.replicas, k.version, b.state, b.window, b.leases, b.votes]
}

fn channel() -> String {
    Namespace::new(NS).unwrap().keys().channel
}

/// A `Write` in a hashable form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct W {
    expect: Option<u64>,
    next: u64,
    reason: u8,
    cooldown: Option<u64>,
}

impl W {
    fn of(w: Write) -> W {
        W {
            expect: w.expect.map(Word::encode),
            next: w.next.encode(),
            reason: reason_code(w.reason),
            cooldown: w.cooldown_ms,
        }
    }

    fn write(self) -> Write {
        Write {
            expect: self.expect.map(Word::decode),
            next: Word::decode(self.next),
            reason: reason_of(self.reason).unwrap(),
            cooldown_ms: self.cooldown,
        }
    }
}

/// A `View` in a hashable form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Vw {
    word: u64,
    deadline: i64,
    known: bool,
    /// The store's time of the newest answer the view was taken from.
    seen: i64,
}

impl Vw {
    const INITIAL: Vw = Vw {
        word: 0,
        deadline: 0,
        known: false,
        seen: 0,
    };

    fn view(self) -> View {
        View {
            word: Word::decode(self.word),
            deadline_ms: self.deadline as u64,
            known: self.known,
            seen_ms: self.seen as u64,
        }
    }

    fn word(self) -> Word {
        Word::decode(self.word)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Lease {
    member: String,
    epoch: String,
    generation: u32,
    /// On the store's clock.
    expiry: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum End {
    Success,
    Failure,
    Neutral,
}

impl End {
    fn probe_end(self) -> ProbeEnd {
        match self {
            End::Success => ProbeEnd::Success,
            End::Failure => ProbeEnd::Failure,
            End::Neutral => ProbeEnd::Neutral,
        }
    }
}

/// What a `cas` job is (`CasKind`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Trip,
    Acquire,
    End { lease: Lease, end: End },
    Reconcile,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Job {
    write: W,
    not_before: i64,
    join: bool,
    want: u32,
    release: Option<String>,
    /// The lease request nonce it carries (set when it is sent: `nonce_for`).
    nonce: Option<u64>,
    kind: Kind,
    tries: u8,
}

/// An operation in flight (`What`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum What {
    /// A flush: counts added (successes, failures) under a word, or a read.
    Flush {
        add: Option<(u64, u64, u64, bool)>,
        after_fault: bool,
    },
    Read {
        after_fault: bool,
    },
    Cas(Vec<Job>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Pending {
    id: u32,
    what: What,
    sent: i64,
}

/// A request on its way to the store, or queued there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Req {
    id: u32,
    op: &'static str,
    args: Vec<String>,
}

/// A reply on its way back (`None`: the connection failed).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Resp {
    id: u32,
    reply: Option<V>,
}

/// A running probe.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Probe {
    /// The local generation it was admitted in.
    generation: u32,
    /// Its fleet lease (`None`: a local probe, the store degraded).
    lease: Option<Lease>,
    admitted: i64,
}

/// One replica: its local breaker, its fleet hook and its coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Rep {
    // The local breaker.
    word: u64,
    /// Open: the deadline; half-open: the newest probe's admission; else the entry.
    at: i64,
    /// The closed period's calls and failures (the local window), of generation `period`.
    period: u32,
    calls: u32,
    failures: u32,
    /// The fleet counts not yet taken (successes, failures).
    counts: (u64, u64),
    probes: Vec<Probe>,
    made: u8,
    // The hook (`Core` / `Fleet`).
    hview: Vw,
    leases: Vec<(Lease, i64)>,
    requested: bool,
    requested_at: i64,
    retry_at: Option<(u32, i64)>,
    told: u32,
    trip_reason: u8,
    degraded: bool,
    // The coordinator.
    view: Vw,
    epoch: Option<String>,
    fresh: bool,
    flushing: bool,
    carry: (u64, u64),
    unsent: Option<u8>,
    /// The reconciliation after a fault failed: read every breaker again at the next flush.
    reconcile_again: bool,
    /// The breaker's pending lease request nonce (`Entry::nonce`): one whose request got no
    /// answer yet; the next lease request re-sends it, any other compare-and-set releases it.
    nonce: Option<u64>,
    /// Lease requests carrying `nonce` in flight (`Entry::acquiring`).
    acquiring: u32,
    /// The last nonce drawn (`Coordinator::next_nonce`; the real one starts at random, so a
    /// restarted process reuses none: the model restarts no replica).
    next_nonce: u64,
    /// The store's health breaker: no operation before this tick (`None`: closed).
    blocked_until: Option<i64>,
    pending: Vec<Pending>,
    /// Requests sent, not yet run (FIFO: one connection).
    queue: VecDeque<Req>,
    /// Replies on their way back.
    inbox: VecDeque<Resp>,
    /// Published transitions on their way (the push connection).
    pushes: VecDeque<String>,
}

impl Rep {
    fn new() -> Rep {
        Rep {
            word: 0,
            at: 0,
            period: 0,
            calls: 0,
            failures: 0,
            counts: (0, 0),
            probes: Vec::new(),
            made: 0,
            hview: Vw::INITIAL,
            leases: Vec::new(),
            requested: false,
            requested_at: 0,
            retry_at: None,
            told: 0,
            trip_reason: reason_code(TransitionReason::FailureRate),
            degraded: false,
            view: Vw::INITIAL,
            epoch: None,
            fresh: true,
            flushing: false,
            carry: (0, 0),
            unsent: None,
            reconcile_again: false,
            nonce: None,
            acquiring: 0,
            next_nonce: 0,
            blocked_until: None,
            pending: Vec::new(),
            queue: VecDeque::new(),
            inbox: VecDeque::new(),
            pushes: VecDeque::new(),
        }
    }

    fn local(&self) -> Word {
        Word::decode(self.word)
    }
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct World {
    now: i64,
    healthy: bool,
    /// `None`: down.
    store: Option<RefStore>,
    epochs: u32,
    next_id: u32,
    reps: Vec<Rep>,
    /// When the store lost its data (crash or flush): for the store-loss bound.
    losses: Vec<i64>,
    budget: (u8, u8, u8, u8),
    /// Time does not pass this tick (set when an exploration starts).
    horizon: i64,
    /// A property broken inside a step (a late effect, a reply the client refuses).
    broken: Option<String>,
    /// Acquire replies lost (for coverage).
    lost_acquires: u8,
    /// Leases their holder dropped at its own deadline (the request's time plus the lease),
    /// before the store's expiry.
    dropped: Vec<String>,
}

/// An action of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    Call(usize),
    EndProbe(usize, usize),
    Flush(usize),
    Run(usize),
    RunLoseReply(usize),
    Deliver(usize),
    Timeout(usize),
    Push(usize),
    LosePush(usize),
    Tick,
    Flip,
    Crash,
    Restart,
    LoseData,
}

/// The checker: the model's constants and the real decisions' inputs.
pub(crate) struct Model {
    pub(crate) c: Config,
    pub(crate) b: Bounds,
    policy: BreakerPolicy,
    keys: Vec<String>,
    channel: String,
    /// Whether a late effect breaks a property.
    pub(crate) late_effects: bool,
    /// Whether a lease nobody holds, once the faults ended and a flush interval passed,
    /// breaks a property (the request nonce: a lost acquire reply costs at most one retry).
    pub(crate) orphan_leases: bool,
}

fn decode(v: &V) -> (i64, String, Vec<Item>) {
    let l = v.list();
    let now = l[1].int();
    let epoch = l[2].str().to_owned();
    let items = l[5..].iter().map(|it| Item::of(it, &epoch, now)).collect();
    (now, epoch, items)
}

/// One item of a reply, decoded as the client decodes it.
#[derive(Clone, Debug)]
struct Item {
    code: i64,
    stored: Option<(Word, i64)>,
    extra: Vec<V>,
    leases: Vec<Lease>,
    bad: Option<String>,
}

impl Item {
    fn of(v: &V, epoch: &str, now: i64) -> Item {
        let l = v.list();
        let code = l[0].int();
        let w = l[1].str();
        let mut bad = None;
        let stored = (!w.is_empty()).then(|| {
            let raw: u64 = w.parse().unwrap();
            let word = Word {
                in_flight: l[2].int() as u32,
                ..Word::decode(raw)
            };
            let dl = l[3].int();
            if (raw >> 16) & 0xffff != 0 || (word.state == State::Open) != (dl > 0) {
                bad = Some(format!(
                    "a stored word the client refuses: {word:?}, deadline {dl}"
                ));
            }
            (word, dl)
        });
        let extra = l[7..].to_vec();
        let mut leases = Vec::new();
        if code == APPLIED && extra.len() >= 2 && matches!(extra[0], V::Str(_)) {
            let expiry = extra.last().unwrap().int();
            if expiry <= now {
                bad = Some(format!("a lease expiring at {expiry}, now {now}"));
            }
            let generation = stored.map_or(0, |(w, _)| w.generation);
            for m in &extra[..extra.len() - 1] {
                leases.push(Lease {
                    member: m.str().to_owned(),
                    epoch: epoch.to_owned(),
                    generation,
                    expiry,
                });
            }
        }
        Item {
            code,
            stored,
            extra,
            leases,
            bad,
        }
    }

    fn tells(&self) -> bool {
        !matches!(self.code, EXPIRED | BAD)
    }
}

fn without_probes(w: Word) -> Word {
    Word { in_flight: 0, ..w }
}

impl Model {
    pub(crate) fn new(c: Config, b: Bounds) -> Model {
        Model {
            policy: policy(&c),
            c,
            b,
            keys: keys(),
            channel: channel(),
            late_effects: true,
            orphan_leases: true,
        }
    }

    pub(crate) fn init(&self) -> World {
        World {
            now: 1,
            healthy: false,
            store: Some(RefStore::new()),
            epochs: 0,
            next_id: 0,
            reps: (0..self.c.replicas).map(|_| Rep::new()).collect(),
            losses: Vec::new(),
            budget: (
                self.b.losses,
                self.b.lost_replies,
                self.b.lost_pushes,
                self.b.flips,
            ),
            horizon: i64::MAX,
            broken: None,
            lost_acquires: 0,
            dropped: Vec::new(),
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            half_open_probes: self.c.cap,
            successes_to_close: self.c.successes,
            probe_wait: self.c.cooldown as u64,
        }
    }

    fn cooldown_ms(&self) -> impl Fn(u32) -> u64 {
        let c = self.c.cooldown as u64;
        move |_| c
    }

    // --- The local breaker (`machine.rs`) --------------------------------------------------

    /// A transition of the local breaker into `next`, decided here (`entered`): its stamp; a
    /// local trip is told to the hook (`local_trip`).
    fn entered(&self, w: &mut World, r: usize, from: Word, next: Word, reason: TransitionReason) {
        self.entered_with(w, r, from, next, reason, None);
    }

    /// `entered`; `remote`: a transition decided elsewhere, with its deadline when open.
    fn entered_with(
        &self,
        w: &mut World,
        r: usize,
        from: Word,
        next: Word,
        reason: TransitionReason,
        remote: Option<i64>,
    ) {
        let now = w.now;
        let rep = &mut w.reps[r];
        rep.word = next.encode();
        rep.at = match next.state {
            State::Open => remote.unwrap_or(now + self.c.cooldown),
            _ => now,
        };
        if from.state == State::Closed && next.state == State::Open && remote.is_none() {
            // `FleetHook::local_trip`.
            rep.trip_reason = reason_code(reason);
            self.trip(w, r, reason);
        }
    }

    /// `apply_remote`: the local breaker forced to `to`; the local generation entered.
    fn apply_remote(&self, w: &mut World, r: usize, to: &Vw) -> u32 {
        let view = to.word();
        let from = w.reps[r].local();
        let f = decide::force(
            from,
            view.state,
            TransitionReason::Manual,
            Some(view.streak),
        );
        // The deadline on the store's clock, which is this replica's (one clock); a deadline
        // passed is now.
        let until = to.deadline.max(w.now);
        self.entered_with(w, r, from, f.next, TransitionReason::Manual, Some(until));
        f.next.generation
    }

    /// A call on replica `r` (its outcome: the dependency's health).
    fn call(&self, w: &mut World, r: usize) {
        w.reps[r].made += 1;
        let now = w.now;
        let word = w.reps[r].local();
        let admit = match word.state {
            State::Closed => Admit::Closed,
            State::Open => decide::admit_open(word, w.reps[r].at as u64, now as u64),
            State::HalfOpen => {
                decide::admit_half_open(word, w.reps[r].at as u64, now as u64, &self.limits())
            }
            _ => return,
        };
        match admit {
            Admit::Closed => self.finish_closed(w, r, word.generation),
            Admit::Unrecorded | Admit::Reject { .. } => {}
            Admit::Probe { next, entered } => {
                match entered {
                    Some(reason) => self.entered(w, r, word, next, reason),
                    None => {
                        w.reps[r].word = next.encode();
                        w.reps[r].at = now;
                    }
                }
                // `fleet_probe`: the hook decides.
                match self.admit_probe(w, r) {
                    Some(lease) => w.reps[r].probes.push(Probe {
                        generation: next.generation,
                        lease,
                        admitted: now,
                    }),
                    None => {
                        // Rejected: the local slot released as a cancellation.
                        self.local_probe_end(w, r, next.generation, End::Neutral);
                    }
                }
            }
        }
    }

    /// A closed call's end (`finish_closed` and `fleet_finish`).
    fn finish_closed(&self, w: &mut World, r: usize, generation: u32) {
        let failed = !w.healthy;
        let rep = &mut w.reps[r];
        if rep.period != generation {
            rep.period = generation;
            rep.calls = 0;
            rep.failures = 0;
        }
        rep.calls += 1;
        rep.failures += u32::from(failed);
        let word = rep.local();
        let counts = WindowCounts {
            calls: rep.calls,
            failures: rep.failures,
            slow: 0,
        };
        let reason = if failed && self.c.local_trips {
            Some(TransitionReason::ConsecutiveFailures)
        } else if self.c.local_trips {
            decide::rate_trip(&self.policy, counts)
        } else {
            None
        };
        if let Some(reason) = reason {
            if let Step::Enter(next, reason) = decide::trip(word, generation, reason) {
                self.entered(w, r, word, next, reason);
            }
        }
        let rep = &mut w.reps[r];
        if failed {
            rep.counts.1 += 1;
        } else {
            rep.counts.0 += 1;
        }
    }

    /// The local `end_probe` of a probe of `generation`.
    fn local_probe_end(&self, w: &mut World, r: usize, generation: u32, end: End) {
        let word = w.reps[r].local();
        match decide::end_probe(word, generation, end.probe_end(), &self.limits()) {
            Step::Stale => {}
            Step::Update(next) => w.reps[r].word = next.encode(),
            Step::Enter(next, reason) => self.entered(w, r, word, next, reason),
        }
    }

    /// Probe `i` of replica `r` ends (`finish_probe`): the hook's `end_probe` first, then the
    /// local word.
    fn end_probe(&self, w: &mut World, r: usize, i: usize) {
        let p = w.reps[r].probes.remove(i);
        let end = if w.healthy {
            End::Success
        } else {
            End::Failure
        };
        if let Some(lease) = p.lease.clone() {
            // `link.end_probe` -> `Urgent::End` -> `end_job`.
            if let Some(job) = self.end_job(w, r, None, lease, end, 0) {
                self.launch_cas(w, r, vec![job]);
            }
        }
        self.local_probe_end(w, r, p.generation, end);
    }

    // --- The hook (`fleet/hook.rs`, `fleet/mod.rs`) -------------------------------------------

    /// `admit_probe`: `Some(Some(lease))` leased, `Some(None)` local, `None` rejected.
    fn admit_probe(&self, w: &mut World, r: usize) -> Option<Option<Lease>> {
        let now = w.now;
        if w.reps[r].degraded {
            return Some(None);
        }
        let rep = &mut w.reps[r];
        let generation = rep.hview.word().generation;
        // The hook's own deadline for a grant is the request's time plus the lease (no server
        // clock): earlier than the store's expiry by the request's delay (retries included).
        // A lease dropped by it is not one nobody holds (see `orphan_lease`).
        for (l, until) in &rep.leases {
            if l.generation == generation && now >= *until {
                w.dropped.push(l.member.clone());
            }
        }
        let rep = &mut w.reps[r];
        rep.leases
            .retain(|(l, until)| l.generation == generation && now < *until);
        if let Some((lease, _)) = rep.leases.pop() {
            return Some(Some(lease));
        }
        let waiting = rep
            .retry_at
            .is_some_and(|(g, at)| g == generation && now < at);
        if !rep.requested && !waiting {
            rep.requested = true;
            rep.requested_at = now;
            // `request_probes` -> `Urgent::Acquire` -> `urgent`.
            if !self.ready(w, r) {
                self.grant_unavailable(w, r);
            } else {
                match self.acquire_job(w, r, 0) {
                    Some(job) => self.launch_cas(w, r, vec![job]),
                    None => self.grant_denied(w, r, 0),
                }
            }
        }
        None
    }

    /// `adopt`.
    fn adopt(&self, w: &mut World, r: usize, view: Vw, apply: bool) {
        let rep = &mut w.reps[r];
        let new_period = !rep.hview.known || rep.hview.word().generation != view.word().generation;
        let first = !rep.hview.known;
        rep.hview = view;
        if new_period {
            let g = view.word().generation;
            rep.leases.retain(|(l, _)| l.generation == g);
            if !matches!(view.word().state, State::HalfOpen | State::Open) {
                rep.requested = false;
            }
            // Counts the local breaker recorded closed go to the closed period the store
            // holds: on the first answer, and when the fleet is closed again while the local
            // breaker already is; others belong to a period that ended.
            let keep =
                view.word().state == State::Closed && (first || rep.local().state == State::Closed);
            if !keep {
                rep.counts = (0, 0);
            }
        }
        if !apply {
            // A look that finds the local breaker where the store is: it has not moved on its
            // own since (reconciliation stops looking at what it did alone).
            let local = rep.local();
            if local.state == view.word().state {
                rep.told = local.generation;
            }
            return;
        }
        let local = rep.local();
        let told = if local.state == view.word().state {
            local.generation
        } else {
            self.apply_remote(w, r, &view)
        };
        w.reps[r].told = told;
    }

    fn grant_leases(&self, w: &mut World, r: usize, leases: Vec<Lease>) {
        let rep = &mut w.reps[r];
        rep.requested = false;
        let generation = rep.hview.word().generation;
        let until = rep.requested_at + self.c.cooldown;
        rep.leases.extend(
            leases
                .into_iter()
                .filter(|l| l.generation == generation)
                .map(|l| (l, until)),
        );
    }

    fn grant_denied(&self, w: &mut World, r: usize, retry_ms: i64) {
        let now = w.now;
        let rep = &mut w.reps[r];
        rep.requested = false;
        let view = rep.hview;
        let wait = if retry_ms > 0 {
            retry_ms
        } else if view.word().state == State::HalfOpen {
            self.c.cooldown
        } else {
            1
        };
        rep.retry_at = Some((view.word().generation, now + wait));
        if view.word().state == State::Closed && rep.local().state != State::Closed {
            let told = self.apply_remote(w, r, &view);
            w.reps[r].told = told;
        }
    }

    fn grant_unavailable(&self, w: &mut World, r: usize) {
        w.reps[r].requested = false;
    }

    /// `local_now`.
    fn local_now(&self, w: &World, r: usize) -> LocalNow {
        let rep = &w.reps[r];
        let word = rep.local();
        LocalNow {
            state: word.state,
            streak: word.streak,
            cooldown_left_ms: if word.state == State::Open {
                (rep.at - w.now).max(0) as u64
            } else {
                0
            },
            moved: word.generation != rep.told,
            trip_reason: reason_of(rep.trip_reason).unwrap(),
        }
    }

    // --- The coordinator (`store/ops.rs`, `store/coordinator.rs`) ------------------------------

    fn ready(&self, w: &World, r: usize) -> bool {
        w.reps[r].blocked_until.map_or(true, |t| w.now >= t)
    }

    fn header(&self, w: &World, r: usize) -> Vec<String> {
        vec![
            format!("r{r}"),
            self.channel.clone(),
            (w.now + self.c.op_timeout).to_string(),
            "3".into(),
            TTL.to_string(),
            "1".into(),
        ]
    }

    fn send(&self, w: &mut World, r: usize, what: What, op: &'static str, item: Vec<String>) {
        let mut args = self.header(w, r);
        args.push(NAME.into());
        args.extend(item);
        let id = w.next_id;
        w.next_id += 1;
        let sent = w.now;
        let rep = &mut w.reps[r];
        rep.pending.push(Pending { id, what, sent });
        rep.queue.push_back(Req { id, op, args });
    }

    /// `launch_cas`: each job carries its nonce (`nonce_for`), then the items are sent in one
    /// call.
    fn launch_cas(&self, w: &mut World, r: usize, mut jobs: Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        assert_eq!(jobs.len(), 1, "one breaker: one job a call");
        for j in &mut jobs {
            j.nonce = self.nonce_for(w, r, j);
        }
        let j = &jobs[0];
        let write = j.write.write();
        let is_transition = write
            .expect
            .map_or(true, |e| e.generation != write.next.generation);
        let item = vec![
            write.expect.map(wire_word).unwrap_or_default(),
            wire_word(write.next),
            u8::from(is_transition).to_string(),
            u8::from(j.join).to_string(),
            j.not_before.to_string(),
            write.cooldown_ms.map(|c| c.to_string()).unwrap_or_default(),
            j.want.min(MAX_LEASES_PER_GRANT).to_string(),
            self.c.cap.to_string(),
            self.c.cooldown.max(1).to_string(),
            j.release.clone().unwrap_or_default(),
            reason_code(write.reason).to_string(),
            FP.into(),
            TTL.to_string(),
            j.nonce.map(|n| n.to_string()).unwrap_or_default(),
        ];
        self.send(w, r, What::Cas(jobs), "cas", item);
    }

    /// `nonce_for`: a lease request carries the breaker's pending nonce, or a fresh one that
    /// stays pending until an answer; any other compare-and-set wanting no lease carries the
    /// pending nonce (releasing its leases) while no lease request carrying it is in flight.
    fn nonce_for(&self, w: &mut World, r: usize, j: &Job) -> Option<u64> {
        let rep = &mut w.reps[r];
        match j.kind {
            Kind::Acquire => {
                rep.acquiring += 1;
                Some(*rep.nonce.get_or_insert_with(|| {
                    rep.next_nonce += 1;
                    rep.next_nonce
                }))
            }
            _ if j.want == 0 && rep.acquiring == 0 => rep.nonce,
            _ => None,
        }
    }

    /// `nonce_answered`: job `job` was answered `code`; its nonce is no longer pending once its
    /// leases are known (a lease request applied, or the store lost the breaker) or released (a
    /// compare-and-set wanting none, whatever the compare's outcome).
    fn nonce_answered(&self, w: &mut World, r: usize, job: &Job, code: i64) {
        let Some(n) = job.nonce else {
            return;
        };
        let settled = if job.want == 0 {
            !matches!(code, BAD | EXPIRED)
        } else {
            matches!(code, APPLIED | MISSING)
        };
        let rep = &mut w.reps[r];
        if settled && rep.nonce == Some(n) && (job.want > 0 || rep.acquiring == 0) {
            rep.nonce = None;
        }
    }

    fn launch_read(&self, w: &mut World, r: usize, after_fault: bool) {
        self.send(w, r, What::Read { after_fault }, "read", Vec::new());
    }

    /// `flush`.
    fn flush(&self, w: &mut World, r: usize) {
        let fresh = std::mem::take(&mut w.reps[r].fresh);
        if !self.ready(w, r) {
            let rep = &mut w.reps[r];
            rep.counts = (0, 0);
            rep.carry = (0, 0);
            return;
        }
        if w.reps[r].degraded {
            let rep = &mut w.reps[r];
            rep.counts = (0, 0);
            rep.carry = (0, 0);
            w.reps[r].flushing = true;
            self.send(
                w,
                r,
                What::Flush {
                    add: None,
                    after_fault: true,
                },
                "read",
                Vec::new(),
            );
            return;
        }
        if let Some(reason) = w.reps[r].unsent.take() {
            self.trip(w, r, reason_of(reason).unwrap());
        }
        if std::mem::take(&mut w.reps[r].reconcile_again) {
            self.reconcile_all(w, r);
        }
        let rep = &mut w.reps[r];
        let d = (rep.counts.0 + rep.carry.0, rep.counts.1 + rep.carry.1);
        rep.counts = (0, 0);
        rep.carry = (0, 0);
        let closed = rep.view.word().state == State::Closed;
        let view = rep.view;
        if d != (0, 0) && closed {
            w.reps[r].flushing = true;
            let item = vec![
                wire_word(view.word()),
                u8::from(!view.known).to_string(),
                d.0.to_string(),
                d.1.to_string(),
                "0".into(),
                WINDOW.to_string(),
                "1".into(),
                TTL.to_string(),
            ];
            self.send(
                w,
                r,
                What::Flush {
                    add: Some((d.0, d.1, view.word, !view.known)),
                    after_fault: false,
                },
                "add",
                item,
            );
        } else if !closed || fresh {
            w.reps[r].flushing = true;
            self.send(
                w,
                r,
                What::Flush {
                    add: None,
                    after_fault: false,
                },
                "read",
                Vec::new(),
            );
        }
    }

    /// `trip`.
    fn trip(&self, w: &mut World, r: usize, reason: TransitionReason) {
        if !self.ready(w, r) {
            if !w.reps[r].degraded {
                w.reps[r].unsent = Some(reason_code(reason));
            }
            return;
        }
        let view = w.reps[r].view.view();
        let Some(mut write) = plan::plan_trip(view.word, reason, self.cooldown_ms()) else {
            return;
        };
        write.expect = view.expect();
        self.launch_cas(
            w,
            r,
            vec![Job {
                write: W::of(write),
                not_before: 0,
                join: false,
                want: 0,
                release: None,
                nonce: None,
                kind: Kind::Trip,
                tries: 0,
            }],
        );
    }

    /// `acquire_job`.
    fn acquire_job(&self, w: &World, r: usize, tries: u8) -> Option<Job> {
        let ask = plan::plan_acquire(&w.reps[r].view.view(), self.c.cap)?;
        Some(Job {
            write: W::of(ask.write),
            not_before: ask.not_before as i64,
            join: ask.join,
            want: ask.want,
            release: None,
            nonce: None,
            kind: Kind::Acquire,
            tries,
        })
    }

    /// `end_job`.
    fn end_job(
        &self,
        w: &World,
        r: usize,
        won: Option<Word>,
        lease: Lease,
        end: End,
        tries: u8,
    ) -> Option<Job> {
        let rep = &w.reps[r];
        if !self.ready(w, r) {
            return None;
        }
        if rep.epoch.as_deref() != Some(&*lease.epoch) {
            return None;
        }
        let known = rep.view.known;
        let word = won.unwrap_or(rep.view.word());
        let mut write = plan::plan_end(
            word,
            lease.generation,
            end.probe_end(),
            &self.policy,
            self.cooldown_ms(),
        )?;
        write.expect = known.then_some(word);
        Some(Job {
            write: W::of(write),
            not_before: 0,
            join: false,
            want: 0,
            release: Some(lease.member.clone()),
            nonce: None,
            kind: Kind::End { lease, end },
            tries,
        })
    }

    /// `absorb`.
    fn absorb(
        &self,
        w: &mut World,
        r: usize,
        stored: Option<(Word, i64)>,
        server_now: i64,
        after_fault: bool,
    ) {
        let local = self.local_now(w, r);
        let passed = stored.is_some_and(|(_, dl)| dl <= server_now);
        let view = w.reps[r].view.view();
        let decision = plan::reconcile(
            stored.as_ref().map(|(s, _)| s),
            server_now as u64,
            passed,
            &view,
            &local,
            after_fault,
        );
        let seen = view.seen_ms.max(server_now as u64) as i64;
        let as_view = |(s, dl): (Word, i64)| Vw {
            word: s.encode(),
            deadline: dl,
            known: true,
            seen,
        };
        match decision {
            Reconcile::Adopt | Reconcile::Keep => {
                let Some(s) = stored else {
                    return;
                };
                w.reps[r].view = as_view(s);
                self.adopt(w, r, as_view(s), decision == Reconcile::Adopt);
            }
            Reconcile::Write(write) => {
                if self.ready(w, r) {
                    self.launch_cas(
                        w,
                        r,
                        vec![Job {
                            write: W::of(write),
                            not_before: 0,
                            join: false,
                            want: 0,
                            release: None,
                            nonce: None,
                            kind: Kind::Reconcile,
                            tries: 0,
                        }],
                    );
                }
            }
            Reconcile::Trip => {
                if let Some(s) = stored {
                    w.reps[r].view = as_view(s);
                }
                self.trip(w, r, local.trip_reason);
            }
            Reconcile::Ignore => {}
        }
    }

    fn observe_epoch(&self, w: &mut World, r: usize, epoch: &str) -> bool {
        if epoch.is_empty() {
            return false;
        }
        let rep = &mut w.reps[r];
        match &rep.epoch {
            Some(e) if e == epoch => false,
            known => {
                let changed = known.is_some();
                rep.epoch = Some(epoch.to_owned());
                changed
            }
        }
    }

    fn reconcile_all(&self, w: &mut World, r: usize) {
        if self.ready(w, r) {
            self.launch_read(w, r, true);
        }
    }

    fn record_success(&self, w: &mut World, r: usize, reconcile: bool) {
        let rep = &mut w.reps[r];
        rep.blocked_until = None;
        if rep.degraded {
            rep.degraded = false;
            if reconcile {
                self.reconcile_all(w, r);
            }
        }
    }

    fn record_failure(&self, w: &mut World, r: usize) {
        let now = w.now;
        let rep = &mut w.reps[r];
        rep.blocked_until = Some(now + 1);
        rep.degraded = true;
    }

    /// `done`: operation `p` answered `reply` (`None`: failed or timed out).
    fn done(&self, w: &mut World, r: usize, p: Pending, reply: Option<&V>) {
        let reconciling = matches!(
            p.what,
            What::Read { after_fault: true }
                | What::Flush {
                    after_fault: true,
                    ..
                }
        );
        // A call the store ran after its `valid_until` is a failed operation (the store was
        // slower than the timeout), as its timeout would have been (F3, fixed).
        let decoded = reply
            .map(decode)
            .filter(|(_, _, items)| !items.iter().all(|it| it.code == EXPIRED));
        if decoded.is_some() {
            self.record_success(w, r, !reconciling);
        }
        if let Some((_, epoch, _)) = &decoded {
            if self.observe_epoch(w, r, epoch) && !reconciling {
                self.reconcile_all(w, r);
            }
        }
        match p.what {
            What::Flush { add, after_fault } => {
                w.reps[r].flushing = false;
                if let Some((now, _, items)) = &decoded {
                    let it = &items[0];
                    if let (Some(d), MISSING) = (add, it.code) {
                        w.reps[r].carry = (d.0, d.1);
                    }
                    if it.tells() {
                        self.absorb(w, r, it.stored, *now, after_fault);
                    }
                    if add.is_some() && it.code == APPLIED {
                        self.rate(w, r, it);
                    }
                }
            }
            What::Read { after_fault } => {
                if let Some((now, _, items)) = &decoded {
                    if items[0].tells() {
                        self.absorb(w, r, items[0].stored, *now, after_fault);
                    }
                }
            }
            What::Cas(jobs) => self.cas_done(w, r, jobs, decoded.as_ref()),
        }
        if decoded.is_none() {
            if reconciling {
                // The reconciliation after a fault did not answer: read everything again.
                w.reps[r].reconcile_again = true;
            }
            self.record_failure(w, r);
        }
    }

    /// `rate`: the fleet window's totals, the core's rate rules.
    fn rate(&self, w: &mut World, r: usize, it: &Item) {
        let Some((word, _)) = it.stored else { return };
        let totals = WindowCounts {
            calls: (it.extra[0].int() + it.extra[1].int()) as u32,
            failures: it.extra[1].int() as u32,
            slow: it.extra[2].int() as u32,
        };
        let Some(write) = plan::plan_rate(word, totals, &self.policy, self.cooldown_ms()) else {
            return;
        };
        if self.ready(w, r) {
            self.launch_cas(
                w,
                r,
                vec![Job {
                    write: W::of(write),
                    not_before: 0,
                    join: false,
                    want: 0,
                    release: None,
                    nonce: None,
                    kind: Kind::Trip,
                    tries: 0,
                }],
            );
        }
    }

    /// `cas_done`.
    fn cas_done(
        &self,
        w: &mut World,
        r: usize,
        jobs: Vec<Job>,
        reply: Option<&(i64, String, Vec<Item>)>,
    ) {
        let mut again = Vec::new();
        for (i, job) in jobs.into_iter().enumerate() {
            if job.kind == Kind::Acquire && job.nonce.is_some() {
                w.reps[r].acquiring -= 1;
            }
            let Some((now, _, items)) = reply else {
                self.cas_failed(w, r, job);
                continue;
            };
            let it = &items[i];
            self.check_cas(w, &job, it);
            self.nonce_answered(w, r, &job, it.code);
            if it.tells() {
                self.absorb(w, r, it.stored, *now, false);
            }
            match it.code {
                APPLIED => self.cas_applied(w, r, job, it),
                STALE | MISSING if job.tries + 1 < 3 => {
                    if let Some(next) = self.retry(w, r, job, it.stored.map(|(s, _)| s)) {
                        again.push(next);
                    }
                }
                EARLY => {
                    if job.kind == Kind::Acquire {
                        let retry_ms = (job.not_before - now).max(1);
                        self.grant_denied(w, r, retry_ms);
                    }
                }
                _ => self.cas_failed(w, r, job),
            }
        }
        if !again.is_empty() && self.ready(w, r) {
            self.launch_cas(w, r, again);
        }
    }

    /// The client's reply check (`check::cas`): a refused reply is an error there.
    fn check_cas(&self, w: &mut World, job: &Job, it: &Item) {
        if let Some(bad) = &it.bad {
            w.broken.get_or_insert_with(|| bad.clone());
        }
        let write = job.write.write();
        let have = it.stored.map(|(s, _)| without_probes(s));
        let expected = write.expect.map(without_probes);
        let next = Some(without_probes(write.next));
        let ok = match it.code {
            APPLIED => have == next && it.leases.len() <= job.want as usize,
            STALE => have.is_some() && have != expected,
            MISSING => have.is_none() && expected.is_some(),
            EARLY => have == expected || (job.join && have == next),
            _ => true,
        };
        if !ok {
            w.broken
                .get_or_insert_with(|| format!("a reply the client refuses: {it:?} to {job:?}"));
        }
    }

    fn cas_applied(&self, w: &mut World, r: usize, job: Job, it: &Item) {
        if job.kind == Kind::Acquire {
            if it.leases.is_empty() {
                self.grant_denied(w, r, 0);
            } else {
                self.grant_leases(w, r, it.leases.clone());
            }
        }
    }

    fn retry(&self, w: &mut World, r: usize, job: Job, won: Option<Word>) -> Option<Job> {
        let tries = job.tries + 1;
        match job.kind {
            Kind::Acquire => {
                let next = self.acquire_job(w, r, tries);
                if next.is_none() {
                    self.grant_denied(w, r, 0);
                }
                next
            }
            Kind::End { lease, end } => self.end_job(w, r, won, lease, end, tries),
            // A trip that lost to a write of the same closed period trips the word that won (F2,
            // fixed); a trip of a period that has ended is late.
            Kind::Trip => {
                let write = plan::plan_retrip(&job.write.write(), won?, self.cooldown_ms())?;
                Some(Job {
                    write: W::of(write),
                    tries,
                    ..job
                })
            }
            Kind::Reconcile => None,
        }
    }

    fn cas_failed(&self, w: &mut World, r: usize, job: Job) {
        match job.kind {
            Kind::Acquire => self.grant_unavailable(w, r),
            Kind::Trip => {
                let reason = w.reps[r].trip_reason;
                if !w.reps[r].degraded {
                    w.reps[r].unsent = Some(reason);
                }
            }
            Kind::End { .. } | Kind::Reconcile => {}
        }
    }

    /// A published transition reaches replica `r` (`push`).
    fn push(&self, w: &mut World, r: usize, payload: &str) {
        let msg = crate::protocol::parse_published(payload.as_bytes())
            .unwrap_or_else(|| panic!("the client refuses a published message: {payload}"));
        if self.observe_epoch(w, r, &msg.epoch) {
            self.reconcile_all(w, r);
        }
        let stored = Some((msg.stored.word, msg.stored.deadline_ms as i64));
        self.absorb(w, r, stored, msg.server_now_ms as i64, false);
    }

    // --- The store and the network ------------------------------------------------------------

    /// The store runs replica `r`'s next request; its reply is queued (or lost).
    fn run(&self, w: &mut World, r: usize, lose: bool) {
        let req = w.reps[r].queue.pop_front().unwrap();
        let now = w.now;
        let reply = match &mut w.store {
            None => None,
            Some(store) => {
                let token = format!("e{}", w.epochs + 1);
                let mut published = Vec::new();
                let v = store
                    .call(req.op, &self.keys, &req.args, now, &token, &mut published)
                    .expect("the model's calls are well formed");
                if v.list()[2].str() == token {
                    w.epochs += 1;
                }
                // No late effect: a compare-and-set applied after its client gave up.
                let abandoned = !w.reps[r].pending.iter().any(|p| p.id == req.id);
                let applied = v.list()[5].list()[0].int() == APPLIED;
                if abandoned && applied && req.op == "cas" && self.late_effects {
                    w.broken.get_or_insert_with(|| {
                        format!(
                            "late effect: replica {r}'s cas applied at {now} after it timed out \
                             (valid until {})",
                            req.args[2]
                        )
                    });
                }
                for p in published {
                    for rep in &mut w.reps {
                        rep.pushes.push_back(p.payload.clone());
                    }
                }
                Some(v)
            }
        };
        if !lose {
            w.reps[r].inbox.push_back(Resp { id: req.id, reply });
        }
    }

    fn deliver(&self, w: &mut World, r: usize) {
        let resp = w.reps[r].inbox.pop_front().unwrap();
        let Some(at) = w.reps[r].pending.iter().position(|p| p.id == resp.id) else {
            return; // the client gave up on it
        };
        let p = w.reps[r].pending.remove(at);
        self.done(w, r, p, resp.reply.as_ref());
    }

    fn timeout(&self, w: &mut World, r: usize) {
        let p = w.reps[r].pending.remove(0);
        self.done(w, r, p, None);
    }

    /// Whether `a` is enabled in `w` (within the bounds).
    fn enabled(&self, w: &World, a: Action) -> bool {
        let b = &self.b;
        match a {
            Action::Call(r) => {
                let rep = &w.reps[r];
                // (A prefix, replayed before the exploration's horizon is set, has no bound.)
                (w.horizon == i64::MAX || rep.made < b.calls) && rep.queue.len() < b.queue
            }
            Action::EndProbe(r, i) => i < w.reps[r].probes.len(),
            Action::Flush(r) => !w.reps[r].flushing && w.reps[r].queue.len() < b.queue,
            Action::Run(r) => !w.reps[r].queue.is_empty(),
            Action::RunLoseReply(r) => !w.reps[r].queue.is_empty() && w.budget.1 > 0,
            Action::Deliver(r) => !w.reps[r].inbox.is_empty(),
            Action::Timeout(r) => w.reps[r]
                .pending
                .first()
                .is_some_and(|p| w.now >= p.sent + self.c.op_timeout),
            Action::Push(r) => !w.reps[r].pushes.is_empty(),
            Action::LosePush(r) => !w.reps[r].pushes.is_empty() && w.budget.2 > 0,
            // Time does not pass an operation's timeout: it fires (or the reply arrives) first.
            Action::Tick => {
                w.now < w.horizon
                    && w.reps.iter().all(|r| {
                        r.pending
                            .first()
                            .map_or(true, |p| w.now < p.sent + self.c.op_timeout)
                    })
            }
            Action::Flip => w.budget.3 > 0,
            Action::Crash => w.store.is_some() && w.budget.0 > 0,
            Action::Restart => w.store.is_none(),
            Action::LoseData => w.store.is_some() && w.budget.0 > 0,
        }
    }

    /// Every action that may be enabled.
    fn actions(&self, w: &World) -> Vec<Action> {
        let mut out = Vec::new();
        for r in 0..w.reps.len() {
            out.push(Action::Call(r));
            for i in 0..w.reps[r].probes.len() {
                out.push(Action::EndProbe(r, i));
            }
            out.extend([
                Action::Flush(r),
                Action::Run(r),
                Action::RunLoseReply(r),
                Action::Deliver(r),
                Action::Timeout(r),
                Action::Push(r),
                Action::LosePush(r),
            ]);
        }
        out.extend([
            Action::Tick,
            Action::Flip,
            Action::Crash,
            Action::Restart,
            Action::LoseData,
        ]);
        out.retain(|a| self.enabled(w, *a));
        out
    }

    /// Applies `a` (enabled) to `w`.
    pub(crate) fn step(&self, w: &mut World, a: Action) {
        match a {
            Action::Call(r) => self.call(w, r),
            Action::EndProbe(r, i) => self.end_probe(w, r, i),
            Action::Flush(r) => self.flush(w, r),
            Action::Run(r) => self.run(w, r, false),
            Action::RunLoseReply(r) => {
                w.budget.1 -= 1;
                let id = w.reps[r].queue[0].id;
                let acquire = w.reps[r].pending.iter().any(|p| {
                    p.id == id
                        && matches!(&p.what, What::Cas(jobs) if jobs.iter().any(|j| j.kind == Kind::Acquire))
                });
                w.lost_acquires += u8::from(acquire);
                self.run(w, r, true);
            }
            Action::Deliver(r) => self.deliver(w, r),
            Action::Timeout(r) => self.timeout(w, r),
            Action::Push(r) => {
                let p = w.reps[r].pushes.pop_front().unwrap();
                self.push(w, r, &p);
            }
            Action::LosePush(r) => {
                w.budget.2 -= 1;
                w.reps[r].pushes.pop_front();
            }
            Action::Tick => {
                w.now += 1;
                if let Some(s) = &mut w.store {
                    s.keys.expire_all(w.now);
                }
            }
            Action::Flip => {
                w.budget.3 -= 1;
                w.healthy = !w.healthy;
            }
            Action::Crash => {
                w.budget.0 -= 1;
                w.store = None;
                w.losses.push(w.now);
                // Every connection fails: what was queued is gone, what is pending fails.
                for r in 0..w.reps.len() {
                    w.reps[r].queue.clear();
                    w.reps[r].inbox.clear();
                    while !w.reps[r].pending.is_empty() {
                        let p = w.reps[r].pending.remove(0);
                        self.done(w, r, p, None);
                    }
                }
            }
            Action::Restart => w.store = Some(RefStore::new()),
            Action::LoseData => {
                w.budget.0 -= 1;
                w.store = Some(RefStore::new());
                w.losses.push(w.now);
            }
        }
    }

    // --- Properties ---------------------------------------------------------------------------

    /// The probe cap with its store-loss bound, and the local probes' own bound; `None` holds.
    fn cap_violation(&self, w: &World) -> Option<String> {
        let l = self.c.cooldown;
        let cap = self.c.cap as usize;
        let young: Vec<&Probe> = w
            .reps
            .iter()
            .flat_map(|r| &r.probes)
            .filter(|p| p.lease.as_ref().is_some_and(|l| w.now < l.expiry))
            .collect();
        let recent_losses = w.losses.iter().filter(|t| w.now - **t < l).count();
        if young.len() > cap * (1 + recent_losses) {
            return Some(format!(
                "{} probes run under unexpired leases (cap {cap}, {recent_losses} store losses \
                 within the lease)",
                young.len()
            ));
        }
        for (r, rep) in w.reps.iter().enumerate() {
            let local = rep
                .probes
                .iter()
                .filter(|p| p.lease.is_none() && w.now - p.admitted < l)
                .count();
            if local > cap {
                return Some(format!("replica {r} runs {local} local probes"));
            }
        }
        None
    }

    /// Drives `w` without faults until nothing is in flight (replies, pushes, requests), at
    /// most `limit` steps; whether it got there.
    fn settle(&self, w: &mut World, limit: usize) -> bool {
        for _ in 0..limit {
            let mut moved = false;
            for r in 0..w.reps.len() {
                if !w.reps[r].queue.is_empty() {
                    self.run(w, r, false);
                    moved = true;
                } else if !w.reps[r].inbox.is_empty() {
                    self.deliver(w, r);
                    moved = true;
                } else if !w.reps[r].pushes.is_empty() {
                    let p = w.reps[r].pushes.pop_front().unwrap();
                    self.push(w, r, &p);
                    moved = true;
                }
            }
            if !moved {
                return true;
            }
        }
        false
    }

    /// Whether replica `r` decides with the fleet: its view is the store's word's generation, and
    /// its local breaker decides as the store's word does (closed admits; open and half-open
    /// reject all but leased probes).
    fn agrees(&self, w: &World, r: usize) -> Result<(), String> {
        let rep = &w.reps[r];
        let store = w.store.as_ref().expect("up");
        let k = &self.keys;
        let stored = store
            .keys
            .peek(&k[2], "w", w.now)
            .map(|s| Word::decode(s.parse().unwrap()));
        let dl: i64 = store
            .keys
            .peek(&k[2], "dl", w.now)
            .map_or(0, |s| s.parse().unwrap());
        let local = rep.local();
        let Some(s) = stored else {
            // No word: a breaker never written, or one the store lost while closed and that
            // nothing has written since (its first write seeds or creates it): closed.
            return if local.state == State::Closed && rep.view.word().state == State::Closed {
                Ok(())
            } else {
                Err(format!(
                    "replica {r}: the store holds no word, the local breaker is {:?}, its view \
                     {:?}",
                    local.state,
                    rep.view.word()
                ))
            };
        };
        let view = rep.view.word();
        // The same decisions: closed admits (and counts), open and half-open reject but for
        // probes with a fleet lease (a local half-open probe needs one), forced the same.
        let class = |s: State| match s {
            State::HalfOpen => State::Open,
            s => s,
        };
        let same_state = class(local.state) == class(s.state);
        if view.generation != s.generation || !same_state {
            return Err(format!(
                "replica {r}: store {:?} (deadline {dl}), view {:?}, local {:?} (at {}), now {}",
                s, view, local, rep.at, w.now
            ));
        }
        Ok(())
    }

    /// Whether every fault's effect has been seen at `w`: the store up, no reply lost in
    /// flight, no failure still on its way back, no request queued that will run past its
    /// `valid_until`, every replica's health breaker allowing a retry.
    pub(crate) fn faults_ended(&self, w: &World) -> bool {
        w.store.is_some()
            && w.reps.iter().enumerate().all(|(r, rep)| {
                self.ready(w, r)
                    // No failure still to be seen: a failed call, or one the store ran too
                    // late.
                    && rep.inbox.iter().all(|q| {
                        q.reply
                            .as_ref()
                            .is_some_and(|v| decode(v).2.iter().all(|it| it.code != EXPIRED))
                    })
                    // No request the store will run too late (a delay still felt; expired
                    // from its `valid_until` on).
                    && rep
                        .queue
                        .iter()
                        .all(|q| q.args[2].parse::<i64>().unwrap() > w.now)
                    && rep.pending.iter().all(|p| {
                        rep.queue.iter().any(|q| q.id == p.id)
                            || rep.inbox.iter().any(|q| q.id == p.id)
                    })
            })
    }

    /// Agreement within one flush interval, from `w` if every fault has ended there.
    fn agreement_violation(&self, w: &World) -> Option<String> {
        if !self.faults_ended(w) {
            return None;
        }
        let mut w = w.clone();
        if !self.settle(&mut w, 200) {
            return Some("no quiescence".into());
        }
        // One flush interval: time passes (an interval is at least a tick, so every answer
        // from now on is newer than every view: `reconcile` ignores an answer no newer than
        // the view, which may have arrived out of order), each replica serves a call (a
        // replica with no traffic decides nothing) and flushes.
        w.now += 1;
        for r in 0..w.reps.len() {
            self.call(&mut w, r);
            if !self.settle(&mut w, 200) {
                return Some("no quiescence".into());
            }
        }
        for r in 0..w.reps.len() {
            if !w.reps[r].flushing {
                self.flush(&mut w, r);
            }
            if !self.settle(&mut w, 200) {
                return Some("no quiescence".into());
            }
        }
        if let Some(v) = (0..w.reps.len()).find_map(|r| self.agrees(&w, r).err()) {
            return Some(v);
        }
        if self.orphan_leases {
            return self.orphan_lease(&w);
        }
        None
    }

    /// A lease of the store's half-open word, unexpired, that no replica holds (no probe runs
    /// under it, no grant waits to be used): it takes a slot of the cap from every replica
    /// until it expires.
    fn orphan_lease(&self, w: &World) -> Option<String> {
        let mut store = w.store.clone()?;
        let word = store
            .keys
            .peek(&self.keys[2], "w", w.now)
            .map(|s| Word::decode(s.parse().unwrap()))?;
        if word.state != State::HalfOpen {
            return None;
        }
        let held = |m: &str| {
            w.dropped.iter().any(|d| d == m)
                || w.reps.iter().enumerate().any(|(r, rep)| {
                    rep.leases.iter().any(|(l, _)| l.member == m)
                        || rep
                            .probes
                            .iter()
                            .any(|p| p.lease.as_ref().is_some_and(|l| l.member == m))
                        // Its pending nonce's, while it runs a probe by the local rules.
                        || (rep.probes.iter().any(|p| p.lease.is_none())
                            && pending_nonce_lease(r, rep, m))
                })
        };
        store
            .keys
            .members(&self.keys[4], w.now)
            .into_iter()
            .find(|(m, expiry)| *expiry > w.now && !held(m))
            .map(|(m, expiry)| {
                format!(
                    "the store's half-open generation {} holds lease {m} (expiry {expiry}, now \
                     {}) that no replica holds",
                    word.generation, w.now
                )
            })
    }

    /// No dead end: the fair schedule with a healthy dependency and no faults reaches every
    /// replica closed and agreeing with a closed store.
    fn dead_end(&self, w: &World) -> Option<String> {
        let mut w = w.clone();
        w.healthy = true;
        if w.store.is_none() {
            w.store = Some(RefStore::new());
        }
        for _round in 0..20 {
            if !self.settle(&mut w, 200) {
                return Some("no quiescence".into());
            }
            for r in 0..w.reps.len() {
                while !w.reps[r].pending.is_empty()
                    && w.now >= w.reps[r].pending[0].sent + self.c.op_timeout
                {
                    self.timeout(&mut w, r);
                }
                if !w.reps[r].flushing {
                    self.flush(&mut w, r);
                }
                self.settle(&mut w, 200);
                self.call(&mut w, r);
                self.settle(&mut w, 200);
                while !w.reps[r].probes.is_empty() {
                    self.end_probe(&mut w, r, 0);
                    self.settle(&mut w, 200);
                }
            }
            let closed = (0..w.reps.len())
                .all(|r| w.reps[r].local().state == State::Closed && self.agrees(&w, r).is_ok());
            if closed && w.reps.iter().all(|r| r.pending.is_empty()) {
                return None;
            }
            w.now += 1;
        }
        Some(format!(
            "after 20 healthy rounds: {}",
            (0..w.reps.len())
                .map(|r| match self.agrees(&w, r) {
                    Ok(()) => format!("replica {r} {:?}", w.reps[r].local().state),
                    Err(e) => e,
                })
                .collect::<Vec<_>>()
                .join("; ")
        ))
    }

    /// Every property at `w`: the first one broken.
    pub(crate) fn check(&self, w: &World) -> Option<String> {
        if let Some(b) = &w.broken {
            return Some(b.clone());
        }
        if let Some(v) = self.cap_violation(w) {
            return Some(format!("probe cap: {v}"));
        }
        if let Some(v) = self.agreement_violation(w) {
            return Some(format!("agreement after the faults ended: {v}"));
        }
        if let Some(v) = self.dead_end(w) {
            return Some(format!("dead end: {v}"));
        }
        None
    }
}

/// Whether lease `m` was granted to replica `r`'s pending lease request nonce (`nonce:epoch:
/// replica:i`): its next lease request gets it back, any other compare-and-set releases it.
fn pending_nonce_lease(r: usize, rep: &Rep, m: &str) -> bool {
    let mut f = m.split(':');
    let (Some(n), Some(_), Some(id), Some(_)) = (f.next(), f.next(), f.next(), f.next()) else {
        return false;
    };
    rep.nonce.is_some_and(|p| n == p.to_string()) && id == format!("r{r}")
}

fn fingerprint(w: &World) -> u64 {
    let mut h = DefaultHasher::new();
    w.hash(&mut h);
    h.finish()
}

/// What the states explored covered (so a run that passes is known not to be vacuous).
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    /// States with a probe running under a fleet lease.
    pub(crate) leased_probes: usize,
    /// States with a probe admitted by the local rules (the store degraded).
    pub(crate) local_probes: usize,
    /// States where the store holds a half-open word.
    pub(crate) half_open: usize,
    /// States where the store holds an open word.
    pub(crate) open: usize,
    /// States with a replica degraded.
    pub(crate) degraded: usize,
    /// States after a store loss.
    pub(crate) after_loss: usize,
    /// States where the store is down.
    pub(crate) down: usize,
    /// States where every fault had ended, so agreement was checked from them.
    pub(crate) agreement_checked: usize,
    /// Of those, states after a store loss.
    pub(crate) agreement_after_loss: usize,
    /// Of those, states after an acquire's reply was lost.
    pub(crate) agreement_after_lost_acquire: usize,
    /// Of those, states where a replica's lease request nonce is pending with no request in
    /// flight (its request got no answer: the next one re-sends it).
    pub(crate) agreement_nonce_unanswered: usize,
}

impl Coverage {
    fn add(&mut self, m: &Model, w: &World) {
        if m.faults_ended(w) {
            self.agreement_checked += 1;
            self.agreement_after_loss += usize::from(!w.losses.is_empty());
            self.agreement_after_lost_acquire += usize::from(w.lost_acquires > 0);
            self.agreement_nonce_unanswered += usize::from(w.reps.iter().any(|rep| {
                rep.nonce.is_some_and(|n| {
                    !rep.pending.iter().any(|p| {
                        matches!(&p.what, What::Cas(jobs) if jobs.iter().any(|j| j.nonce == Some(n)))
                    })
                })
            }));
        }
        let probes = || w.reps.iter().flat_map(|r| &r.probes);
        self.leased_probes += usize::from(probes().any(|p| p.lease.is_some()));
        self.local_probes += usize::from(probes().any(|p| p.lease.is_none()));
        self.degraded += usize::from(w.reps.iter().any(|r| r.degraded));
        self.after_loss += usize::from(!w.losses.is_empty());
        self.down += usize::from(w.store.is_none());
        if let Some(store) = &w.store {
            let state = store
                .keys
                .peek(&keys()[2], "w", w.now)
                .map(|s| Word::decode(s.parse().unwrap()).state);
            self.half_open += usize::from(state == Some(State::HalfOpen));
            self.open += usize::from(state == Some(State::Open));
        }
    }
}

/// What an exploration found.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) states: usize,
    pub(crate) transitions: usize,
    pub(crate) depth: usize,
    pub(crate) coverage: Coverage,
    /// The first violation: the property, and the actions that reach it from the start.
    pub(crate) violation: Option<(String, Vec<Action>)>,
}

/// Replays `prefix` (every state on the way checked), then explores breadth first every
/// interleaving of `m.b.depth` more actions, with time passing at most `m.b.max_time` ticks
/// past the prefix's end; every state reached is checked. Stops at the first violation, with
/// a shortest trace to it (the prefix included).
pub(crate) fn explore(m: &Model, prefix: &[Action]) -> Report {
    let (mut init, broken) = replay(m, prefix);
    let mut report = Report {
        states: 1,
        transitions: 0,
        depth: 0,
        coverage: Coverage::default(),
        violation: None,
    };
    if let Some((i, v)) = broken {
        report.violation = Some((v, prefix[..=i].to_vec()));
        return report;
    }
    init.horizon = init.now + m.b.max_time;
    for rep in &mut init.reps {
        rep.made = 0;
    }
    let mut seen: HashSet<u64> = HashSet::new();
    seen.insert(fingerprint(&init));
    report.coverage.add(m, &init);
    // Each frontier state keeps the trace that reached it (shortest: breadth first).
    let mut frontier: Vec<(World, Vec<Action>)> = vec![(init, prefix.to_vec())];
    while report.depth < m.b.depth && !frontier.is_empty() {
        let mut next = Vec::new();
        for (w, trace) in &frontier {
            for a in m.actions(w) {
                let mut s = w.clone();
                m.step(&mut s, a);
                report.transitions += 1;
                if !seen.insert(fingerprint(&s)) {
                    continue;
                }
                let mut t = trace.clone();
                t.push(a);
                report.coverage.add(m, &s);
                if let Some(v) = m.check(&s) {
                    report.states = seen.len();
                    report.depth += 1;
                    report.violation = Some((v, t));
                    return report;
                }
                next.push((s, t));
            }
        }
        frontier = next;
        report.depth += 1;
    }
    report.states = seen.len();
    report
}

/// Replays `trace` from the start: the state reached and the first property broken on the
/// way (with the step it broke at).
///
/// # Panics
/// If an action of `trace` is not enabled where it is taken.
pub(crate) fn replay(m: &Model, trace: &[Action]) -> (World, Option<(usize, String)>) {
    let mut w = m.init();
    for (i, a) in trace.iter().enumerate() {
        assert!(m.enabled(&w, *a), "step {i}: {a:?} is not enabled");
        m.step(&mut w, *a);
        if let Some(v) = m.check(&w) {
            return (w, Some((i, v)));
        }
    }
    (w, None)
}

fn config(local_trips: bool, replicas: usize) -> Config {
    Config {
        replicas,
        cap: 1,
        cooldown: 2,
        op_timeout: 1,
        local_trips,
        min_calls: 2,
        successes: 1,
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The bounds of a run: `BREAKER_MODEL_DEPTH` (CI: 5), `BREAKER_MODEL_TIME` (ticks, 5),
/// `BREAKER_MODEL_CALLS` (per replica, 2), `BREAKER_MODEL_FLIPS` (1); one store loss, one lost
/// reply, one lost push, two requests in flight per replica.
fn bounds() -> Bounds {
    Bounds {
        depth: env("BREAKER_MODEL_DEPTH", 5),
        max_time: env("BREAKER_MODEL_TIME", 5) as i64,
        losses: 1,
        lost_replies: 1,
        lost_pushes: 1,
        flips: env("BREAKER_MODEL_FLIPS", 1) as u8,
        queue: 2,
        calls: env("BREAKER_MODEL_CALLS", 2) as u8,
    }
}

fn model(local_trips: bool) -> Model {
    Model::new(
        config(local_trips, env("BREAKER_MODEL_REPLICAS", 2)),
        bounds(),
    )
}

/// The fleet tripped by replica 0 (the dependency down), every replica told, the dependency
/// back up.
const TRIPPED: [Action; 6] = [
    Action::Call(0),
    Action::Run(0),
    Action::Deliver(0),
    Action::Push(0),
    Action::Push(1),
    Action::Flip,
];

/// [`TRIPPED`], then the cooldown over.
fn open_passed() -> Vec<Action> {
    let mut t = TRIPPED.to_vec();
    t.extend([Action::Tick, Action::Tick]);
    t
}

/// [`open_passed`], then replica 0's lease granted (the fleet half-open, told to every
/// replica) and its probe running.
fn probing() -> Vec<Action> {
    let mut t = open_passed();
    t.extend([
        Action::Call(0),
        Action::Run(0),
        Action::Deliver(0),
        Action::Push(0),
        Action::Push(1),
        Action::Call(0),
    ]);
    t
}

/// The fleet tripped by its rate rule alone: each replica's one failure flushed, the second
/// flush's totals reaching `min_calls`; every replica told, the dependency back up.
const RATE_TRIPPED: [Action; 13] = [
    Action::Call(0),
    Action::Call(1),
    Action::Flush(0),
    Action::Run(0),
    Action::Deliver(0),
    Action::Flush(1),
    Action::Run(1),
    Action::Deliver(1),
    Action::Run(1),
    Action::Deliver(1),
    Action::Push(0),
    Action::Push(1),
    Action::Flip,
];

fn run_and_report(name: &str, m: &Model, prefix: &[Action]) -> Coverage {
    let t = std::time::Instant::now();
    let r = explore(m, prefix);
    eprintln!(
        "{name}: {} replicas, prefix {} + depth {}, {} states, {} transitions, {:.1?}, {:?}",
        m.c.replicas,
        prefix.len(),
        r.depth,
        r.states,
        r.transitions,
        t.elapsed(),
        r.coverage
    );
    if let Some((v, trace)) = &r.violation {
        panic!("{name}: {v}\ntrace ({} steps): {trace:?}", trace.len());
    }
    assert_eq!(r.depth, m.b.depth, "explored to the bound");
    r.coverage
}

/// Replicas whose own rules trip (a consecutive failure), every fault, exhaustively: from the
/// start, from the fleet open past its cooldown, and from a leased probe running.
#[test]
fn fleet_model_local_trips() {
    let m = model(true);
    let c = run_and_report("local trips, from the start", &m, &[]);
    assert!(c.open > 0 && c.degraded > 0 && c.after_loss > 0 && c.down > 0);
    assert!(
        c.agreement_checked > 0 && c.agreement_after_loss > 0,
        "{c:?}"
    );
    let c = run_and_report("local trips, open past the cooldown", &m, &open_passed());
    assert!(
        c.half_open > 0 && c.leased_probes > 0 && c.local_probes > 0,
        "{c:?}"
    );
    let c = run_and_report("local trips, probing", &m, &probing());
    assert!(c.leased_probes > 0 && c.after_loss > 0, "{c:?}");
}

/// Replicas that only the fleet's rate rule trips (each one's window stays under
/// `min_calls`: the fleet's totals reach it), every fault: from the start and from the fleet
/// tripped by its rate rule.
#[test]
fn fleet_model_rate_rule_only() {
    let m = model(false);
    let c = run_and_report("rate rule only, from the start", &m, &[]);
    assert!(c.degraded > 0 && c.after_loss > 0, "{c:?}");
    let c = run_and_report("rate rule only, tripped", &m, &RATE_TRIPPED);
    assert!(c.open > 0, "{c:?}");
}

/// The trace of finding F3: replica 0's successful probe's end runs on the store one ms past
/// its `valid_until` and answers `expired` before the client's timeout.
fn f3_trace() -> Vec<Action> {
    let mut t = probing();
    t.extend([
        Action::EndProbe(0, 0),
        Action::Tick,
        Action::Run(0),
        Action::Deliver(0),
    ]);
    t
}

/// Finding F3 (log-model.md, fixed: an all-`expired` answer is a failed operation): the
/// probe's end that the store ran past its `valid_until` was taken as a success, so it was
/// forgotten, no reconciliation ran, and replica 0 stayed closed while the fleet stayed
/// half-open with the lease held. Now the expired answer degrades the replica, and its next
/// look reconciles: agreement holds.
#[test]
fn finding_f3_an_expired_answer_is_a_failure() {
    let m = Model::new(config(true, 2), bounds());
    let (w, broken) = replay(&m, &f3_trace());
    assert_eq!(broken, None);
    // The trace does reach the case: the end answered `expired`, and the replica degraded.
    assert!(w.reps[0].degraded);
    assert_eq!(w.reps[0].local().state, State::Closed);
}

/// Finding F1 (log-model.md, fixed: `valid_until` is exclusive in `store.lua`): a `cas` ran
/// in the server's millisecond equal to its `valid_until`, after the client's timeout fired: a
/// late effect (a trip here; a lease nobody holds for an acquire). Now it answers `expired`
/// and writes nothing.
#[test]
fn finding_f1_no_late_effect_at_the_valid_until_boundary() {
    let m = Model::new(config(true, 2), bounds());
    let mut trace = vec![
        Action::Call(0),
        Action::Tick,
        Action::Timeout(0),
        Action::Run(0),
    ];
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    // The trace does reach the boundary: the trip ran at its valid_until (sent at the
    // start, op timeout 1 ms), after its timeout, and the store holds no word.
    assert_eq!(w.now, m.init().now + m.c.op_timeout);
    let store = w.store.as_ref().unwrap();
    assert_eq!(store.keys.peek(&m.keys[2], "w", w.now), None);
    // The expired answer is delivered (a reply to a call that timed out is dropped).
    assert_eq!(w.reps[0].inbox.len(), 1);
    let (_, _, items) = decode(w.reps[0].inbox[0].reply.as_ref().unwrap());
    assert_eq!(items.iter().map(|i| i.code).collect::<Vec<_>>(), [EXPIRED]);
    trace.push(Action::Deliver(0));
    assert_eq!(replay(&m, &trace).1, None);
}

/// Finding F2 (log-model.md, fixed: `plan::plan_retrip`): with no fault at all, a local trip
/// was lost when another replica's first write (a flush creating the breaker) reached the
/// store first: the trip's compare-and-set was stale and never decided again on the word that
/// won, though that word is the very closed period it tripped in. Now the trip is decided
/// again on it: the fleet opens, both replicas agree.
#[test]
fn finding_f2_a_trip_racing_the_first_write_is_not_lost() {
    let m = Model::new(config(true, 2), bounds());
    let trace = [
        Action::Call(1),
        Action::Flip,
        Action::Call(0),
        Action::Flush(0),
        // The store runs replica 0's flush first (it creates closed generation 0), then
        // replica 1's trip (stale: it expected no word) and its retry.
        Action::Run(0),
        Action::Run(1),
        Action::Deliver(1),
        Action::Run(1),
    ];
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    let store = w.store.as_ref().unwrap();
    let word = Word::decode(
        store
            .keys
            .peek(&m.keys[2], "w", w.now)
            .unwrap()
            .parse()
            .unwrap(),
    );
    assert_eq!((word.state, word.generation), (State::Open, 1));
}

/// The trace of finding F4: both replicas' lease requests time out, each runs a local probe
/// (mode `local`), and the store's return is looked at while those probes still run.
fn f4_trace() -> Vec<Action> {
    let mut t = open_passed();
    t.extend([
        Action::Call(0),
        Action::Call(1),
        Action::Tick,
        Action::Timeout(0),
        Action::Call(0),
        Action::Timeout(1),
        Action::Call(1),
        Action::Tick,
    ]);
    t
}

/// Finding F4 (log-model.md, fixed: `reconcile` closes a store done probing at every look
/// while the local breaker has moved on its own): a dead end. The local probes succeeded after
/// the one look that followed the fault, every replica closed, and the store's open word (its
/// deadline long past) was kept: no replica asked for a lease again, their counts were dropped,
/// the fleet's rules did not work (in the real store until the word's key expired, `ttl` after
/// its last write: at least 10 s). Now the next look closes it.
#[test]
fn finding_f4_local_probes_after_a_fault_close_the_fleet() {
    let m = Model::new(config(true, 2), bounds());
    let (w, broken) = replay(&m, &f4_trace());
    assert_eq!(broken, None);
    // The trace does reach the case: both replicas run a local probe (degraded) while the
    // store holds open generation 1 past its deadline.
    for rep in &w.reps {
        assert_eq!(rep.probes.len(), 1);
        assert!(rep.probes[0].lease.is_none());
    }
    let store = w.store.as_ref().unwrap();
    let word = Word::decode(
        store
            .keys
            .peek(&m.keys[2], "w", w.now)
            .unwrap()
            .parse()
            .unwrap(),
    );
    assert_eq!((word.state, word.generation), (State::Open, 1));
}

/// The model for lost acquire replies: a lease (the cooldown) of 4 ticks, long enough to
/// outlive the timeout and the store breaker's retry; one reply lost or late, no store loss.
fn lost_acquire_model() -> Model {
    let mut c = config(true, 2);
    c.cooldown = 4;
    let mut b = bounds();
    b.losses = 0;
    b.lost_pushes = 0;
    Model::new(c, b)
}

/// [`TRIPPED`], then the cooldown (4 ticks) over.
fn open_passed_long() -> Vec<Action> {
    let mut t = TRIPPED.to_vec();
    t.extend([Action::Tick; 4]);
    t
}

/// Acquire replies lost or arriving after the timeout, exhaustively from the fleet open past
/// its cooldown: the probe cap, no dead end, agreement, and no lease held by nobody once the
/// faults ended (a lost reply costs at most one retry: the request nonce, fleet@5d9d401; finding
/// F5 before it).
#[test]
fn fleet_model_lost_acquire_reply() {
    let m = lost_acquire_model();
    let c = run_and_report("lost acquire reply", &m, &open_passed_long());
    assert!(c.half_open > 0 && c.leased_probes > 0, "{c:?}");
    assert!(
        c.agreement_after_lost_acquire > 0 && c.agreement_nonce_unanswered > 0,
        "{c:?}"
    );
}

/// The trace of finding F5: replica 0's lease request runs on the store, and its reply comes
/// after the client's timeout.
fn f5_trace() -> Vec<Action> {
    let mut t = open_passed_long();
    t.extend([
        Action::Call(0),
        Action::Run(0),
        Action::Tick,
        Action::Timeout(0),
        Action::Tick,
    ]);
    t
}

/// Finding F5 (log-model.md, fixed by the request nonce, fleet@5d9d401): a lease the store
/// granted whose reply came after the client's timeout was held by nobody for the rest of the
/// lease (the other replicas denied: cap 1). Now the lease is named after the request's nonce,
/// which stays pending: the replica's next lease request gets that very lease back.
#[test]
fn finding_f5_a_late_acquire_reply_costs_one_retry() {
    let m = lost_acquire_model();
    let mut trace = f5_trace();
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    // The trace does reach the case: the store holds the lease of replica 0's pending nonce,
    // and replica 0 does not know it.
    let nonce = w.reps[0]
        .nonce
        .expect("the request got no answer: its nonce is pending");
    let member = format!("{nonce}:e1:r0:1");
    let mut store = w.store.clone().unwrap();
    let held: Vec<String> = store
        .keys
        .members(&m.keys[4], w.now)
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(held, [member.as_str()]);
    assert!(w.reps[0].leases.is_empty() && w.reps[0].degraded);
    // Its next look ends the degraded period (the late reply is dropped), and its next call's
    // lease request re-sends the nonce: the same lease comes back, the store grants no other.
    trace.extend([
        Action::Flush(0),
        Action::Run(0),
        Action::Deliver(0),
        Action::Deliver(0),
        Action::Call(0),
        Action::Run(0),
        Action::Deliver(0),
    ]);
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    assert_eq!(w.reps[0].nonce, None, "answered");
    let leases: Vec<&str> = w.reps[0]
        .leases
        .iter()
        .map(|(l, _)| l.member.as_str())
        .collect();
    assert_eq!(leases, [member.as_str()]);
    let mut store = w.store.clone().unwrap();
    assert_eq!(store.keys.members(&m.keys[4], w.now).len(), 1);
    // Or its next call, still degraded, runs a probe by the local rules (the lease of its
    // pending nonce is its own meanwhile); the probe closes the local breaker, and the next
    // look's reconciliation, which closes the store, carries the nonce: the lease is released.
    let mut trace = f5_trace();
    trace.extend([
        Action::Call(0),
        Action::EndProbe(0, 0),
        Action::Flush(0),
        Action::Run(0),
        Action::Deliver(0),
        Action::Deliver(0),
        Action::Run(0),
        Action::Deliver(0),
    ]);
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    assert_eq!(w.reps[0].nonce, None, "released");
    let mut store = w.store.clone().unwrap();
    assert_eq!(store.keys.members(&m.keys[4], w.now), []);
    assert!(w
        .reps
        .iter()
        .all(|r| r.queue.is_empty() && r.inbox.is_empty()));
    assert!(m.agrees(&w, 0).is_ok() && w.reps[0].local().state == State::Closed);
}

/// The model for finding F6: two probes a period, three successes to close (a probe's success
/// ends nothing: the store's word keeps its generation), a lease (the cooldown) of 4 ticks.
fn f6_model() -> Model {
    let mut c = config(true, 2);
    c.cooldown = 4;
    c.cap = 2;
    c.successes = 3;
    Model::new(c, bounds())
}

/// The trace of finding F6, with no fault at all: replica 0 runs two leased probes; the first
/// succeeds (its end answered); a call takes the free local slot and asks for a lease (nonce 2,
/// pending while in flight); the second probe succeeds, and its end, sent behind the request,
/// carries the pending nonce. The store grants the request lease `2:e1:r0:1`, then the end
/// releases it; the grant reaches replica 0, whose next call probes under it while the store
/// holds no lease, and replica 1 is granted both slots.
fn f6_trace() -> Vec<Action> {
    let mut t = open_passed_long();
    t.extend([
        // Replica 0 is granted both leases and runs two probes.
        Action::Call(0),
        Action::Run(0),
        Action::Deliver(0),
        Action::Call(0),
        Action::Call(0),
        // The first succeeds (1 of 3): its end applied and answered.
        Action::EndProbe(0, 0),
        Action::Run(0),
        Action::Deliver(0),
        // A call takes the free local slot: a lease request, nonce 2.
        Action::Call(0),
        // The second succeeds (2 of 3): its end carries nonce 2.
        Action::EndProbe(0, 0),
        Action::Run(0),
        Action::Run(0),
        Action::Deliver(0),
        Action::Deliver(0),
        // Replica 0 probes under the lease the store released.
        Action::Call(0),
        // Replica 1 told of the half-open period; it is granted both slots, probes twice.
        Action::Push(1),
        Action::Call(1),
        Action::Run(1),
        Action::Deliver(1),
        Action::Run(1),
        Action::Deliver(1),
        Action::Call(1),
        Action::Call(1),
    ]);
    t
}

/// Finding F6 (fixed: `Coordinator::nonce_for`, `Entry::acquiring`): a breaker's nonce was
/// pending from the moment its lease request was sent, not only once the request got no
/// answer, so a compare-and-set that wants no lease sent while the request was in flight (a
/// probe's end, a trip, a reconciliation; in `urgent` a probe's end batched behind the request
/// in the same call) carried it, and the store, running it after the request, released the
/// lease it had just granted. The grant still reached the replica, which probed under a lease
/// the store no longer counted: the probe cap was exceeded with no fault at all (3 probes, cap
/// 2), and a probe's end that makes no transition was enough (a success short of
/// `successes_to_close`, or a cancelled probe's neutral end). Now a compare-and-set carries the
/// pending nonce only while no lease request carrying it is in flight: the trace's end carries
/// none, the store keeps the request's lease, and replica 1 gets the one slot left.
#[test]
fn finding_f6_an_end_behind_a_lease_request_keeps_its_grant() {
    let m = f6_model();
    let mut trace = f6_trace();
    // Replica 1's last call finds no slot left (the store holds r0's request's lease).
    trace.pop();
    let (w, broken) = replay(&m, &trace);
    assert_eq!(broken, None);
    assert_eq!(
        w.reps[0]
            .probes
            .iter()
            .map(|p| p.lease.as_ref().map(|l| l.member.as_str()))
            .collect::<Vec<_>>(),
        [Some("2:e1:r0:1")]
    );
    let mut store = w.store.clone().unwrap();
    let held: Vec<String> = store
        .keys
        .members(&m.keys[4], w.now)
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(held, ["1:e1:r1:1", "2:e1:r0:1"]);
    assert_eq!(w.reps[1].probes.len(), 1);
}
