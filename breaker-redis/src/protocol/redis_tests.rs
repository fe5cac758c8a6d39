//! The store's primitives against a real `redis-server`: the compare-and-set and its guards,
//! the window, the votes, the epoch, the argument checks, and the cross-check of the one rule
//! the script keeps (the lease semaphore) against the core's `free_slot`.

use super::*;
use crate::test_server::Server;
use breaker_core::breaker::decide::{self, free_slot, Admit, Limits};
use breaker_core::breaker::State;

/// No `valid_until` bound.
const FAR: u64 = MAX_SAFE;

fn ns() -> Namespace {
    Namespace::new("t").unwrap()
}

fn target(name: &str, cap: u32) -> Target {
    Target::new(
        &ns(),
        BreakerId::new(name).unwrap(),
        Params {
            fingerprint: "00ff00ff00ff00ff".into(),
            ttl_ms: 60_000,
            window_ms: 10_000,
            buckets: 10,
            cap,
            lease_ms: 5_000,
            quorum: 1,
        },
    )
}

fn proto(replica: &str) -> Protocol {
    Protocol::new(
        &ns(),
        ReplicaId::new(replica).unwrap(),
        std::time::Duration::from_secs(3),
        std::time::Duration::from_secs(60),
    )
}

fn word(state: State, generation: u32) -> Word {
    Word {
        state,
        successes: 0,
        in_flight: 0,
        streak: u32::from(state == State::Open || state == State::HalfOpen),
        generation,
    }
}

fn cas<'a>(t: &'a Target, expect: Option<Word>, next: Word) -> CasItem<'a> {
    CasItem {
        target: t,
        expect,
        next,
        reason: TransitionReason::Manual,
        join: false,
        not_before: 0,
        cooldown_ms: (next.state == State::Open).then_some(30_000),
        want: 0,
        release: None,
    }
}

async fn one<C: ConnectionLike + Send>(
    p: &Protocol,
    c: &mut C,
    item: CasItem<'_>,
    valid_until: u64,
) -> ItemReply {
    p.cas(c, &[item], valid_until)
        .await
        .unwrap()
        .items
        .remove(0)
}

fn granted(it: &ItemReply) -> usize {
    match &it.extra {
        Extra::Granted(l) => l.len(),
        _ => 0,
    }
}

macro_rules! server {
    () => {
        match Server::start() {
            Some(s) => s,
            None => return,
        }
    };
}

#[tokio::test]
async fn a_compare_and_set_applies_only_to_the_word_it_was_decided_on() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r1");
    let t = target("b", 1);
    // A breaker the store never held is expected as missing.
    let closed = word(State::Closed, 0);
    let it = one(&p, &mut c, cas(&t, None, closed), FAR).await;
    assert_eq!(it.code, Code::Applied);
    assert_eq!(it.stored.as_ref().unwrap().word, closed);
    // A write decided on another word is refused, and answers the word in force.
    let open = decide::reopen(closed);
    let it = one(&p, &mut c, cas(&t, Some(word(State::Open, 7)), open), FAR).await;
    assert_eq!(it.code, Code::Stale);
    assert_eq!(it.stored.unwrap().word, closed);
    let it = one(&p, &mut c, cas(&t, None, open), FAR).await;
    assert_eq!(
        it.code,
        Code::Stale,
        "missing expected, the store holds one"
    );
    // Decided on the word in force: applied, with the deadline from the store's clock.
    let r = p
        .cas(&mut c, &[cas(&t, Some(closed), open)], FAR)
        .await
        .unwrap();
    let st = r.items[0].stored.as_ref().unwrap();
    assert_eq!((r.items[0].code, st.word), (Code::Applied, open));
    assert_eq!(st.deadline_ms, r.server_now_ms + 30_000);
    assert_eq!(st.by.as_ref().unwrap().as_str(), "r1");
    assert_eq!(st.reason, TransitionReason::Manual);
    assert_eq!(st.fingerprint, "00ff00ff00ff00ff");
    // The stored word is the core's encoding, as a decimal string.
    let raw: String = s.cmd(&["HGET", "br:{t}:s:b", "w"]);
    assert_eq!(raw, open.encode().to_string());
}

