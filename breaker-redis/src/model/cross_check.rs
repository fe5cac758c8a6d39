//! The reference store ([`RefStore`]) against the real script on a real `redis-server`: the same
//! raw calls (`FCALL breaker_v2_<op>` with the same `KEYS` and `ARGV`) to both, and the
//! replies compared value by value, the messages published compared in order, and the keys
//! (values and expiries) compared every few calls. The model runs each call at the server time
//! the real reply carries, and an epoch the real script made is adopted as the model's new
//! epoch token, so nothing is left to chance but the server's clock itself.
//!
//! - table-driven cases: each rule of the script's header, with the codes asserted as well;
//! - randomized sequences from fixed seeds (`BREAKER_MODEL_SEEDS` more of them, opt-in):
//!   several replicas and breakers, several items per call (the same breaker twice too),
//!   expired calls, early promotions, joins, leases expiring on the server's clock, bad
//!   arguments among good ones;
//! - the one decision the script keeps, the lease semaphore, against the core's `free_slot`:
//!   in every random call that asks for leases, and exhaustively over the model.

use super::store::{RefStore, Val, APPLIED, BAD, EARLY, EXPIRED, MISSING, STALE, V};
use crate::names::{BreakerId, Namespace, NamespaceKeys};
use crate::protocol::{wire_word, Protocol, MAX_SAFE};
use crate::test_server::Server;
use breaker_core::breaker::decide::{self, free_slot, Admit, Limits, Word};
use breaker_core::breaker::State;
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const NS: &str = "x";
const FAR: &str = "9007199254740991";
/// How long a published message may take to arrive (a bounded wait, never a sleep).
const DEADLINE: Duration = Duration::from_secs(10);

fn ns_keys() -> NamespaceKeys {
    Namespace::new(NS).unwrap().keys()
}

/// The four keys of breaker `name`.
fn bkeys(name: &str) -> [String; 4] {
    if name.is_empty() {
        // No valid id: keys of the same shape (the script refuses the item before using them).
        return ["s", "w", "p", "q"].map(|k| format!("br:{{{NS}}}:{k}:"));
    }
    let k = Namespace::new(NS)
        .unwrap()
        .breaker_keys(&BreakerId::new(name).unwrap());
    [k.state, k.window, k.leases, k.votes]
}

/// One call's `KEYS` and `ARGV` (as the client builds them: `protocol/client.rs`).
#[derive(Clone, Debug)]
struct Call {
    op: &'static str,
    keys: Vec<String>,
    args: Vec<String>,
}

impl Call {
    fn new(op: &'static str, replica: &str, valid_until: &str, live: &str) -> Call {
        let ns = ns_keys();
        Call {
            op,
            keys: vec![ns.replicas, ns.version],
            args: vec![
                replica.into(),
                ns.channel,
                valid_until.into(),
                live.into(),
                "60000".into(),
                "0".into(),
            ],
        }
    }

    /// Adds an item: breaker `name` and the op's arguments.
    fn item(mut self, name: &str, args: &[&str]) -> Call {
        self.keys.extend(bkeys(name));
        self.args.push(name.into());
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        let n: usize = self.args[5].parse().unwrap();
        self.args[5] = (n + 1).to_string();
        self
    }
}

/// A server and the model, side by side.
struct Rig {
    /// Kept for its lifetime (the server is killed on drop).
    _server: Server,
    conn: redis::aio::MultiplexedConnection,
    messages: std::pin::Pin<Box<dyn futures_util::Stream<Item = redis::Msg> + Send>>,
    model: RefStore,
    /// The server time of the last reply.
    now: i64,
    calls: u64,
    sentinel: u64,
    /// Messages published (and matched).
    published: u64,
}

impl Rig {
    async fn start() -> Option<Rig> {
        let server = Server::start()?;
        let mut conn = server.conn().await;
        let proto = Protocol::new(
            &Namespace::new(NS).unwrap(),
            crate::names::ReplicaId::new("loader").unwrap(),
            Duration::from_secs(3),
            Duration::from_secs(60),
        );
        proto.load(&mut conn).await.expect("the library loads");
        let client = redis::Client::open(server.url()).unwrap();
        let mut pubsub = client
            .get_async_pubsub()
            .await
            .expect("a pubsub connection");
        pubsub
            .subscribe(ns_keys().channel)
            .await
            .expect("subscribe");
        Some(Rig {
            _server: server,
            conn,
            messages: Box::pin(pubsub.into_on_message()),
            model: RefStore::new(),
            now: 0,
            calls: 0,
            sentinel: 0,
            published: 0,
        })
    }

