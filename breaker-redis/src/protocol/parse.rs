//! Reply checks: [`parse`] for an op's reply, [`check`] for each op's own rules,
//! [`parse_published`] for a published transition, and the helpers that check each value's
//! type and range.

use super::*;
use breaker_core::breaker::State;

pub(super) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::NoScriptError || e.to_string().contains("NOSCRIPT")
}

pub(super) fn is_lost_function(e: &redis::RedisError) -> bool {
    e.to_string().contains("Function not found")
}

pub(super) fn malformed(op: Op, what: impl Into<String>) -> StoreError {
    StoreError::Malformed {
        op: op.as_str(),
        what: what.into(),
    }
}

fn int(op: Op, v: &Value, what: &str, max: u64) -> Result<u64, StoreError> {
    match v {
        Value::Int(i) if *i >= 0 && (*i as u64) <= max => Ok(*i as u64),
        Value::Int(i) => Err(malformed(op, format!("{what} {i} out of range 0..={max}"))),
        other => Err(malformed(
            op,
            format!("{what}: expected an integer, got {}", kind(other)),
        )),
    }
}

fn text<'v>(op: Op, v: &'v Value, what: &str, max_len: usize) -> Result<&'v str, StoreError> {
    match v {
        Value::BulkString(b) if b.len() <= max_len => {
            std::str::from_utf8(b).map_err(|_| malformed(op, format!("{what}: not utf-8")))
        }
        Value::SimpleString(s) if s.len() <= max_len => Ok(s),
        Value::BulkString(_) | Value::SimpleString(_) => Err(malformed(
            op,
            format!("{what}: longer than {max_len} bytes"),
        )),
        other => Err(malformed(
            op,
            format!("{what}: expected a string, got {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) | Value::SimpleString(_) | Value::VerbatimString { .. } => "a string",
        Value::Array(_) | Value::Set(_) => "an array",
        Value::Map(_) => "a map",
        Value::Okay => "OK",
        Value::ServerError(_) => "an error",
        _ => "another type",
    }
}

fn array<'v>(op: Op, v: &'v Value, what: &str) -> Result<&'v [Value], StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(malformed(
            op,
            format!("{what}: expected an array, got {}", kind(other)),
        )),
    }
}

/// A stored word: a decimal `u64` whose state tag the core knows and whose probes-in-flight
/// field is zero (the store keeps it so), with `in_flight` probes in flight.
pub(super) fn word(s: &str, in_flight: u32) -> Option<Word> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let raw: u64 = s.parse().ok()?;
    if raw & 0b111 > 4 || (raw >> 16) & 0xffff != 0 || (raw >> 40) > u64::from(GEN_MASK) {
        return None;
    }
    Some(Word {
        in_flight,
        ..Word::decode(raw)
    })
}

use breaker_core::breaker::decide::GEN_MASK;

/// The word, its deadline and metadata of a reply item or a published message.
#[allow(clippy::too_many_arguments)]
fn stored(
    op: Op,
    w: &str,
    in_flight: u64,
    dl: u64,
    by: &str,
    rs: u64,
    fp: &str,
    what: &str,
) -> Result<Option<Stored>, StoreError> {
    if w.is_empty() {
        return Ok(None);
    }
    let in_flight = u32::try_from(in_flight)
        .ok()
        .filter(|n| *n <= breaker_core::breaker::decide::MAX_IN_FLIGHT)
        .ok_or_else(|| malformed(op, format!("{what}: {in_flight} probes in flight")))?;
    let word = word(w, in_flight)
        .ok_or_else(|| malformed(op, format!("{what}: `{w}` is not a state word")))?;
    if (word.state == State::Open) != (dl > 0) {
        return Err(malformed(
            op,
            format!("{what}: state {} with deadline {dl}", word.state),
        ));
    }
    let by = if by.is_empty() {
        None
    } else {
        Some(
            ReplicaId::parse(by)
                .ok_or_else(|| malformed(op, format!("{what}: `by` is not a replica id")))?,
        )
    };
    let reason = u8::try_from(rs)
        .ok()
        .and_then(reason_of)
        .ok_or_else(|| malformed(op, format!("{what}: unknown reason code {rs}")))?;
    Ok(Some(Stored {
        word,
        deadline_ms: dl,
        by,
        reason,
        fingerprint: fp.to_owned(),
    }))
}