/// `valid_until`: a call that runs after the client gave up on it writes nothing (a hung
/// server resuming runs the requests queued on its socket).
#[tokio::test]
async fn a_call_past_its_valid_until_writes_nothing() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r1");
    let t = target("b", 2);
    let now = p.server_time(&mut c).await.unwrap();
    let mut item = cas(&t, None, word(State::HalfOpen, 1));
    item.want = 2;
    let r = p.cas(&mut c, &[item.clone()], now - 1).await.unwrap();
    assert_eq!(r.items[0].code, Code::Expired);
    let exists: i64 = s.cmd(&["EXISTS", "br:{t}:s:b", "br:{t}:p:b"]);
    assert_eq!(exists, 0, "nothing written");
    let it = one(&p, &mut c, item, now + 60_000).await;
    assert_eq!((it.code, granted(&it)), (Code::Applied, 2));
}

/// `valid_until` is exclusive (model finding F1): a call that runs in the server's millisecond
/// equal to its `valid_until` writes nothing. The client's estimate of the server's clock is
/// floored to the millisecond while it gives up at the exact timeout, so a run in that
/// millisecond may come after the client gave up. Each attempt reads the server's clock and
/// sends at once with `valid_until` = that millisecond: on loopback most attempts run within
/// it (an inclusive bound would apply them), and every one must answer `expired`.
#[tokio::test]
async fn a_call_in_its_valid_until_millisecond_writes_nothing() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r1");
    let t = target("b", 2);
    for attempt in 0..20 {
        let mut item = cas(&t, None, word(State::HalfOpen, 1));
        item.want = 1;
        let now = p.server_time(&mut c).await.unwrap();
        let it = one(&p, &mut c, item, now).await;
        assert_eq!(it.code, Code::Expired, "attempt {attempt}");
        let exists: i64 = s.cmd(&["EXISTS", "br:{t}:s:b", "br:{t}:p:b"]);
        assert_eq!(exists, 0, "attempt {attempt}: nothing written");
    }
}

/// `not_before`: a promotion out of open applies only once the store's clock passed the
/// deadline; `join`: a replica that finds the same promotion made first gets its leases too.
#[tokio::test]
async fn promotions_wait_for_the_store_clock_and_are_joined() {
    let s = server!();
    let mut c = s.conn().await;
    let (a, b) = (proto("a"), proto("b"));
    let t = target("b", 2);
    let open = word(State::Open, 1);
    one(&a, &mut c, cas(&t, None, open), FAR).await;
    let Admit::Probe { next, .. } = decide::admit_open(open, 0, 0) else {
        panic!("promotes")
    };
    let now = a.server_time(&mut c).await.unwrap();
    let ask = |not_before| CasItem {
        join: true,
        not_before,
        want: 1,
        reason: TransitionReason::CooldownElapsed,
        ..cas(&t, Some(open), next)
    };
    let it = one(&a, &mut c, ask(now + 60_000), FAR).await;
    assert_eq!(it.code, Code::Early);
    assert_eq!(it.stored.unwrap().word, open);
    let it = one(&a, &mut c, ask(now), FAR).await;
    assert_eq!((it.code, granted(&it)), (Code::Applied, 1));
    let st = it.stored.unwrap();
    assert_eq!((st.word.state, st.word.in_flight), (State::HalfOpen, 1));
    // Another replica decided the same promotion on the same word: joined, one lease more,
    // no second transition (the generation stays).
    let it = one(&b, &mut c, ask(now), FAR).await;
    assert_eq!((it.code, granted(&it)), (Code::Applied, 1));
    assert_eq!(it.stored.as_ref().unwrap().word.generation, next.generation);
    assert_eq!(it.stored.unwrap().by.unwrap().as_str(), "a");
    // The cap holds across them.
    let it = one(&b, &mut c, ask(now), FAR).await;
    assert_eq!((it.code, granted(&it)), (Code::Applied, 0));
}