    /// Runs `c` on both; asserts the same reply (or both refused) and the same messages
    /// published. The reply.
    async fn call(&mut self, c: &Call) -> Result<V, String> {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("breaker_v2_{}", c.op))
            .arg(c.keys.len())
            .arg(&c.keys)
            .arg(&c.args);
        let real: Result<redis::Value, redis::RedisError> = cmd.query_async(&mut self.conn).await;
        let real = real.map(|v| V::of(&v)).map_err(|e| e.to_string());
        let (now, epoch) = match &real {
            Ok(V::List(l)) => (l[1].int(), l[2].str().to_owned()),
            _ => (self.now, String::new()),
        };
        let mut published = Vec::new();
        let model = self
            .model
            .call(c.op, &c.keys, &c.args, now, &epoch, &mut published);
        match (&real, &model) {
            (Ok(r), Ok(m)) => assert_eq!(r, m, "call #{}: {c:?}", self.calls),
            (Err(r), Err(m)) => {
                let what = m.trim_start_matches("BRK ");
                assert!(r.contains(what), "call #{}: {c:?}: {r} vs {m}", self.calls);
            }
            _ => panic!(
                "call #{}: {c:?}: the server answered {real:?}, the model {model:?}",
                self.calls
            ),
        }
        self.now = self.now.max(now);
        self.calls += 1;
        let got = self.drain().await;
        // Only the namespace's channel is subscribed to (a call may name another).
        let channel = ns_keys().channel;
        let want: Vec<String> = published
            .into_iter()
            .filter(|p| p.channel == channel)
            .map(|p| p.payload)
            .collect();
        assert_eq!(got, want, "published by call #{}: {c:?}", self.calls - 1);
        self.published += got.len() as u64;
        real
    }

    /// The messages published since the last drain: a sentinel is published after them and
    /// everything before it read (each read a bounded wait).
    async fn drain(&mut self) -> Vec<String> {
        self.sentinel += 1;
        let sentinel = format!("sentinel-{}", self.sentinel);
        let _: i64 = redis::cmd("PUBLISH")
            .arg(ns_keys().channel)
            .arg(&sentinel)
            .query_async(&mut self.conn)
            .await
            .unwrap();
        let mut got = Vec::new();
        loop {
            let msg = tokio::time::timeout(DEADLINE, self.messages.next())
                .await
                .expect("a published message within the deadline")
                .expect("the subscription is open");
            let payload: String = msg.get_payload().unwrap();
            if payload == sentinel {
                return got;
            }
            got.push(payload);
        }
    }

    /// Compares every key of the server with the model's: values, and expiries within a few
    /// ms (a script's `PEXPIRE` counts from the server's command time, the model from `TIME`).
    async fn compare_keys(&mut self) {
        let names: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut self.conn)
            .await
            .unwrap();
        let mut real = BTreeMap::new();
        for k in names {
            let kind: String = redis::cmd("TYPE")
                .arg(&k)
                .query_async(&mut self.conn)
                .await
                .unwrap();
            let val = match kind.as_str() {
                "hash" => Val::Hash(
                    redis::cmd("HGETALL")
                        .arg(&k)
                        .query_async(&mut self.conn)
                        .await
                        .unwrap(),
                ),
                "string" => Val::Str(
                    redis::cmd("GET")
                        .arg(&k)
                        .query_async(&mut self.conn)
                        .await
                        .unwrap(),
                ),
                "zset" => {
                    let pairs: Vec<(String, String)> = redis::cmd("ZRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query_async(&mut self.conn)
                        .await
                        .unwrap();
                    Val::ZSet(
                        pairs
                            .into_iter()
                            .map(|(m, s)| (m, s.parse().expect("an integer score")))
                            .collect(),
                    )
                }
                other => panic!("key {k} of type {other}"),
            };
            let at: i64 = redis::cmd("PEXPIRETIME")
                .arg(&k)
                .query_async(&mut self.conn)
                .await
                .unwrap();
            real.insert(k, (val, (at >= 0).then_some(at)));
        }
        let model = self.model.keys.dump(self.now);
        assert_eq!(
            real.keys().collect::<Vec<_>>(),
            model.keys().collect::<Vec<_>>(),
            "the same keys after call #{}",
            self.calls
        );
        for (k, (val, at)) in &real {
            let (mval, mat) = &model[k];
            assert_eq!(val, mval, "key {k} after call #{}", self.calls);
            match (at, mat) {
                (Some(a), Some(b)) => assert!((a - b).abs() <= 5, "expiry of {k}: {a} vs {b}"),
                (None, None) => {}
                _ => panic!("expiry of {k}: {at:?} vs {mat:?}"),
            }
        }
    }
}

