//! G9: random schedules of flush, trip, acquire_probe, end_probe, force and store loss from
//! three replicas, each acting on its own (possibly stale) view, against a reference model of
//! the protocol. Every reply must equal the model's (code, generation, state, deadline, streak,
//! probe successes, leases in flight) and the window must hold exactly the counts the model
//! accepted: a stale write that changed anything would show as a difference.
//!
//! Time: the model runs each op at the server time the reply reports (the script's own `TIME`),
//! so cooldowns of 1-8 ms expire naturally between ops and the model still agrees exactly.

use crate::common::{unique_ns, Server};
use breaker_core::breaker::State;
use breaker_redis::protocol::{
    Code, FlushItem, ForceTarget, HighWater, ItemReply, ProbeOutcome, Protocol, Reason, Target,
};
use breaker_redis::{BreakerId, Lease, Namespace, ReplicaId, SharedPolicy};
use proptest::prelude::*;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    Flush { ok: u8, fail: u8 },
    Trip,
    Acquire { want: u8 },
    End { which: u8, outcome: u8 },
    Force { to: u8 },
    Lose,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 0u8..6).prop_map(|(ok, fail)| Op::Flush { ok, fail }),
        2 => Just(Op::Trip),
        3 => (1u8..4).prop_map(|want| Op::Acquire { want }),
        3 => (any::<u8>(), 0u8..3).prop_map(|(which, outcome)| Op::End { which, outcome }),
        1 => (0u8..4).prop_map(|to| Op::Force { to }),
        1 => Just(Op::Lose),
    ]
}

const PROBES: u64 = 2;
const SUCC: u64 = 2;
const MIN_CALLS: u64 = 6;
const RATE: u64 = 50;

fn policy() -> SharedPolicy {
    SharedPolicy {
        failure_rate_percent: Some(RATE as f64),
        min_calls: MIN_CALLS as u32,
        window: Duration::from_secs(86_400),
        buckets: 1,
        cooldown: Duration::from_millis(1),
        cooldown_multiplier: 2.0,
        cooldown_max: Duration::from_millis(8),
        half_open_probes: PROBES as u32,
        successes_to_close: SUCC as u32,
        probe_lease: Duration::from_secs(86_400),
        ..SharedPolicy::default()
    }
}

/// The reference model of one breaker in the store.
#[derive(Clone, Debug, Default)]
struct Model {
    exists: bool,
    g: u64,
    st: u8,
    dl: u64,
    sk: u64,
    ok: u64,
    window: (u64, u64),
    leases: Vec<String>,
}

fn cooldown(sk: u64) -> u64 {
    let mut d = 1u64;
    for _ in 2..=sk.min(64) {
        d *= 2;
        if d >= 8 {
            d = 8;
            break;
        }
    }
    d
}

fn tag(s: State) -> u8 {
    State::ALL.iter().position(|x| *x == s).unwrap() as u8
}

impl Model {
    fn create(&mut self) {
        if !self.exists {
            *self = Model {
                exists: true,
                ..Model::default()
            };
        }
    }

    fn transition(&mut self, to: u8, now: u64) {
        self.g += 1;
        self.st = to;
        self.ok = 0;
        if to == 1 {
            self.sk = (self.sk + 1).min(255);
            self.dl = now + cooldown(self.sk);
        } else {
            self.dl = 0;
            if to == 0 {
                self.sk = 0;
            }
        }
        self.window = (0, 0);
        self.leases.clear();
    }

    fn flush(&mut self, gen: u64, ok: u64, fail: u64, hw: &HighWater, now: u64) -> Code {
        let has = ok + fail > 0;
        if !(self.exists || has || hw.generation > 0) {
            return Code::Applied;
        }
        self.create();
        let mut code = Code::Applied;
        if hw.generation > self.g {
            self.g = hw.generation;
            self.st = tag(hw.state);
            self.ok = 0;
            self.sk = u64::from(hw.streak).min(255);
            self.dl = if self.st == 1 {
                now + hw.remaining.as_millis() as u64
            } else {
                0
            };
            self.window = (0, 0);
            self.leases.clear();
            code = Code::Repaired;
        }
        if has {
            if gen != self.g {
                code = Code::Stale;
            } else if self.st != 0 {
                if code != Code::Repaired {
                    code = Code::Ignored;
                }
            } else {
                self.window.0 += ok;
                self.window.1 += fail;
                let calls = self.window.0 + self.window.1;
                if calls >= MIN_CALLS && self.window.1 * 100 >= RATE * calls {
                    self.transition(1, now);
                    code = Code::Tripped;
                }
            }
        }
        code
    }