/// The one rule the script keeps, checked against the core: for every number of unexpired
/// leases, cap and number wanted, the store grants what the core's `free_slot` grants when
/// applied once per lease (table-driven; `LUA_CROSS_CHECK` in CI).
#[tokio::test]
async fn the_lease_semaphore_grants_what_the_cores_free_slot_grants() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r");
    let mut rows = 0;
    for cap in 1..=4u32 {
        for held in 0..=cap + 1 {
            for want in 0..=5u32 {
                let name = format!("x{cap}-{held}-{want}");
                let t = target(&name, cap);
                let half = word(State::HalfOpen, 1);
                // `held` leases first (a larger cap then, as after a reload that lowered it).
                let mut setup = cas(&t, None, half);
                setup.want = held;
                let big = Target {
                    params: Params {
                        cap: cap + 2,
                        ..t.params.clone()
                    },
                    ..t.clone()
                };
                setup.target = &big;
                let it = one(&p, &mut c, setup, FAR).await;
                assert_eq!(granted(&it), held as usize);
                let mut ask = cas(&t, Some(half), half);
                ask.want = want;
                let it = one(&p, &mut c, ask, FAR).await;
                // The core: reserve slots one by one while `free_slot` admits.
                let limits = Limits {
                    half_open_probes: cap,
                    successes_to_close: 1,
                    probe_wait: 0,
                };
                let mut w = Word {
                    in_flight: held,
                    ..half
                };
                let mut core = 0;
                while core < want {
                    let Some(Admit::Probe { next, .. }) = free_slot(w, &limits) else {
                        break;
                    };
                    w = next;
                    core += 1;
                }
                assert_eq!(
                    granted(&it),
                    core as usize,
                    "cap {cap}, {held} held, {want} wanted"
                );
                assert_eq!(it.stored.unwrap().word.in_flight, held + core);
                rows += 1;
            }
        }
    }
    assert_eq!(rows, (3 + 4 + 5 + 6) * 6);
}

#[tokio::test]
async fn counts_are_added_to_the_window_of_the_expected_word_only() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r");
    let t = target("b", 1);
    let closed = word(State::Closed, 0);
    let add = |create, successes, failures| AddItem {
        target: &t,
        expect: closed,
        create,
        successes,
        failures,
        slow: 1,
    };
    // Never written: missing, unless created.
    let r = p
        .flush(&mut c, &[add(false, 3, 1)], &[], FAR)
        .await
        .unwrap();
    assert_eq!(r.items[0].code, Code::Missing);
    let r = p.flush(&mut c, &[add(true, 3, 1)], &[], FAR).await.unwrap();
    assert_eq!(
        r.items[0].extra,
        Extra::Totals {
            successes: 3,
            failures: 1,
            slow: 1
        }
    );
    let r = p
        .flush(&mut c, &[add(false, 2, 2)], &[&t], FAR)
        .await
        .unwrap();
    assert_eq!(
        r.items[0].extra,
        Extra::Totals {
            successes: 5,
            failures: 3,
            slow: 2
        }
    );
    assert_eq!(r.items.len(), 2, "the add, then the read");
    assert_eq!(r.items[1].stored.as_ref().unwrap().word, closed);
    // Another period in force: stale, not added.
    let open = decide::reopen(closed);
    one(&p, &mut c, cas(&t, Some(closed), open), FAR).await;
    let r = p
        .flush(&mut c, &[add(false, 9, 9)], &[], FAR)
        .await
        .unwrap();
    assert_eq!(r.items[0].code, Code::Stale);
    let window: Option<String> = s.cmd(&["GET", "br:{t}:w:b"]);
    assert_eq!(window, None, "a transition clears the window");
}

#[tokio::test]
async fn votes_count_distinct_replicas_of_the_expected_period() {
    let s = server!();
    let mut c = s.conn().await;
    let t = target("b", 1);
    let closed = word(State::Closed, 0);
    one(&proto("a"), &mut c, cas(&t, None, closed), FAR).await;
    let votes = |it: &ItemReply| match it.extra {
        Extra::Votes(n) => n,
        _ => 0,
    };
    for (replica, expected) in [("a", 1), ("a", 1), ("b", 2), ("c", 3)] {
        let r = proto(replica)
            .vote(&mut c, &t, closed, false, FAR)
            .await
            .unwrap();
        assert_eq!(votes(&r.items[0]), expected, "{replica}");
    }
    let r = proto("d")
        .vote(&mut c, &t, word(State::Closed, 5), false, FAR)
        .await
        .unwrap();
    assert_eq!(r.items[0].code, Code::Stale, "a vote of another period");
}

/// Every argument of every item is checked before the first write: a bad item answers `bad`
/// and leaves its keys untouched, the others of the call go on.
#[tokio::test]
async fn a_bad_item_never_harms_another_breakers_batch() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r");
    let (good, bad) = (target("good", 1), target("bad", 1));
    // A probe cap above the word's field: refused by the script's own bound.
    let bad = Target {
        params: Params {
            cap: MAX_PROBES + 1,
            ..bad.params.clone()
        },
        ..bad
    };
    let mut b = cas(&bad, None, word(State::HalfOpen, 1));
    b.want = 1;
    let r = p
        .cas(&mut c, &[b, cas(&good, None, word(State::Closed, 0))], FAR)
        .await
        .unwrap();
    assert_eq!(
        r.items.iter().map(|i| i.code).collect::<Vec<_>>(),
        [Code::Bad, Code::Applied]
    );
    let exists: i64 = s.cmd(&["EXISTS", "br:{t}:s:bad", "br:{t}:p:bad"]);
    assert_eq!(exists, 0);
    let exists: i64 = s.cmd(&["EXISTS", "br:{t}:s:good"]);
    assert_eq!(exists, 1);
}

