//! The reference store: `store.lua`'s semantics as a small pure state machine.
//!
//! Two layers, each as plain as it can be:
//! - [`Keys`]: the few Redis commands the script uses (`HMGET`, `HSET`, `HSETNX`, `HINCRBY`,
//!   `GET`, `SET .. PX`, `DEL`, `ZADD`, `ZREM`, `ZCARD`, `ZREMRANGEBYSCORE`, `PEXPIRE`,
//!   `PUBLISH`) over an ordered map of keys, with Redis's expiry rule (a key whose expiry is
//!   strictly before `now` is gone);
//! - [`RefStore::call`]: `dispatch` and the four ops transliterated from `store.lua`, line by
//!   line and in the same order, over those commands, taking the raw `KEYS` and `ARGV` strings
//!   and answering the raw reply (or the script's error), so a reply can be compared with a
//!   real server's value by value (`cross_check.rs`).
//!
//! The server's clock is an input (`now`, ms): the cross-check passes the `TIME` the real reply
//! carries, the model checker its own ticks. So is the token of a new epoch (the real script
//! makes it from `TIME`'s microseconds).
//!
//! Keep this file in step with `store.lua`: every change there is a change here, and the
//! cross-check fails until both agree.

use crate::protocol::{
    MAX_BUCKETS, MAX_ID_LEN, MAX_ITEMS_PER_CALL, MAX_LEASES_PER_GRANT, MAX_LEASE_ID, MAX_SAFE,
};
use breaker_core::breaker::decide::MAX_IN_FLIGHT;
use std::collections::BTreeMap;

/// A value of a script's reply, as Redis converts Lua's: integers (Lua numbers, truncated),
/// strings, and arrays (Lua tables).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum V {
    Int(i64),
    Str(String),
    List(Vec<V>),
}

impl V {
    pub(crate) fn int(&self) -> i64 {
        match self {
            V::Int(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    pub(crate) fn str(&self) -> &str {
        match self {
            V::Str(s) => s,
            other => panic!("expected a string, got {other:?}"),
        }
    }

    pub(crate) fn list(&self) -> &[V] {
        match self {
            V::List(l) => l,
            other => panic!("expected an array, got {other:?}"),
        }
    }

    /// A real server's reply value in this form.
    pub(crate) fn of(v: &redis::Value) -> V {
        match v {
            redis::Value::Int(i) => V::Int(*i),
            redis::Value::BulkString(b) => V::Str(String::from_utf8_lossy(b).into_owned()),
            redis::Value::SimpleString(s) => V::Str(s.clone()),
            redis::Value::Array(a) => V::List(a.iter().map(V::of).collect()),
            other => panic!("unexpected reply value {other:?}"),
        }
    }
}

fn s(x: impl ToString) -> V {
    V::Str(x.to_string())
}

/// One key's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Val {
    Hash(BTreeMap<String, String>),
    Str(String),
    /// Member -> score (the script's scores are integers).
    ZSet(BTreeMap<String, i64>),
}

/// A key and its expiry (server ms; `None`: none).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entry {
    val: Val,
    expire_at: Option<i64>,
}

/// The keys of a Redis server, with the commands the script uses. `now` is the server's clock
/// (ms) during the command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Keys {
    map: BTreeMap<String, Entry>,
}

impl Keys {
    /// Redis's rule: a key is expired once `now` is past its expiry.
    fn live(&mut self, key: &str, now: i64) -> Option<&mut Entry> {
        let expired = self
            .map
            .get(key)
            .is_some_and(|e| e.expire_at.is_some_and(|at| now > at));
        if expired {
            self.map.remove(key);
        }
        self.map.get_mut(key)
    }

    fn hash(&mut self, key: &str, now: i64) -> &mut BTreeMap<String, String> {
        if self.live(key, now).is_none() {
            self.map.insert(
                key.to_owned(),
                Entry {
                    val: Val::Hash(BTreeMap::new()),
                    expire_at: None,
                },
            );
        }
        match &mut self.map.get_mut(key).unwrap().val {
            Val::Hash(h) => h,
            other => panic!("WRONGTYPE: {key} holds {other:?}"),
        }
    }