    fn trip(&mut self, gen: u64, now: u64) -> Code {
        self.create();
        if gen != self.g || self.st != 0 {
            return Code::Stale;
        }
        self.transition(1, now);
        Code::Tripped
    }

    fn acquire(&mut self, want: u64, now: u64, granted: &[Lease]) -> Code {
        self.create();
        if self.st == 1 && now >= self.dl {
            self.transition(2, now);
        }
        if self.st != 2 {
            return Code::Denied;
        }
        let free = PROBES - self.leases.len() as u64;
        let n = want.min(free);
        assert_eq!(granted.len() as u64, n, "leases granted");
        self.leases
            .extend(granted.iter().map(|l| l.id().to_owned()));
        if n == 0 {
            Code::Denied
        } else {
            Code::Applied
        }
    }

    fn end(&mut self, lease: &Lease, outcome: ProbeOutcome, now: u64) -> Code {
        if !self.exists {
            return Code::Stale;
        }
        if lease.generation() != self.g || self.st != 2 {
            self.leases.retain(|l| l != lease.id());
            return Code::Stale;
        }
        let Some(i) = self.leases.iter().position(|l| l == lease.id()) else {
            return Code::Late;
        };
        self.leases.remove(i);
        match outcome {
            ProbeOutcome::Success => {
                self.ok += 1;
                if self.ok >= SUCC {
                    self.transition(0, now);
                }
            }
            ProbeOutcome::Failure => self.transition(1, now),
            ProbeOutcome::Neutral => {}
        }
        Code::Applied
    }

    fn force(&mut self, to: u8, now: u64) -> Code {
        self.create();
        self.transition(to, now);
        Code::Applied
    }

    fn check(&self, what: &str, code: Code, it: &ItemReply) {
        let s = &it.state;
        let got = (
            it.code,
            s.generation,
            tag(s.state),
            s.deadline_ms.unwrap_or(0),
            u64::from(s.streak),
            u64::from(s.probe_successes),
        );
        let want = if self.exists {
            (code, self.g, self.st, self.dl, self.sk, self.ok)
        } else {
            (code, 0, 0, 0, 0, 0)
        };
        assert_eq!(got, want, "{what}: reply vs model {self:?}");
        let in_flight = if self.exists && self.st == 2 {
            self.leases.len() as u32
        } else {
            0
        };
        assert_eq!(it.leases_in_flight, in_flight, "{what}: leases in flight");
    }
}

/// What a replica believes: its last reply's state, and the leases it holds.
#[derive(Default)]
struct View {
    g: u64,
    st: Option<State>,
    dl: u64,
    now: u64,
    sk: u32,
    leases: Vec<Lease>,
}

impl View {
    fn learn(&mut self, it: &ItemReply) {
        if it.state.generation >= self.g {
            self.g = it.state.generation;
            self.st = Some(it.state.state);
            self.dl = it.state.deadline_ms.unwrap_or(0);
            self.sk = it.state.streak;
        }
        self.now = it.server_now_ms;
    }

    fn high_water(&self) -> HighWater {
        HighWater {
            generation: self.g,
            state: self.st.unwrap_or(State::Closed),
            remaining: Duration::from_millis(self.dl.saturating_sub(self.now)),
            streak: self.sk,
        }
    }
}

fn window_totals(s: &Server, key: &str) -> (u64, u64) {
    let v: Option<String> = s.cmd(&["GET", key]);
    let mut t = (0, 0);
    for part in v.unwrap_or_default().split(';').filter(|p| !p.is_empty()) {
        let f: Vec<u64> = part.split(':').map(|x| x.parse().unwrap()).collect();
        t.0 += f[1];
        t.1 += f[2];
    }
    t
}