/// The namespace's epoch is made by the first write and changes when the store loses its
/// data (here `FLUSHALL`; a restart without persistence is the same).
#[tokio::test]
async fn the_epoch_changes_when_the_store_loses_its_data() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r");
    let t = target("b", 1);
    let r = p
        .cas(&mut c, &[cas(&t, None, word(State::Closed, 0))], FAR)
        .await
        .unwrap();
    let first = r.epoch.clone();
    assert!(!first.is_empty());
    let r = p.read(&mut c, &[&t], FAR).await.unwrap();
    assert_eq!(r.epoch, first);
    let _: () = s.cmd(&["FLUSHALL"]);
    let r = p.read(&mut c, &[&t], FAR).await.unwrap();
    assert_ne!(r.epoch, first);
    assert_eq!(r.items[0].code, Code::Missing);
}

/// A server without the function library (restarted empty, or `FUNCTION FLUSH`) gets it
/// again; the `EVALSHA` path reloads its script on `NOSCRIPT`.
#[tokio::test]
async fn a_lost_library_or_script_is_loaded_again() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("r");
    let t = target("b", 1);
    one(&p, &mut c, cas(&t, None, word(State::Closed, 0)), FAR).await;
    let _: () = s.cmd(&["FUNCTION", "FLUSH"]);
    assert_eq!(
        p.read(&mut c, &[&t], FAR).await.unwrap().items[0].code,
        Code::Applied
    );
    p.set_mode(ScriptMode::Eval);
    let _: () = s.cmd(&["SCRIPT", "FLUSH"]);
    assert_eq!(
        p.read(&mut c, &[&t], FAR).await.unwrap().items[0].code,
        Code::Applied
    );
    assert_eq!(
        p.read(&mut c, &[&t], FAR).await.unwrap().items[0].code,
        Code::Applied
    );
}