macro_rules! rig {
    () => {
        match Rig::start().await {
            Some(r) => r,
            None => return,
        }
    };
}

fn w(state: State, generation: u32) -> Word {
    Word {
        state,
        successes: 0,
        in_flight: 0,
        streak: u32::from(matches!(state, State::Open | State::HalfOpen)),
        generation,
    }
}

fn ww(word: Word) -> String {
    wire_word(word)
}

/// `cas` arguments: expect, next, transition, join, not before, cooldown, want, cap, lease,
/// release, reason, fingerprint, ttl.
#[allow(clippy::too_many_arguments)]
fn cas_args(
    expect: &str,
    next: &str,
    tr: &str,
    join: &str,
    nb: &str,
    cool: &str,
    want: &str,
    cap: &str,
    lease: &str,
    release: &str,
) -> Vec<String> {
    [
        expect, next, tr, join, nb, cool, want, cap, lease, release, "7", "fp", "60000", "",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The code of each item of a reply.
fn codes(r: &V) -> Vec<i64> {
    r.list()[5..].iter().map(|it| it.list()[0].int()).collect()
}

fn item(r: &V, i: usize) -> &[V] {
    r.list()[5 + i].list()
}

/// The script's header rules and each op's, as a table of cases; each asserts the codes it
/// expects, and the rig asserts that the model answers exactly what the server answers.
#[tokio::test]
async fn the_reference_store_answers_what_the_script_answers_case_by_case() {
    let mut rig = rig!();
    let closed = ww(w(State::Closed, 0));
    let open = ww(decide::reopen(w(State::Closed, 0)));
    let Admit::Probe { next: half, .. } =
        decide::admit_open(decide::reopen(w(State::Closed, 0)), 0, 0)
    else {
        panic!("promotes")
    };
    let half = ww(half);
    let c = |op| Call::new(op, "a", FAR, "3000");
    // Missing: read, add without create, vote.
    let r = rig.call(&c("read").item("b", &[])).await.unwrap();
    assert_eq!(codes(&r), [MISSING]);
    assert_ne!(
        r.list()[2],
        V::Str(String::new()),
        "every call makes the epoch, a read too"
    );
    let add = |expect: &str, create: &str, s: &str, f: &str| {
        c("add").item("b", &[expect, create, s, f, "0", "10000", "10", "60000"])
    };
    let r = rig.call(&add(&closed, "0", "1", "1")).await.unwrap();
    assert_eq!(codes(&r), [MISSING]);
    // Add with create creates the breaker.
    let r = rig.call(&add(&closed, "1", "2", "1")).await.unwrap();
    assert_eq!(codes(&r), [APPLIED]);
    assert_eq!(item(&r, 0)[7..], [V::Int(2), V::Int(1), V::Int(0)]);
    // Stale add: another word expected.
    let r = rig.call(&add(&open, "0", "1", "1")).await.unwrap();
    assert_eq!(codes(&r), [STALE]);
    // The fenced CAS: wrong expectation, missing expected while stored, then applied with a
    // deadline from the store's clock, publishing the transition.
    let cas = |a: Vec<String>| c("cas").item("b", &refs(&a));
    let r = rig
        .call(&cas(cas_args(
            &half, &open, "1", "0", "0", "30", "0", "1", "1000", "",
        )))
        .await
        .unwrap();
    assert_eq!(codes(&r), [STALE]);
    let r = rig
        .call(&cas(cas_args(
            "", &open, "1", "0", "0", "30", "0", "1", "1000", "",
        )))
        .await
        .unwrap();
    assert_eq!(codes(&r), [STALE]);
    let r = rig
        .call(&cas(cas_args(
            &closed, &open, "1", "0", "0", "30000", "0", "1", "1000", "",
        )))
        .await
        .unwrap();
    assert_eq!(codes(&r), [APPLIED]);
    assert_eq!(item(&r, 0)[3], V::Int(r.list()[1].int() + 30_000));
    // The transition cleared the window: an add of the new period starts from nothing.
    // Early: the promotion waits for the store's clock.
    let promote = |nb: &str, want: &str, replica: &str| {
        let a = cas_args(&open, &half, "1", "1", nb, "", want, "2", "60000", "");
        Call::new("cas", replica, FAR, "3000").item("b", &refs(&a))
    };
    let r = rig.call(&promote(FAR, "1", "a")).await.unwrap();
    assert_eq!(codes(&r), [EARLY]);
    // Expired: a call past its valid_until writes nothing, whatever its items.
    let late = Call::new("cas", "a", "0", "3000").item(
        "b",
        &refs(&cas_args(
            &open, &half, "1", "1", "0", "", "1", "2", "60000", "",
        )),
    );
    let r = rig.call(&late).await.unwrap();
    assert_eq!(codes(&r), [EXPIRED]);
    // Applied with a lease; another replica joins with one more; the cap holds.
    let r = rig.call(&promote("0", "1", "a")).await.unwrap();
    assert_eq!(codes(&r), [APPLIED]);
    assert_eq!(item(&r, 0).len(), 9, "one member and its expiry");
    let member = item(&r, 0)[7].str().to_owned();
    let r = rig.call(&promote("0", "1", "b")).await.unwrap();
    assert_eq!((codes(&r), item(&r, 0)[2].int()), (vec![APPLIED], 2));
    let r = rig.call(&promote("0", "3", "b")).await.unwrap();
    assert_eq!(
        (codes(&r), item(&r, 0).len()),
        (vec![APPLIED], 7),
        "none left"
    );
    // A probe's end: releases its lease, no transition.
    let mut succ = decide::admit_open(decide::reopen(w(State::Closed, 0)), 0, 0);
    let Admit::Probe { next, .. } = &mut succ else {
        unreachable!()
    };
    next.successes = 1;
    let one_success = ww(*next);
    let r = rig
        .call(&cas(cas_args(
            &half,
            &one_success,
            "0",
            "0",
            "0",
            "",
            "0",
            "2",
            "1",
            &member,
        )))
        .await
        .unwrap();
    assert_eq!((codes(&r), item(&r, 0)[2].int()), (vec![APPLIED], 1));
    // Votes: distinct replicas of the expected period; stale otherwise.
    let vote = |replica: &str, expect: &str| {
        Call::new("vote", replica, FAR, "3000").item("b", &[expect, "0", "10000", "60000"])
    };
    let r = rig.call(&vote("a", &one_success)).await.unwrap();
    assert_eq!((codes(&r), item(&r, 0)[7].int()), (vec![APPLIED], 1));
    let r = rig.call(&vote("b", &one_success)).await.unwrap();
    assert_eq!(item(&r, 0)[7].int(), 2);
    let r = rig.call(&vote("b", &closed)).await.unwrap();
    assert_eq!(codes(&r), [STALE]);
    // A bad item is refused alone; the good one beside it applies.
    let mixed = c("read").item("b", &[]).item("", &[]);
    let r = rig.call(&mixed).await.unwrap();
    assert_eq!(codes(&r), [APPLIED, BAD]);
    for bad in [
        cas_args(&one_success, "", "0", "0", "0", "", "0", "2", "1", ""),
        cas_args(
            &one_success,
            &one_success,
            "2",
            "0",
            "0",
            "",
            "0",
            "2",
            "1",
            "",
        ),
        cas_args(
            &one_success,
            &one_success,
            "0",
            "0",
            "0",
            "x",
            "0",
            "2",
            "1",
            "",
        ),
        cas_args(
            &one_success,
            &one_success,
            "0",
            "0",
            "0",
            "",
            "65",
            "2",
            "1",
            "",
        ),
        cas_args(
            &one_success,
            &one_success,
            "0",
            "0",
            "0",
            "",
            "1",
            "2",
            "0",
            "",
        ),
        cas_args(
            &one_success,
            &one_success,
            "0",
            "0",
            "0",
            "",
            "0",
            "65536",
            "1",
            "",
        ),
        cas_args("1x", &one_success, "0", "0", "0", "", "0", "2", "1", ""),
    ] {
        let call = c("cas").item("b", &refs(&bad)).item(
            "b",
            &refs(&cas_args(
                &one_success,
                &one_success,
                "0",
                "0",
                "0",
                "",
                "0",
                "2",
                "1",
                "",
            )),
        );
        let r = rig.call(&call).await.unwrap();
        assert_eq!(codes(&r), [BAD, APPLIED], "{bad:?}");
    }
    // Header errors: the whole call refused.
    let mut wrong = c("read").item("b", &[]);
    wrong.args[5] = "2".into();
    assert!(rig.call(&wrong).await.is_err());
    let mut wrong = c("read").item("b", &[]);
    wrong.args[0] = String::new();
    assert!(rig.call(&wrong).await.is_err());
    // A transition clears leases and votes, and a closed word's window restarts.
    let r = rig
        .call(&cas(cas_args(
            &one_success,
            &closed,
            "1",
            "0",
            "0",
            "",
            "0",
            "2",
            "1",
            "",
        )))
        .await
        .unwrap();
    assert_eq!(codes(&r), [APPLIED]);
    let r = rig.call(&add(&closed, "0", "1", "0")).await.unwrap();
    assert_eq!(item(&r, 0)[7..], [V::Int(1), V::Int(0), V::Int(0)]);
    rig.compare_keys().await;
}

/// One random call, its arguments drawn around the model's current words (so most apply).
struct Gen {
    rng: StdRng,
}

impl Gen {
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.gen_range(0..xs.len())]
    }

    /// A word near `current`: itself, its successors by the core's deciders, or another.
    fn word_near(&mut self, current: Option<Word>) -> String {
        let base = current.unwrap_or(w(State::Closed, self.rng.gen_range(0..3)));
        let choice = self.rng.gen_range(0..10);
        let word = match choice {
            0..=3 => base,
            4 => decide::reopen(base),
            5 => base.transition(State::HalfOpen, base.streak),
            6 => base.transition(State::Closed, 0),
            7 => Word {
                successes: (base.successes + 1) & 0x1fff,
                ..base
            },
            8 => return String::new(),
            _ => w(
                State::ALL[self.rng.gen_range(0..5)],
                self.rng.gen_range(0..4),
            ),
        };
        ww(word)
    }

    fn bad(&mut self) -> String {
        self.pick(&[
            "x",
            "-1",
            "99999999999999999",
            "1.5",
            "",
            "18446744073709551616",
        ])
        .to_owned()
    }

    fn call(&mut self, model: &mut RefStore, now: i64) -> Call {
        let op = self.pick(&["read", "add", "add", "vote", "cas", "cas", "cas", "cas"]);
        let op: &'static str = match op {
            "read" => "read",
            "add" => "add",
            "vote" => "vote",
            _ => "cas",
        };
        let replica = self.pick(&["a", "b", "c"]);
        // Around the server's last known ms (`valid_until` is exclusive): expired, or applied
        // or expired as the call's ms falls (the model runs at the server's ms).
        let valid_until = if self.rng.gen_ratio(1, 8) {
            (now + self.rng.gen_range(-1..=1)).max(0).to_string()
        } else {
            FAR.to_owned()
        };
        let live = self.pick(&["2", "3000"]);
        let mut call = Call::new(op, replica, &valid_until, live);
        for _ in 0..self.rng.gen_range(1..=3) {
            let name = self.pick(&["p", "q"]);
            let [skey, _, pkey, _] = bkeys(name);
            let current = model
                .keys
                .hget(&skey, "w", now)
                .and_then(|s| s.parse::<u64>().ok())
                .map(Word::decode);
            let expect = self.word_near(current);
            let mut args: Vec<String> = match op {
                "read" => vec![],
                "add" => {
                    let (s, f) = (self.rng.gen_range(0..3u32), self.rng.gen_range(0..3u32));
                    vec![
                        expect,
                        self.pick(&["0", "1"]).into(),
                        s.to_string(),
                        f.to_string(),
                        self.rng.gen_range(0..=s + f).to_string(),
                        self.pick(&["20", "10000"]).into(),
                        self.pick(&["1", "2", "4"]).into(),
                        "60000".into(),
                    ]
                }
                "vote" => vec![
                    expect,
                    self.pick(&["0", "1"]).into(),
                    self.pick(&["3", "10000"]).into(),
                    "60000".into(),
                ],
                _ => {
                    let next = loop {
                        let n = self.word_near(current);
                        if !n.is_empty() {
                            break n;
                        }
                    };
                    let members = model.keys.members(&pkey, now);
                    let release = if !members.is_empty() && self.rng.gen_ratio(1, 2) {
                        members[self.rng.gen_range(0..members.len())].0.clone()
                    } else {
                        self.pick(&["", "", "junk"]).to_owned()
                    };
                    let tr = match (expect.as_str(), next.parse::<u64>()) {
                        ("", _) => "1".to_owned(),
                        (e, Ok(n)) => {
                            let e = Word::decode(e.parse().unwrap());
                            u8::from(e.generation != Word::decode(n).generation).to_string()
                        }
                        _ => "1".to_owned(),
                    };
                    let nb = match self.rng.gen_range(0..6) {
                        0 => FAR.to_owned(),
                        1 => (now + self.rng.gen_range(-1..=2)).max(0).to_string(),
                        _ => "0".to_owned(),
                    };
                    vec![
                        expect,
                        next,
                        tr,
                        self.pick(&["0", "1"]).into(),
                        nb,
                        self.pick(&["", "", "0", "5", "60000"]).into(),
                        self.rng.gen_range(0..=3u32).to_string(),
                        self.rng.gen_range(0..=3u32).to_string(),
                        self.pick(&["1", "3", "60000"]).into(),
                        release,
                        self.rng.gen_range(0..=7u32).to_string(),
                        "fp".into(),
                        "60000".into(),
                        // A lease request's nonce: none, or one of two (re-sent, released).
                        self.pick(&["", "", "5", "6"]).into(),
                    ]
                }
            };
            if !args.is_empty() && self.rng.gen_ratio(1, 25) {
                let i = self.rng.gen_range(0..args.len());
                args[i] = self.bad();
            }
            call = call.item(name, &refs(&args));
        }
        if self.rng.gen_ratio(1, 60) {
            let i = self.rng.gen_range(0..6);
            call.args[i] = self.bad();
        }
        call
    }
}