/// Parses and checks a reply of `expect` items to `op` (shape, types, ranges, words).
///
/// # Errors
/// [`StoreError::Server`] for an error reply (credentials removed), else
/// [`StoreError::Malformed`] naming the first thing wrong.
pub(super) fn parse(
    op: Op,
    v: Value,
    expect: usize,
    redactor: &Redactor,
) -> Result<Reply, StoreError> {
    if let Value::ServerError(e) = &v {
        return Err(StoreError::Server {
            op: op.as_str(),
            message: redactor.redact(&format!("{e:?}")),
        });
    }
    let top = array(op, &v, "reply")?;
    if top.len() != 5 + expect {
        return Err(malformed(
            op,
            format!("expected {} elements, got {}", 5 + expect, top.len()),
        ));
    }
    if text(op, &top[0], "version tag", 8)? != "brk2" {
        return Err(malformed(op, "unknown version tag"));
    }
    let now = int(op, &top[1], "server time", MAX_SAFE)?;
    if now == 0 {
        return Err(malformed(op, "server time 0"));
    }
    let epoch: Arc<str> = text(op, &top[2], "epoch", 40)?.into();
    let live = int(op, &top[3], "live replicas", MAX_SAFE)?;
    let version = int(op, &top[4], "namespace version", MAX_SAFE)?;
    let mut items = Vec::with_capacity(expect);
    for (i, raw) in top[5..].iter().enumerate() {
        let what = format!("item {i}");
        let f = array(op, raw, &what)?;
        if f.len() < 7 {
            return Err(malformed(
                op,
                format!("{what}: expected at least 7 fields, got {}", f.len()),
            ));
        }
        let code = Code::from_code(int(op, &f[0], "code", 5)? as i64)
            .ok_or_else(|| malformed(op, "code"))?;
        let s = stored(
            op,
            text(op, &f[1], "word", 20)?,
            int(op, &f[2], "probes in flight", MAX_SAFE)?,
            int(op, &f[3], "deadline", MAX_SAFE)?,
            text(op, &f[4], "by", crate::names::MAX_NAME_LEN)?,
            int(op, &f[5], "reason", 255)?,
            text(op, &f[6], "fingerprint", 64)?,
            &what,
        )?;
        let rest = &f[7..];
        let extra = match (op, code) {
            (Op::Add, Code::Applied) => {
                let [s, fl, sl] = rest else {
                    return Err(malformed(
                        op,
                        format!("{what}: expected the window's totals"),
                    ));
                };
                Extra::Totals {
                    successes: int(op, s, "successes", MAX_SAFE)?,
                    failures: int(op, fl, "failures", MAX_SAFE)?,
                    slow: int(op, sl, "slow", MAX_SAFE)?,
                }
            }
            (Op::Vote, Code::Applied) => {
                let [n] = rest else {
                    return Err(malformed(op, format!("{what}: expected the votes")));
                };
                Extra::Votes(int(op, n, "votes", MAX_SAFE)?)
            }
            (Op::Cas, Code::Applied) if !rest.is_empty() => {
                let (exp, members) = rest.split_last().expect("not empty");
                let expiry_ms = int(op, exp, "lease expiry", MAX_SAFE)?;
                if members.is_empty() || members.len() > MAX_LEASES_PER_GRANT as usize {
                    return Err(malformed(
                        op,
                        format!("{what}: {} leases granted", members.len()),
                    ));
                }
                let generation = s.as_ref().map_or(0, |s| s.word.generation);
                let mut leases = Vec::with_capacity(members.len());
                for m in members {
                    let member = text(op, m, "lease", MAX_LEASE_ID)?;
                    let mut parts = member.splitn(3, ':');
                    let (seq, ep) = (parts.next(), parts.next());
                    if seq.map_or(true, |s| s.parse::<u64>().is_err())
                        || ep != Some(&*epoch)
                        || expiry_ms <= now
                    {
                        return Err(malformed(
                            op,
                            format!("{what}: lease `{member}` (expiry {expiry_ms}, now {now})"),
                        ));
                    }
                    leases.push(Lease {
                        member: member.into(),
                        epoch: Arc::clone(&epoch),
                        generation,
                        expiry_ms,
                    });
                }
                Extra::Granted(leases)
            }
            _ if rest.is_empty() => Extra::None,
            _ => {
                return Err(malformed(
                    op,
                    format!("{what}: {} unexpected values for code {code:?}", rest.len()),
                ))
            }
        };
        items.push(ItemReply {
            code,
            stored: s,
            extra,
        });
    }
    Ok(Reply {
        server_now_ms: now,
        epoch,
        live_replicas: live,
        version,
        items,
    })
}

/// The rules of each op's reply, beyond its shape.
pub(super) mod check {
    use super::*;

    fn without_probes(w: Word) -> Word {
        Word { in_flight: 0, ..w }
    }