/// Bytes of a breaker's keys: a window of `buckets` buckets, every one filled (large counts),
/// its word, `leases` leases and (`vote`) one vote; every key with an expiry.
async fn footprint(s: &Server, name: &str, buckets: u32, leases: u32, vote: bool) -> i64 {
    let mut c = s.conn().await;
    let p = proto("replica-with-a-longish-name-01");
    let base = target(name, leases);
    let t = Target {
        params: Params {
            window_ms: u64::from(buckets) * 20,
            buckets,
            ..base.params.clone()
        },
        ..base
    };
    let closed = word(State::Closed, 0);
    for _ in 0..buckets + 2 {
        let add = AddItem {
            target: &t,
            expect: closed,
            create: true,
            successes: 123_456,
            failures: 7_890,
            slow: 55,
        };
        p.flush(&mut c, &[add], &[], FAR).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if vote {
        p.vote(&mut c, &t, closed, false, FAR).await.unwrap();
    }
    let k = &t.keys;
    let usage = |key: &str| {
        let ttl: i64 = s.cmd(&["PTTL", key]);
        assert!(ttl > 0, "{key} has no expiry ({ttl})");
        s.cmd::<i64>(&["MEMORY", "USAGE", key, "SAMPLES", "0"])
    };
    let window: String = s.cmd(&["GET", &k.window]);
    assert!(
        window.split(';').count() + 2 >= buckets as usize,
        "{window}"
    );
    let mut total = usage(&k.window);
    if vote {
        total += usage(&k.votes);
    }
    // The leases belong to a half-open period, whose transition cleared the window.
    let mut ask = cas(&t, Some(closed), word(State::HalfOpen, 1));
    ask.want = leases;
    let it = one(&p, &mut c, ask, FAR).await;
    assert_eq!(granted(&it), leases as usize);
    total + usage(&k.state) + usage(&k.leases)
}

/// G10: every key expires, and a breaker costs at most ~1 KiB (the default window of 10
/// buckets); the largest window (20 buckets) with 3 leases and a vote stays under 1.5 KiB.
#[tokio::test]
async fn every_key_expires_and_a_breaker_stays_under_a_kibibyte() {
    let s = server!();
    let small = footprint(&s, "small", 10, 1, false).await;
    let large = footprint(&s, "large", MAX_BUCKETS, 3, true).await;
    eprintln!("G10: bytes per breaker: {small} (10 buckets, 1 lease), {large} (20 buckets, 3 leases, 1 vote)");
    assert!(small <= 1024, "G10: {small} bytes per breaker");
    assert!(large <= 1536, "G10: {large} bytes for the largest window");
}

/// A keyed breaker's key, however hostile, writes only under its own namespace's hash tag.
#[tokio::test]
async fn hostile_keys_stay_inside_their_namespace() {
    let s = server!();
    let mut c = s.conn().await;
    let p = proto("a");
    for key in [
        "}{victim}:s:x",
        "../../victim",
        "a\r\nFLUSHALL\r\n",
        "\u{1F600}{x}",
        "%41",
        "",
    ] {
        let id = BreakerId::keyed("up", key).unwrap();
        let t = Target::new(&ns(), id, target("x", 1).params);
        one(&p, &mut c, cas(&t, None, word(State::Closed, 0)), FAR).await;
    }
    let all: Vec<String> = s.cmd(&["KEYS", "*"]);
    assert_eq!(
        all.iter().filter(|k| k.contains(":s:up#")).count(),
        6,
        "{all:?}"
    );
    for k in &all {
        assert!(k.starts_with("br:{t}:"), "{k} escaped its namespace");
        assert_eq!(k.matches('{').count(), 1, "{k}");
    }
}

/// G9: random schedules of writes from three replicas, each decided by the core's deciders on
/// that replica's own (often stale) view, against a reference: a write applies exactly when
/// the store holds the word it was decided on, and the store's word is always the reference's.
#[test]
fn random_schedules_apply_no_write_decided_on_another_word() {
    use crate::plan::{self, View};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let Some(s) = Server::start() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let op = (0..3usize, 0..6u8);
    let mut runner = TestRunner::new(Config {
        cases: 48,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&proptest::collection::vec(op, 1..40), |ops| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let t = target(&format!("g9-{n}"), 2);
            let replicas: Vec<Protocol> = (0..3).map(|i| proto(&format!("r{i}"))).collect();
            let policy = breaker_core::breaker::BreakerPolicy::default();
            let result: Result<(), TestCaseError> = rt.block_on(async {
                let mut c = s.conn().await;
                let mut views = [View::INITIAL; 3];
                let mut model: Option<Word> = None;
                for (r, action) in ops {
                    let v = views[r];
                    let now0 = |_: u32| 0u64;
                    let write = match action {
                        0 => plan::plan_trip(v.word, TransitionReason::ConsecutiveFailures, now0),
                        1 => plan::plan_acquire(&v, 0).map(|a| a.write),
                        2 => plan::plan_end(
                            v.word,
                            v.word.generation,
                            decide::ProbeEnd::Success,
                            &policy,
                            now0,
                        ),
                        3 => plan::plan_end(
                            v.word,
                            v.word.generation,
                            decide::ProbeEnd::Failure,
                            &policy,
                            now0,
                        ),
                        4 => Some(plan::plan_force(v.expect(), State::Closed, now0)),
                        _ => Some(plan::plan_force(v.expect(), State::ForcedOpen, now0)),
                    };
                    let Some(mut w) = write else { continue };
                    w.expect = v.expect();
                    let item = CasItem {
                        target: &t,
                        expect: w.expect,
                        next: w.next,
                        reason: w.reason,
                        join: false,
                        not_before: 0,
                        cooldown_ms: w.cooldown_ms,
                        want: 0,
                        release: None,
                    };
                    let it = one(&replicas[r], &mut c, item, FAR).await;
                    let strip = |x: Word| Word { in_flight: 0, ..x };
                    let applies = model.map(strip) == w.expect.map(strip);
                    prop_assert_eq!(it.code == Code::Applied, applies, "replica {} {:?}", r, w);
                    if applies {
                        model = Some(strip(w.next));
                    }
                    let stored = it.stored.as_ref().map(|st| strip(st.word));
                    prop_assert_eq!(stored, model, "the store's word is the reference's");
                    if let Some(st) = &it.stored {
                        views[r] = View {
                            word: st.word,
                            deadline_ms: st.deadline_ms,
                            known: true,
                            seen_ms: 0,
                        };
                    }
                }
                Ok(())
            });
            result
        })
        .unwrap();
}
