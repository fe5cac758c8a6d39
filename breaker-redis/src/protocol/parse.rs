//! Reply checks: [`parse`] for an op's reply, [`parse_published`] for a published transition,
//! and the helpers that check each value's type and range.

use super::*;

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

pub(super) fn check_flush(it: &ItemReply, req: &FlushItem<'_>) -> Result<(), StoreError> {
    let g = it.state.generation;
    let has = req.successes + req.failures > 0;
    let ok = g >= req.high_water.generation
        && match it.code {
            Code::Applied => !has || g == req.generation,
            Code::Ignored => has && g == req.generation && it.state.state != State::Closed,
            Code::Tripped => has && g == req.generation + 1 && it.state.state == State::Open,
            Code::Stale => has && g != req.generation,
            Code::Repaired => g == req.high_water.generation || g == req.generation + 1,
            _ => false,
        };
    if ok {
        Ok(())
    } else {
        Err(malformed(
            Op::Flush,
            format!(
                "code {:?} with generation {g} for counts of generation {} (high-water {})",
                it.code, req.generation, req.high_water.generation
            ),
        ))
    }
}

pub(super) fn single(op: Op, v: Value) -> Result<ItemReply, StoreError> {
    parse(op, v, 1)?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| malformed(op, "no item"))
}

fn int(op: Op, v: &Value, what: &str, max: i64) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) if (0..=max).contains(i) => Ok(*i),
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

/// Parses and checks a reply of `expect` items (shape, types, ranges, state/deadline
/// consistency, lease generations).
///
/// # Errors
/// [`StoreError::Malformed`] naming the first thing wrong.
pub fn parse(op: Op, v: Value, expect: usize) -> Result<Reply, StoreError> {
    if let Value::ServerError(e) = &v {
        return Err(StoreError::Server {
            op: op.as_str(),
            message: format!("{e:?}"),
        });
    }
    let top = array(op, &v, "reply")?;
    if top.len() != 4 + expect {
        return Err(malformed(
            op,
            format!("expected {} elements, got {}", 4 + expect, top.len()),
        ));
    }
    if text(op, &top[0], "version tag", 8)? != "brk1" {
        return Err(malformed(op, "unknown version tag"));
    }
    let now = int(op, &top[1], "server time", MAX_SAFE)? as u64;
    if now == 0 {
        return Err(malformed(op, "server time 0"));
    }
    let live = int(op, &top[2], "live replicas", MAX_SAFE)? as u64;
    let version = int(op, &top[3], "namespace version", MAX_SAFE)? as u64;
    let mut items = Vec::with_capacity(expect);
    for (i, raw) in top[4..].iter().enumerate() {
        let what = format!("item {i}");
        let f = array(op, raw, &what)?;
        if f.len() != 13 {
            return Err(malformed(
                op,
                format!("{what}: expected 13 fields, got {}", f.len()),
            ));
        }
        let code =
            Code::from_code(int(op, &f[0], "code", 7)?).ok_or_else(|| malformed(op, "code"))?;
        let generation = int(op, &f[1], "generation", MAX_SAFE)? as u64;
        let state =
            state_from_tag(int(op, &f[2], "state", 4)?).ok_or_else(|| malformed(op, "state"))?;
        let dl = int(op, &f[3], "deadline", MAX_SAFE)? as u64;
        let streak = int(op, &f[4], "open streak", 255)? as u32;
        let probe_successes = int(op, &f[5], "probe successes", 8_191)? as u32;
        let leases_in_flight = int(op, &f[6], "leases in flight", 65_535)? as u32;
        let policy_mismatch = int(op, &f[7], "policy mismatch", 1)? == 1;
        let by = text(op, &f[8], "caused by", 128)?;
        let caused_by = if by.is_empty() {
            None
        } else {
            Some(ReplicaId::parse(by).ok_or_else(|| malformed(op, "caused by: not a replica id"))?)
        };
        let reason = Reason::from_code(int(op, &f[9], "reason", 9)?)
            .ok_or_else(|| malformed(op, "reason: unknown code"))?;
        let fp = text(op, &f[10], "pinned fingerprint", 64)?.to_owned();
        let granted_raw = array(op, &f[11], "granted leases")?;
        let lease_exp = int(op, &f[12], "lease expiry", MAX_SAFE)? as u64;
        if (state == State::Open) != (dl > 0) {
            return Err(malformed(
                op,
                format!("{what}: state {state} with deadline {dl}"),
            ));
        }
        if granted_raw.len() > MAX_LEASES_PER_ACQUIRE as usize {
            return Err(malformed(op, "too many leases"));
        }
        let mut granted = Vec::with_capacity(granted_raw.len());
        for l in granted_raw {
            let member = text(op, l, "lease", 300)?;
            let lg: u64 = member
                .split(':')
                .next()
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| malformed(op, "lease without a generation"))?;
            if lg != generation || lease_exp == 0 {
                return Err(malformed(
                    op,
                    format!("lease of generation {lg} in generation {generation}"),
                ));
            }
            granted.push(Lease {
                member: member.into(),
                generation: lg,
                expiry_ms: lease_exp,
            });
        }
        items.push(ItemReply {
            code,
            state: SharedState {
                generation,
                state,
                deadline_ms: (dl > 0).then_some(dl),
                streak,
                probe_successes,
                caused_by,
                reason,
            },
            leases_in_flight,
            policy_mismatch,
            pinned_fingerprint: fp,
            granted,
            server_now_ms: now,
        });
    }
    Ok(Reply {
        server_now_ms: now,
        live_replicas: live,
        version,
        items,
    })
}

/// A transition as published on the namespace's channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The breaker.
    pub id: BreakerId,
    /// The state entered, with its generation and deadline.
    pub state: SharedState,
    /// The server's time when it was published, ms.
    pub server_now_ms: u64,
}

/// Parses a published message (`brk1|id|generation|state|deadline|now|by|reason|streak`);
/// `None` for
/// anything else (a message that is not ours is ignored, never trusted).
pub fn parse_published(payload: &[u8]) -> Option<Published> {
    let s = std::str::from_utf8(payload).ok()?;
    if s.len() > 1024 {
        return None;
    }
    let mut it = s.split('|');
    if it.next()? != "brk1" {
        return None;
    }
    let id = BreakerId::parse(it.next()?)?;
    let num = |x: Option<&str>| -> Option<i64> {
        let v: i64 = x?.parse().ok()?;
        (0..=MAX_SAFE).contains(&v).then_some(v)
    };
    let generation = num(it.next())? as u64;
    let state = state_from_tag(num(it.next())?)?;
    let dl = num(it.next())? as u64;
    let now = num(it.next())? as u64;
    let by = it.next()?;
    let reason = Reason::from_code(num(it.next())?)?;
    let streak = num(it.next())?;
    if it.next().is_some() || streak > 255 || (state == State::Open) != (dl > 0) || now == 0 {
        return None;
    }
    let caused_by = if by.is_empty() {
        None
    } else {
        Some(ReplicaId::parse(by)?)
    };
    Some(Published {
        id,
        state: SharedState {
            generation,
            state,
            deadline_ms: (dl > 0).then_some(dl),
            streak: streak as u32,
            probe_successes: 0,
            caused_by,
            reason,
        },
        server_now_ms: now,
    })
}