/// The grants of a random call's items that asked for leases, checked against the core's
/// `free_slot` applied once per lease (the one rule the script keeps). `held`: the leases
/// held before the call (lease set key, lease) of every breaker it names. A lease request re-sent with its nonce
/// gets back the leases granted to it before and still held, whatever the cap: such a grant
/// names only leases held before (or granted by an earlier item of the call) and takes no
/// new one, so it is checked for that instead.
/// The leases granted.
fn check_grants(call: &Call, reply: &V, mut held: BTreeSet<(String, String)>) -> u32 {
    let mut total = 0;
    if call.op != "cas" {
        return 0;
    }
    let per = 15;
    for (i, it) in reply.list()[5..].iter().enumerate() {
        let it = it.list();
        if it[0].int() != APPLIED {
            continue;
        }
        // The granted leases, then their expiry (nothing when none was granted).
        let members: Vec<&str> = match it.len() {
            0..=8 => Vec::new(),
            n => it[7..n - 1].iter().map(V::str).collect(),
        };
        let pkey = &call.keys[2 + 4 * i + 2];
        let was_held = |m: &str| held.contains(&(pkey.clone(), m.to_owned()));
        if !members.is_empty() && members.iter().all(|m| was_held(m)) {
            let nonce = &call.args[6 + i * per + 14];
            assert!(
                !nonce.is_empty() && members.iter().all(|m| m.starts_with(&format!("{nonce}:"))),
                "only a nonce's leases are granted again: {call:?}: item {i}: {it:?}"
            );
            total += members.len() as u32;
            continue;
        }
        held.extend(members.iter().map(|m| (pkey.clone(), (*m).to_owned())));
        let a = &call.args[6 + i * per + 1..6 + (i + 1) * per];
        let (want, cap): (u32, u32) = (a[6].parse().unwrap(), a[7].parse().unwrap());
        if want == 0 {
            continue;
        }
        let granted = it.len().saturating_sub(8) as u32;
        let in_flight = it[2].int() as u32;
        // The leases held before the grant: what is held after, less the grant.
        let held = in_flight - granted;
        let limits = Limits {
            half_open_probes: cap,
            successes_to_close: 1,
            probe_wait: 0,
        };
        let mut word = Word {
            in_flight: held,
            ..w(State::HalfOpen, 1)
        };
        let mut core = 0;
        while core < want {
            let Some(Admit::Probe { next, .. }) = free_slot(word, &limits) else {
                break;
            };
            word = next;
            core += 1;
        }
        assert_eq!(
            granted, core,
            "cap {cap}, {held} held, {want} wanted: {call:?}: item {i}: {it:?}"
        );
        total += granted;
    }
    total
}