async fn run(
    s: &Server,
    conn: &mut redis::aio::MultiplexedConnection,
    ops: &[(usize, Op)],
) -> (u64, u64) {
    let ns = Namespace::new(&unique_ns("model")).unwrap();
    let target = Target::new(
        &ns,
        BreakerId::new("m").unwrap(),
        policy().compile().unwrap(),
    );
    let replicas: Vec<Protocol> = (0..3)
        .map(|i| {
            Protocol::new(
                &ns,
                ReplicaId::new(&format!("r{i}")).unwrap(),
                Duration::from_secs(5),
                Duration::from_secs(60),
            )
            .with_fixed_jitter(0)
        })
        .collect();
    let mut views: Vec<View> = (0..3).map(|_| View::default()).collect();
    let mut model = Model::default();
    let (mut stale, mut dropped_counts) = (0u64, 0u64);
    for (step, (r, op)) in ops.iter().enumerate() {
        let p = &replicas[*r];
        let what = format!("step {step}: r{r} {op:?}");
        match op {
            Op::Flush { ok, fail } => {
                let hw = views[*r].high_water();
                let item = FlushItem {
                    target: &target,
                    generation: views[*r].g,
                    successes: u64::from(*ok),
                    failures: u64::from(*fail),
                    slow: 0,
                    high_water: hw,
                };
                let reply = p.flush(conn, &[item]).await.unwrap();
                let it = &reply.items[0];
                let code = model.flush(
                    views[*r].g,
                    u64::from(*ok),
                    u64::from(*fail),
                    &hw,
                    reply.server_now_ms,
                );
                model.check(&what, code, it);
                if code == Code::Stale {
                    stale += 1;
                    dropped_counts += u64::from(*ok) + u64::from(*fail);
                }
                assert_eq!(
                    window_totals(s, &target.keys().window),
                    model.window,
                    "{what}: window"
                );
                views[*r].learn(it);
            }
            Op::Trip => {
                let g = views[*r].g;
                let it = p
                    .trip(conn, &target, g, Reason::ConsecutiveFailures)
                    .await
                    .unwrap();
                let code = model.trip(g, it.server_now_ms);
                model.check(&what, code, &it);
                stale += u64::from(code == Code::Stale);
                views[*r].learn(&it);
            }
            Op::Acquire { want } => {
                let it = p
                    .acquire_probe(conn, &target, u32::from(*want))
                    .await
                    .unwrap();
                let code = model.acquire(u64::from(*want), it.server_now_ms, &it.granted);
                model.check(&what, code, &it);
                views[*r].leases.extend(it.granted.iter().cloned());
                views[*r].learn(&it);
            }
            Op::End { which, outcome } => {
                if views[*r].leases.is_empty() {
                    continue;
                }
                let i = usize::from(*which) % views[*r].leases.len();
                let lease = views[*r].leases.remove(i);
                let outcome = [
                    ProbeOutcome::Success,
                    ProbeOutcome::Failure,
                    ProbeOutcome::Neutral,
                ][usize::from(*outcome)];
                let it = p.end_probe(conn, &target, &lease, outcome).await.unwrap();
                let code = model.end(&lease, outcome, it.server_now_ms);
                model.check(&what, code, &it);
                stale += u64::from(code == Code::Stale || code == Code::Late);
                views[*r].learn(&it);
            }
            Op::Force { to } => {
                let to = [
                    ForceTarget::Reset,
                    ForceTarget::Open,
                    ForceTarget::ForcedOpen,
                    ForceTarget::ForcedClosed,
                ][usize::from(*to)];
                let it = p.force(conn, &target, to).await.unwrap();
                let t = match to {
                    ForceTarget::Reset => 0,
                    ForceTarget::Open => 1,
                    ForceTarget::ForcedOpen => 3,
                    ForceTarget::ForcedClosed => 4,
                };
                let code = model.force(t, it.server_now_ms);
                model.check(&what, code, &it);
                views[*r].learn(&it);
            }
            Op::Lose => {
                let k = target.keys();
                let _: i64 = s.cmd(&["DEL", &k.state, &k.window, &k.leases, &k.votes]);
                model = Model::default();
            }
        }
        // Never a generation below any replica's view while the store is intact.
    }
    (stale, dropped_counts)
}

#[test]
fn random_schedules_apply_no_stale_write() {
    let Some(s) = Server::start(&[]) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(async {
        redis::Client::open(s.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    });
    let cases: u32 = std::env::var("BREAKER_REDIS_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let totals = std::cell::Cell::new((0u64, 0u64, 0u64));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let strategy = proptest::collection::vec((0usize..3, op()), 1..60);
    runner
        .run(&strategy, |ops| {
            let mut conn = conn.clone();
            let (stale, dropped) = rt.block_on(run(&s, &mut conn, &ops));
            let t = totals.get();
            totals.set((t.0 + ops.len() as u64, t.1 + stale, t.2 + dropped));
            Ok(())
        })
        .unwrap();
    let totals = totals.get();
    eprintln!(
        "G9: {cases} schedules, {} ops, {} fenced writes (stale or late), {} counts dropped by fencing, 0 stale writes applied",
        totals.0, totals.1, totals.2
    );
    assert!(totals.1 > 0, "the schedules exercised fencing");
}