    fn zset(&mut self, key: &str, now: i64) -> &mut BTreeMap<String, i64> {
        if self.live(key, now).is_none() {
            self.map.insert(
                key.to_owned(),
                Entry {
                    val: Val::ZSet(BTreeMap::new()),
                    expire_at: None,
                },
            );
        }
        match &mut self.map.get_mut(key).unwrap().val {
            Val::ZSet(z) => z,
            other => panic!("WRONGTYPE: {key} holds {other:?}"),
        }
    }

    /// Removes a collection left empty (Redis never keeps an empty hash or sorted set).
    fn tidy(&mut self, key: &str) {
        let empty = match self.map.get(key).map(|e| &e.val) {
            Some(Val::Hash(h)) => h.is_empty(),
            Some(Val::ZSet(z)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.map.remove(key);
        }
    }

    pub(crate) fn hmget(&mut self, key: &str, fields: &[&str], now: i64) -> Vec<Option<String>> {
        match self.live(key, now).map(|e| &e.val) {
            Some(Val::Hash(h)) => fields.iter().map(|f| h.get(*f).cloned()).collect(),
            Some(other) => panic!("WRONGTYPE: {key} holds {other:?}"),
            None => vec![None; fields.len()],
        }
    }

    /// `HGET` without expiring anything (for invariants).
    pub(crate) fn peek(&self, key: &str, field: &str, now: i64) -> Option<&str> {
        match self.map.get(key) {
            Some(Entry {
                val: Val::Hash(h),
                expire_at,
            }) if !expire_at.is_some_and(|at| now > at) => h.get(field).map(String::as_str),
            _ => None,
        }
    }

    pub(crate) fn hget(&mut self, key: &str, field: &str, now: i64) -> Option<String> {
        self.hmget(key, &[field], now).remove(0)
    }

    pub(crate) fn hset(&mut self, key: &str, pairs: &[(&str, String)], now: i64) {
        let h = self.hash(key, now);
        for (f, v) in pairs {
            h.insert((*f).to_owned(), v.clone());
        }
    }

    /// Whether the field was set (it was absent).
    pub(crate) fn hsetnx(&mut self, key: &str, field: &str, v: String, now: i64) -> bool {
        let h = self.hash(key, now);
        if h.contains_key(field) {
            return false;
        }
        h.insert(field.to_owned(), v);
        true
    }

    pub(crate) fn hincrby(&mut self, key: &str, field: &str, by: i64, now: i64) -> i64 {
        let h = self.hash(key, now);
        let n = h
            .get(field)
            .map_or(0, |v| v.parse::<i64>().expect("an integer field"))
            + by;
        h.insert(field.to_owned(), n.to_string());
        n
    }

    pub(crate) fn get(&mut self, key: &str, now: i64) -> Option<String> {
        match self.live(key, now).map(|e| &e.val) {
            Some(Val::Str(s)) => Some(s.clone()),
            Some(other) => panic!("WRONGTYPE: {key} holds {other:?}"),
            None => None,
        }
    }

    pub(crate) fn set_px(&mut self, key: &str, v: String, px: i64, now: i64) {
        self.map.insert(
            key.to_owned(),
            Entry {
                val: Val::Str(v),
                expire_at: Some(now + px),
            },
        );
    }

    pub(crate) fn del(&mut self, keys: &[&str]) {
        for k in keys {
            self.map.remove(*k);
        }
    }

    pub(crate) fn pexpire(&mut self, key: &str, ms: i64, now: i64) {
        if let Some(e) = self.live(key, now) {
            e.expire_at = Some(now + ms);
        }
    }

    pub(crate) fn zadd(&mut self, key: &str, score: i64, member: &str, now: i64) {
        self.zset(key, now).insert(member.to_owned(), score);
    }

    pub(crate) fn zrem(&mut self, key: &str, member: &str, now: i64) {
        if self.live(key, now).is_some() {
            self.zset(key, now).remove(member);
            self.tidy(key);
        }
    }

    pub(crate) fn zscore(&mut self, key: &str, member: &str, now: i64) -> Option<i64> {
        match self.live(key, now).map(|e| &e.val) {
            Some(Val::ZSet(z)) => z.get(member).copied(),
            Some(other) => panic!("WRONGTYPE: {key} holds {other:?}"),
            None => None,
        }
    }

    pub(crate) fn zcard(&mut self, key: &str, now: i64) -> i64 {
        match self.live(key, now).map(|e| &e.val) {
            Some(Val::ZSet(z)) => z.len() as i64,
            Some(other) => panic!("WRONGTYPE: {key} holds {other:?}"),
            None => 0,
        }
    }

    /// `ZREMRANGEBYSCORE key -inf max` (inclusive), or `(max` (exclusive).
    pub(crate) fn zrem_upto(&mut self, key: &str, max: i64, inclusive: bool, now: i64) {
        if self.live(key, now).is_some() {
            self.zset(key, now)
                .retain(|_, score| !(*score < max || (inclusive && *score == max)));
            self.tidy(key);
        }
    }

    /// The members of a sorted set (for the model checker's invariants).
    pub(crate) fn members(&mut self, key: &str, now: i64) -> Vec<(String, i64)> {
        match self.live(key, now).map(|e| &e.val) {
            Some(Val::ZSet(z)) => z.iter().map(|(m, s)| (m.clone(), *s)).collect(),
            _ => Vec::new(),
        }
    }

    /// Every key dropped whose expiry is before `now` (what Redis's active expiry does; the
    /// model checker calls it so that states differing only in dead keys are one state).
    pub(crate) fn expire_all(&mut self, now: i64) {
        self.map
            .retain(|_, e| !e.expire_at.is_some_and(|at| now > at));
    }

    /// Every live key at `now`: its value and expiry (server ms).
    pub(crate) fn dump(&mut self, now: i64) -> BTreeMap<String, (Val, Option<i64>)> {
        self.expire_all(now);
        self.map
            .iter()
            .map(|(k, e)| (k.clone(), (e.val.clone(), e.expire_at)))
            .collect()
    }
}

/// A message the script published: channel and payload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Published {
    pub(crate) channel: String,
    pub(crate) payload: String,
}