async fn random_sequences(seeds: std::ops::Range<u64>, calls: usize) {
    let Some(mut rig) = Rig::start().await else {
        return;
    };
    let (mut seen, mut granted, mut refused) = ([0u64; 6], 0u32, 0u64);
    for seed in seeds {
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut rig.conn)
            .await
            .unwrap();
        rig.model = RefStore::new();
        let mut gen = Gen {
            rng: StdRng::seed_from_u64(seed),
        };
        for k in 0..calls {
            let now = rig.now;
            let call = gen.call(&mut rig.model, now);
            // The leases held before the call, of every breaker it names (`KEYS`: the
            // namespace's two, then four a breaker, its lease set third).
            let mut held = BTreeSet::new();
            for k in call.keys[2..].chunks(4) {
                for (m, _) in rig.model.keys.members(&k[2], now) {
                    held.insert((k[2].clone(), m));
                }
            }
            match rig.call(&call).await {
                Ok(reply) => {
                    for c in codes(&reply) {
                        seen[c as usize] += 1;
                    }
                    granted += check_grants(&call, &reply, held);
                }
                Err(_) => refused += 1,
            }

            if k % 16 == 15 {
                rig.compare_keys().await;
            }
        }
        rig.compare_keys().await;
    }
    // Every path was taken: each code, grants, refused calls, transitions published.
    eprintln!(
        "{} calls: codes (applied, stale, missing, early, expired, bad) {seen:?}, {granted} \
         leases granted, {refused} calls refused, {} messages published",
        rig.calls, rig.published
    );
    assert!(seen.iter().all(|n| *n > 0), "codes {seen:?}");
    assert!(granted > 0 && refused > 0 && rig.published > 0);
}