    /// An applied `add` answers the word it expected and the window's totals, which hold at
    /// least the counts it added; a stale one a word it did not expect.
    pub(crate) fn add(it: &ItemReply, req: &AddItem<'_>) -> Result<(), StoreError> {
        let have = it.stored.as_ref().map(|s| without_probes(s.word));
        let ok = match it.code {
            Code::Applied => {
                have == Some(without_probes(req.expect))
                    && matches!(it.extra, Extra::Totals { successes, failures, .. }
                        if successes >= req.successes && failures >= req.failures)
            }
            Code::Stale => have.is_some() && have != Some(without_probes(req.expect)),
            Code::Missing => have.is_none() && !req.create,
            Code::Expired | Code::Bad => true,
            Code::Early => false,
        };
        verdict(Op::Add, ok, it, req.target)
    }

    /// An applied `vote` answers the word it expected and at least one vote.
    pub(crate) fn vote(it: &ItemReply, expect: Word) -> Result<(), StoreError> {
        let have = it.stored.as_ref().map(|s| without_probes(s.word));
        let ok = match it.code {
            Code::Applied => {
                have == Some(without_probes(expect))
                    && matches!(it.extra, Extra::Votes(n) if n >= 1)
            }
            Code::Stale => have.is_some() && have != Some(without_probes(expect)),
            Code::Missing => have.is_none(),
            Code::Expired | Code::Bad => true,
            Code::Early => false,
        };
        if ok {
            Ok(())
        } else {
            Err(malformed(
                Op::Vote,
                format!("code {:?} with word {:?}", it.code, it.stored),
            ))
        }
    }

    /// An applied `cas` answers the word it sent, with at most the leases it asked for,
    /// expiring after the server's now; one not applied answers why (a word it did not expect,
    /// or, `Early`, the one it did).
    pub(crate) fn cas(it: &ItemReply, req: &CasItem<'_>, _now: u64) -> Result<(), StoreError> {
        let have = it.stored.as_ref().map(|s| without_probes(s.word));
        let expected = req.expect.map(without_probes);
        let ok = match it.code {
            Code::Applied => {
                have == Some(without_probes(req.next))
                    && match &it.extra {
                        Extra::Granted(l) => l.len() <= req.want as usize,
                        Extra::None => true,
                        _ => false,
                    }
            }
            Code::Stale => have.is_some() && have != expected,
            Code::Missing => have.is_none() && expected.is_some(),
            Code::Early => have == expected || (req.join && have == Some(without_probes(req.next))),
            Code::Expired | Code::Bad => true,
        };
        verdict(Op::Cas, ok, it, req.target)
    }

    fn verdict(op: Op, ok: bool, it: &ItemReply, t: &Target) -> Result<(), StoreError> {
        if ok {
            Ok(())
        } else {
            Err(malformed(
                op,
                format!(
                    "breaker `{}`: code {:?} with word {:?}",
                    t.id,
                    it.code,
                    it.stored.as_ref().map(|s| s.word)
                ),
            ))
        }
    }
}

/// A transition as published on the namespace's channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    /// The breaker.
    pub(crate) id: BreakerId,
    /// The word entered, with its deadline and cause.
    pub(crate) stored: Stored,
    /// The server's time when it was published, ms.
    pub(crate) server_now_ms: u64,
    /// The namespace's epoch then.
    pub(crate) epoch: Arc<str>,
}

/// Parses a published message (`brk2|id|word|in flight|deadline|now|by|reason|epoch`); `None`
/// for anything else (a message that is not ours is ignored, never trusted).
pub(crate) fn parse_published(payload: &[u8]) -> Option<Published> {
    let s = std::str::from_utf8(payload).ok()?;
    if s.len() > 2048 {
        return None;
    }
    let mut it = s.split('|');
    if it.next()? != "brk2" {
        return None;
    }
    let id = BreakerId::parse(it.next()?)?;
    let num = |x: Option<&str>| -> Option<u64> {
        let v: u64 = x?.parse().ok()?;
        (v <= MAX_SAFE).then_some(v)
    };
    let w = it.next()?;
    let in_flight = num(it.next())?;
    let dl = num(it.next())?;
    let now = num(it.next())?;
    let by = it.next()?;
    let rs = num(it.next())?;
    let epoch = it.next()?;
    if it.next().is_some() || now == 0 || w.is_empty() || epoch.len() > 40 {
        return None;
    }
    let stored = stored(Op::Cas, w, in_flight, dl, by, rs, "", "published").ok()??;
    Some(Published {
        id,
        stored,
        server_now_ms: now,
        epoch: epoch.into(),
    })
}