/// The store: its keys. See the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct RefStore {
    pub(crate) keys: Keys,
}

// The reply codes of `store.lua`.
pub(crate) const APPLIED: i64 = 0;
pub(crate) const STALE: i64 = 1;
pub(crate) const MISSING: i64 = 2;
pub(crate) const EARLY: i64 = 3;
pub(crate) const EXPIRED: i64 = 4;
pub(crate) const BAD: i64 = 5;

/// The script's limits (generated into it from the same constants: `protocol::limits`).
const MAX_MS: u64 = MAX_SAFE;
const MAX_REPLICA: usize = crate::names::MAX_NAME_LEN;
const MAX_CHANNEL: usize = 16 + crate::names::MAX_NAME_LEN;
const EPOCH_MOD: i64 = 1_000_000;

/// `num`: a decimal string of 1 to 16 digits, at most `MAX_MS`.
fn num(v: Option<&str>) -> Option<i64> {
    let v = v?;
    if v.is_empty() || v.len() > 16 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = v.parse().ok()?;
    (n <= MAX_MS).then_some(n as i64)
}

/// `word`: a decimal of at most 20 digits, or '' (missing).
fn word(v: Option<&str>) -> Option<String> {
    let v = v?;
    if v.len() > 20 || (!v.is_empty() && !v.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    Some(v.to_owned())
}

fn text(v: Option<&str>, max: usize) -> Option<String> {
    let v = v?;
    (v.len() <= max).then(|| v.to_owned())
}

/// A breaker's keys, from `KEYS`.
struct B {
    name: String,
    skey: String,
    wkey: String,
    pkey: String,
    qkey: String,
}

/// What `load` answers: the stored word with its probes in flight.
#[derive(Clone)]
struct Loaded {
    w: String,
    dl: i64,
    by: String,
    rs: i64,
    fp: String,
    inflight: i64,
}

struct Ctx {
    now: i64,
    replica: String,
    channel: String,
    ns_ttl: i64,
    mkey: String,
    epoch: String,
}

/// An op's parsed per-item arguments.
enum Args {
    Read,
    Add {
        expect: String,
        create: i64,
        succ: i64,
        fail: i64,
        slow: i64,
        window: i64,
        buckets: i64,
        ttl: i64,
    },
    Vote {
        expect: String,
        create: i64,
        window: i64,
        ttl: i64,
    },
    Cas {
        expect: String,
        next: String,
        tr: i64,
        join: i64,
        nb: i64,
        cool: Option<i64>,
        want: i64,
        cap: i64,
        lease: i64,
        release: String,
        rs: i64,
        fp: String,
        ttl: i64,
        /// The lease request's nonce (`''`: none).
        nonce: Option<i64>,
    },
}

/// How many per-item arguments each op takes after the name (`OPS[op].n`).
pub(crate) fn arity(op: &str) -> Option<usize> {
    Some(match op {
        "read" => 0,
        "add" => 8,
        "vote" => VOTE_ARITY,
        "cas" => 14,
        _ => return None,
    })
}

/// `vote`'s arguments: expected word, create, window, ttl.
const VOTE_ARITY: usize = 4;

fn parse(op: &str, a: &[Option<&str>]) -> Option<Args> {
    let at = |i: usize| a.get(i).copied().flatten();
    match op {
        "read" => Some(Args::Read),
        "add" => {
            let (expect, create, succ, fail, slow) =
                (word(at(0)), num(at(1)), num(at(2)), num(at(3)), num(at(4)));
            let (window, buckets, ttl) = (num(at(5)), num(at(6)), num(at(7)));
            let (
                Some(expect),
                Some(create),
                Some(succ),
                Some(fail),
                Some(slow),
                Some(window),
                Some(buckets),
                Some(ttl),
            ) = (expect, create, succ, fail, slow, window, buckets, ttl)
            else {
                return None;
            };
            if expect.is_empty()
                || create > 1
                || buckets < 1
                || buckets > i64::from(MAX_BUCKETS)
                || window / buckets < 1
                || slow > succ + fail
                || ttl < 1
            {
                return None;
            }
            Some(Args::Add {
                expect,
                create,
                succ,
                fail,
                slow,
                window,
                buckets,
                ttl,
            })
        }
        "vote" => {
            let (Some(expect), Some(create), Some(window), Some(ttl)) =
                (word(at(0)), num(at(1)), num(at(2)), num(at(3)))
            else {
                return None;
            };
            if expect.is_empty() || create > 1 || window < 1 || ttl < 1 {
                return None;
            }
            Some(Args::Vote {
                expect,
                create,
                window,
                ttl,
            })
        }
        "cas" => {
            let cool_raw = at(5);
            let cool = if cool_raw != Some("") {
                num(cool_raw)
            } else {
                None
            };
            let (expect, next, tr, join, nb) =
                (word(at(0)), word(at(1)), num(at(2)), num(at(3)), num(at(4)));
            let (want, cap, lease, release, rs, fp, ttl) = (
                num(at(6)),
                num(at(7)),
                num(at(8)),
                text(at(9), MAX_LEASE_ID),
                num(at(10)),
                text(at(11), 64),
                num(at(12)),
            );
            let nonce_raw = at(13);
            let nonce = if nonce_raw == Some("") {
                None
            } else {
                Some(num(nonce_raw)?)
            };
            let (
                Some(expect),
                Some(next),
                Some(tr),
                Some(join),
                Some(nb),
                Some(want),
                Some(cap),
                Some(lease),
                Some(release),
                Some(rs),
                Some(fp),
                Some(ttl),
            ) = (
                expect, next, tr, join, nb, want, cap, lease, release, rs, fp, ttl,
            )
            else {
                return None;
            };
            if (cool_raw != Some("") && cool.is_none())
                || next.is_empty()
                || tr > 1
                || join > 1
                || want > i64::from(MAX_LEASES_PER_GRANT)
                || cap > i64::from(MAX_IN_FLIGHT)
                || rs > 255
                || ttl < 1
                || (want > 0 && lease < 1)
            {
                return None;
            }
            Some(Args::Cas {
                expect,
                next,
                tr,
                join,
                nb,
                cool,
                want,
                cap,
                lease,
                release,
                rs,
                fp,
                ttl,
                nonce,
            })
        }
        _ => None,
    }
}

fn item(code: i64, st: Option<&Loaded>, extra: Vec<V>) -> V {
    let mut out = match st {
        Some(st) => vec![
            V::Int(code),
            s(&st.w),
            V::Int(st.inflight),
            V::Int(st.dl),
            s(&st.by),
            V::Int(st.rs),
            s(&st.fp),
        ],
        None => vec![
            V::Int(code),
            s(""),
            V::Int(0),
            V::Int(0),
            s(""),
            V::Int(0),
            s(""),
        ],
    };
    out.extend(extra);
    V::List(out)
}

impl RefStore {
    /// An empty store (a server restarted without persistence).
    pub(crate) fn new() -> RefStore {
        RefStore::default()
    }

    /// `load`: the stored word with its probes in flight (expired leases removed first).
    fn load(&mut self, ctx: &Ctx, b: &B) -> Option<Loaded> {
        let now = ctx.now;
        let v = self
            .keys
            .hmget(&b.skey, &["w", "dl", "by", "rs", "fp"], now);
        let w = v[0].clone()?;
        if word(Some(&w)).is_none() || w.is_empty() {
            return None;
        }
        self.keys.zrem_upto(&b.pkey, now, true, now);
        Some(Loaded {
            w,
            dl: num(v[1].as_deref()).unwrap_or(0),
            by: v[2].clone().unwrap_or_default(),
            rs: num(v[3].as_deref()).unwrap_or(0),
            fp: v[4].clone().unwrap_or_default(),
            inflight: self.keys.zcard(&b.pkey, now),
        })
    }

    fn bump_version(&mut self, ctx: &Ctx) {
        self.keys.hincrby(&ctx.mkey, "n", 1, ctx.now);
        self.keys.pexpire(&ctx.mkey, ctx.ns_ttl, ctx.now);
    }

    fn publish(&mut self, ctx: &Ctx, b: &B, st: &Loaded, out: &mut Vec<Published>) {
        let payload = [
            "brk2".to_owned(),
            b.name.clone(),
            st.w.clone(),
            st.inflight.to_string(),
            st.dl.to_string(),
            ctx.now.to_string(),
            st.by.clone(),
            st.rs.to_string(),
            ctx.epoch.clone(),
        ]
        .join("|");
        out.push(Published {
            channel: ctx.channel.clone(),
            payload,
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn window_add(
        &mut self,
        ctx: &Ctx,
        b: &B,
        succ: i64,
        fail: i64,
        slow: i64,
        window: i64,
        buckets: i64,
    ) -> (i64, i64, i64) {
        let bms = window / buckets;
        let epoch = (ctx.now / bms).rem_euclid(EPOCH_MOD);
        let old = self.keys.get(&b.wkey, ctx.now);
        let mut parts: Vec<String> = Vec::new();
        let (mut ts, mut tf, mut tl) = (succ, fail, slow);
        let (mut cs, mut cf, mut cl) = (succ, fail, slow);
        if let Some(old) = old.filter(|o| o.len() <= 40 * MAX_BUCKETS as usize) {
            for (seen, bucket) in buckets_of(&old).into_iter().enumerate() {
                if seen + 1 > MAX_BUCKETS as usize {
                    break;
                }
                let (e, bs, bf, bl) = bucket;
                let age = (epoch - e).rem_euclid(EPOCH_MOD);
                if age == 0 {
                    cs += bs;
                    cf += bf;
                    cl += bl;
                    ts += bs;
                    tf += bf;
                    tl += bl;
                } else if age < buckets {
                    parts.push(format!("{e}:{bs}:{bf}:{bl}"));
                    ts += bs;
                    tf += bf;
                    tl += bl;
                }
            }
        }
        if succ + fail > 0 {
            parts.push(format!("{epoch}:{cs}:{cf}:{cl}"));
            self.keys
                .set_px(&b.wkey, parts.join(";"), (2 * window).max(1000), ctx.now);
        }
        (ts, tf, tl)
    }

    fn op(&mut self, ctx: &Ctx, b: &B, a: &Args, published: &mut Vec<Published>) -> V {
        let now = ctx.now;
        match a {
            Args::Read => match self.load(ctx, b) {
                None => item(MISSING, None, vec![]),
                Some(st) => item(APPLIED, Some(&st), vec![]),
            },
            Args::Add {
                expect,
                create,
                succ,
                fail,
                slow,
                window,
                buckets,
                ttl,
            } => {
                let mut st = self.load(ctx, b);
                if st.is_none() && *create == 1 {
                    self.create(ctx, b, expect, *ttl);
                    st = self.load(ctx, b);
                }
                let Some(st) = st else {
                    return item(MISSING, None, vec![]);
                };
                if st.w != *expect {
                    return item(STALE, Some(&st), vec![]);
                }
                let (ts, tf, tl) = self.window_add(ctx, b, *succ, *fail, *slow, *window, *buckets);
                if succ + fail > 0 {
                    self.keys.pexpire(&b.skey, *ttl, now);
                }
                item(APPLIED, Some(&st), vec![V::Int(ts), V::Int(tf), V::Int(tl)])
            }
            Args::Vote {
                expect,
                create,
                window,
                ttl,
            } => {
                let mut st = self.load(ctx, b);
                if st.is_none() && *create == 1 {
                    self.create(ctx, b, expect, *ttl);
                    st = self.load(ctx, b);
                }
                let Some(st) = st else {
                    return item(MISSING, None, vec![]);
                };
                if st.w != *expect {
                    return item(STALE, Some(&st), vec![]);
                }
                self.keys.zadd(&b.qkey, now, &ctx.replica, now);
                self.keys.zrem_upto(&b.qkey, now - window, false, now);
                self.keys.pexpire(&b.qkey, *ttl, now);
                let n = self.keys.zcard(&b.qkey, now);
                item(APPLIED, Some(&st), vec![V::Int(n)])
            }
            Args::Cas {
                expect,
                next,
                tr,
                join,
                nb,
                cool,
                want,
                cap,
                lease,
                release,
                rs,
                fp,
                ttl,
                nonce,
            } => {
                // A nonce's lease `i`.
                let member = |i: i64| {
                    format!(
                        "{}:{}:{}:{i}",
                        nonce.unwrap_or_default(),
                        ctx.epoch,
                        ctx.replica
                    )
                };
                if nonce.is_some() && *want == 0 {
                    for i in 1..=i64::from(MAX_LEASES_PER_GRANT) {
                        self.keys.zrem(&b.pkey, &member(i), now);
                    }
                }
                let loaded = self.load(ctx, b);
                let have = loaded.as_ref().map_or("", |l| l.w.as_str()).to_owned();
                let joined = *join == 1 && loaded.is_some() && have == *next && have != *expect;
                if have != *expect && !joined {
                    return match &loaded {
                        Some(l) => item(STALE, Some(l), vec![]),
                        None => item(MISSING, None, vec![]),
                    };
                }
                if now < *nb {
                    return item(EARLY, loaded.as_ref(), vec![]);
                }
                let mut st = loaded.unwrap_or(Loaded {
                    w: expect.clone(),
                    dl: 0,
                    by: String::new(),
                    rs: 0,
                    fp: String::new(),
                    inflight: 0,
                });
                if !release.is_empty() {
                    self.keys.zrem(&b.pkey, release, now);
                }
                let transition = *tr == 1 && !joined;
                if !joined {
                    st.w = next.clone();
                    if transition {
                        self.keys.del(&[&b.wkey, &b.pkey, &b.qkey]);
                        st.by = ctx.replica.clone();
                        st.rs = *rs;
                        st.fp = fp.clone();
                        st.dl = 0;
                    }
                    if let Some(c) = cool {
                        st.dl = now + c;
                    }
                }
                let mut granted = Vec::new();
                let mut exp = now + lease;
                if *want > 0 && nonce.is_some() {
                    // Granted before to this nonce (its reply was lost), still held: the same
                    // leases.
                    for i in 1..=*want {
                        if let Some(score) = self.keys.zscore(&b.pkey, &member(i), now) {
                            granted.push(s(member(i)));
                            exp = exp.min(score);
                        }
                    }
                }
                if *want > 0 && granted.is_empty() {
                    let held = self.keys.zcard(&b.pkey, now);
                    let n = (*want).min((cap - held).max(0));
                    for i in 1..=n {
                        let m = if nonce.is_some() {
                            member(i)
                        } else {
                            let seq = self.keys.hincrby(&b.skey, "ls", 1, now);
                            format!("{seq}:{}:{}", ctx.epoch, ctx.replica)
                        };
                        self.keys.zadd(&b.pkey, exp, &m, now);
                        granted.push(s(m));
                    }
                    if n > 0 {
                        self.keys.pexpire(&b.pkey, *ttl, now);
                    }
                }
                if !granted.is_empty() {
                    granted.push(V::Int(exp));
                }
                st.inflight = self.keys.zcard(&b.pkey, now);
                self.keys.hset(
                    &b.skey,
                    &[
                        ("w", st.w.clone()),
                        ("dl", st.dl.to_string()),
                        ("by", st.by.clone()),
                        ("rs", st.rs.to_string()),
                        ("fp", st.fp.clone()),
                    ],
                    now,
                );
                self.keys.pexpire(&b.skey, *ttl, now);
                if transition {
                    self.bump_version(ctx);
                    self.publish(ctx, b, &st, published);
                }
                item(APPLIED, Some(&st), granted)
            }
        }
    }

    /// `add`'s and `vote`'s `create`: the expected word written as a breaker never written.
    fn create(&mut self, ctx: &Ctx, b: &B, expect: &str, ttl: i64) {
        self.keys.hset(
            &b.skey,
            &[
                ("w", expect.to_owned()),
                ("dl", "0".into()),
                ("by", String::new()),
                ("rs", "0".into()),
                ("fp", String::new()),
            ],
            ctx.now,
        );
        self.keys.pexpire(&b.skey, ttl, ctx.now);
    }

    /// One call of op `op` (`dispatch`): the raw reply, or the script's error message. `now`:
    /// the server's clock (ms); `new_epoch`: the token an epoch made now gets. The messages
    /// published are appended to `published`.
    pub(crate) fn call(
        &mut self,
        op: &str,
        keys: &[String],
        args: &[String],
        now: i64,
        new_epoch: &str,
        published: &mut Vec<Published>,
    ) -> Result<V, String> {
        let Some(spec_n) = arity(op) else {
            return Err("BRK unknown op".into());
        };
        let arg = |i: usize| args.get(i).map(String::as_str);
        let n = num(arg(5));
        let (valid_until, live, ns_ttl) = (num(arg(2)), num(arg(3)), num(arg(4)));
        let bad = match (n, valid_until, live, ns_ttl) {
            (Some(n), Some(_), Some(_), Some(ns_ttl)) => {
                n < 1
                    || n > MAX_ITEMS_PER_CALL as i64
                    || ns_ttl < 1
                    || args.len() as i64 != 6 + n * (spec_n as i64 + 1)
                    || keys.len() as i64 != 2 + 4 * n
                    || text(arg(0), MAX_REPLICA).is_none()
                    || arg(0).map_or(true, str::is_empty)
                    || text(arg(1), MAX_CHANNEL).is_none()
            }
            _ => true,
        };
        if bad {
            return Err("BRK bad arguments".into());
        }
        let (n, valid_until, live, ns_ttl) = (
            n.unwrap() as usize,
            valid_until.unwrap(),
            live.unwrap(),
            ns_ttl.unwrap(),
        );
        let mut ctx = Ctx {
            now,
            replica: args[0].clone(),
            channel: args[1].clone(),
            ns_ttl,
            mkey: keys[1].clone(),
            epoch: String::new(),
        };
        let mut out = vec![s("brk2"), V::Int(now), s(""), V::Int(0), V::Int(0)];
        // Every argument of every item is checked before the first write.
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            let base = 6 + i * (spec_n + 1);
            let k = 2 + i * 4;
            let a: Vec<Option<&str>> = (1..=spec_n).map(|j| arg(base + j)).collect();
            let name = text(arg(base), MAX_ID_LEN);
            let parsed = match &name {
                Some(nm) if !nm.is_empty() => parse(op, &a),
                _ => None,
            };
            items.push((
                B {
                    name: name.unwrap_or_default(),
                    skey: keys[k].clone(),
                    wkey: keys[k + 1].clone(),
                    pkey: keys[k + 2].clone(),
                    qkey: keys[k + 3].clone(),
                },
                parsed,
            ));
        }
        // Exclusive (F1): a run in the ms equal to `valid_until` may come after the client gave
        // up.
        if now >= valid_until {
            out[2] = s(self.keys.hget(&ctx.mkey, "e", now).unwrap_or_default());
            for _ in 0..n {
                out.push(item(EXPIRED, None, vec![]));
            }
            return Ok(V::List(out));
        }
        if self.keys.hsetnx(&ctx.mkey, "e", new_epoch.to_owned(), now) {
            self.keys.pexpire(&ctx.mkey, ns_ttl, now);
        }
        ctx.epoch = self.keys.hget(&ctx.mkey, "e", now).unwrap_or_default();
        if op == "add" {
            self.keys.zadd(&keys[0], now, &ctx.replica, now);
            self.keys.zrem_upto(&keys[0], now - live, false, now);
            self.keys.pexpire(&keys[0], ns_ttl, now);
        }
        for (b, a) in &items {
            let r = match a {
                Some(a) => self.op(&ctx, b, a, published),
                None => item(BAD, None, vec![]),
            };
            out.push(r);
        }
        out[2] = s(&ctx.epoch);
        out[3] = V::Int(self.keys.zcard(&keys[0], now));
        out[4] = V::Int(
            self.keys
                .hget(&ctx.mkey, "n", now)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        );
        Ok(V::List(out))
    }
}

/// `string.gmatch(old, '(%d+):(%d+):(%d+):(%d+)')`: every match, scanning left to right.
fn buckets_of(old: &str) -> Vec<(i64, i64, i64, i64)> {
    let b = old.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some((m, end)) = bucket_at(b, i) {
            out.push(m);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The pattern anchored at `i` (Lua's `%d+` is greedy and does not backtrack into a shorter
/// run here: a run is always followed by `:` or the end).
fn bucket_at(b: &[u8], mut i: usize) -> Option<((i64, i64, i64, i64), usize)> {
    let mut nums = [0i64; 4];
    for (k, slot) in nums.iter_mut().enumerate() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        *slot = std::str::from_utf8(&b[start..i]).ok()?.parse().ok()?;
        if k < 3 {
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
        }
    }
    Some(((nums[0], nums[1], nums[2], nums[3]), i))
}