/// Random sequences from fixed seeds (`BREAKER_MODEL_SEEDS=n` runs `n` seeds instead of 12).
#[tokio::test]
async fn the_reference_store_answers_what_the_script_answers_in_random_sequences() {
    let seeds = std::env::var("BREAKER_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    random_sequences(0..seeds, 200).await;
}

/// The lease semaphore of the model (the script's rule, transliterated and cross-checked
/// above) grants what the core's `free_slot` grants, applied once per lease, for every cap,
/// number held and number wanted within bounds.
#[test]
fn the_models_lease_semaphore_is_the_cores_free_slot() {
    let mut rows = 0;
    for cap in 0..=6u32 {
        for held in 0..=8u32 {
            for want in 0..=8u32 {
                let mut store = RefStore::new();
                let mut out = Vec::new();
                let [s, wk, p, q] = bkeys("b");
                let ns = ns_keys();
                let keys = vec![ns.replicas, ns.version, s, wk, p, q];
                let half = ww(w(State::HalfOpen, 1));
                let call = |expect: &str, want: u32, cap: u32| -> Vec<String> {
                    let mut a: Vec<String> = ["r", "ch", FAR, "3000", "60000", "1", "b"]
                        .iter()
                        .map(|s| (*s).to_owned())
                        .collect();
                    a.extend(cas_args(
                        expect,
                        &half,
                        "0",
                        "0",
                        "0",
                        "",
                        &want.to_string(),
                        &cap.to_string(),
                        "1000",
                        "",
                    ));
                    a
                };
                // `held` leases first, under a cap that allows them.
                let setup = store
                    .call("cas", &keys, &call("", held, held), 10, "e", &mut out)
                    .unwrap();
                assert_eq!(item(&setup, 0)[2].int(), i64::from(held));
                let r = store
                    .call("cas", &keys, &call(&half, want, cap), 10, "e", &mut out)
                    .unwrap();
                let granted = item(&r, 0).len().saturating_sub(8) as u32;
                let limits = Limits {
                    half_open_probes: cap,
                    successes_to_close: 1,
                    probe_wait: 0,
                };
                let mut word = Word {
                    in_flight: held,
                    ..w(State::HalfOpen, 1)
                };
                let mut core = 0;
                while core < want {
                    let Some(Admit::Probe { next, .. }) = free_slot(word, &limits) else {
                        break;
                    };
                    word = next;
                    core += 1;
                }
                assert_eq!(granted, core, "cap {cap}, {held} held, {want} wanted");
                rows += 1;
            }
        }
    }
    assert_eq!(rows, 7 * 9 * 9);
    let _ = MAX_SAFE;
}
