-- The fleet's store, protocol version 2: primitives over a breaker's word, no breaker rule.
--
-- Loaded as one function library (`breaker_v2`, functions `breaker_v2_<op>`), or, on a server
-- without functions, as one EVALSHA script whose first argument is the op's name. Both wrap
-- `dispatch` below. The limits (`MAX_*`) are generated from the Rust constants and prepended.
--
-- What the store keeps per breaker, and what it does not decide:
--  * `w`: the breaker's state word, the core breaker's own `u64` encoding as a decimal string,
--    kept with its probes-in-flight field zero. The script never reads inside it: it compares
--    it with the word a client expected (string equality) and stores the word the client
--    decided. Every decision (admission, trips, probe ends, cooldowns, the rate rules, the
--    quorum count's threshold) is the client's, made with the core breaker's deciders.
--  * `dl`: the open deadline, server ms (set from the `cooldown` a client sends, on the
--    store's own clock); `by`, `rs`, `fp`: who made the last transition, its reason code and
--    that replica's policy fingerprint.
--  * the probe leases (sorted set, score = expiry, server ms). The probes in flight of the
--    word are materialized from them at every read (expired leases removed first). The one
--    decision kept here, for atomicity, is the lease semaphore: grant `min(want, cap - leases)`;
--    `tests/redis/protocol.rs` feeds the same inputs to the core's `free_slot` and asserts the
--    same grants.
--  * the window of aggregated counts (time buckets), the quorum votes, and per namespace the
--    live replicas, a version counter and the epoch (a token made when the namespace's data
--    is first written: a store that lost it, restarted empty or flushed, makes a new one, and
--    the replicas reconcile).
--
-- Rules every op follows:
--  * Time is the server's (`TIME`), in milliseconds. No client clock is ever read.
--  * `valid_until` (server ms, exclusive): a call that runs at that ms or later (a request the
--    client gave up on, executed when a hung server resumed) writes nothing and answers
--    `expired`. Exclusive because the client's estimate of the server's clock is floored to
--    the ms while it gives up at the exact timeout: a run in the ms equal to `valid_until`
--    may come after the client gave up.
--  * Every argument of every item is checked before the first write; a bad item answers
--    `bad` and is skipped, the others go on.
--  * A compare-and-set applies only if the stored word is the one the client expected (a
--    missing breaker is expected as the empty string). On a transition (the client says so):
--    window, leases (but those it grants) and votes are cleared, the version bumped, and the
--    new word published.
--  * Every key written gets an expiry: hygiene only. Every loop is bounded (items per call,
--    buckets, leases per grant).
--  * Keys come only from KEYS (built and escaped by the client; one hash tag per namespace).
--
-- KEYS: [1] live-replica zset, [2] namespace meta hash (`n`: version, `e`: epoch), then 4 per
--       item: state hash, window string, lease zset, vote zset.
-- ARGV: [1] replica id, [2] channel, [3] valid_until ms, [4] live window ms,
--       [5] namespace ttl ms, [6] items in this call, then the op's per-item arguments.
-- Reply: { 'brk2', server now ms, epoch, live replicas, version, item, ... }
--   item: { code, word ('' if missing), probes in flight, deadline ms, by, reason, fingerprint,
--           op-specific values... }

-- codes
local APPLIED, STALE, MISSING, EARLY, EXPIRED, BAD = 0, 1, 2, 3, 4, 5

local function int(x)
  return string.format('%d', x)
end

local function num(v)
  if v == false or v == nil then return nil end
  if type(v) == 'string' and (#v < 1 or #v > 16 or not string.match(v, '^%d+$')) then
    return nil
  end
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n > MAX_MS then return nil end
  return n
end

-- A word: a decimal u64 of at most 20 digits, or '' (missing).
local function word(v)
  if type(v) ~= 'string' or #v > 20 then return nil end
  if v ~= '' and not string.match(v, '^%d+$') then return nil end
  return v
end

local function text(v, max)
  if type(v) ~= 'string' or #v > max then return nil end
  return v
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The stored word with its probes in flight (unexpired leases). nil word: missing.
local function load(ctx, b)
  local v = redis.call('HMGET', b.skey, 'w', 'dl', 'by', 'rs', 'fp')
  local w = v[1]
  if not w or not word(w) or w == '' then return nil end
  redis.call('ZREMRANGEBYSCORE', b.pkey, '-inf', int(ctx.now))
  return { w = w, dl = num(v[2]) or 0, by = v[3] or '', rs = num(v[4]) or 0, fp = v[5] or '',
    inflight = redis.call('ZCARD', b.pkey) }
end

local function item(code, s, extra)
  local out
  if s then
    out = { code, s.w, s.inflight, s.dl, s.by, s.rs, s.fp }
  else
    out = { code, '', 0, 0, '', 0, '' }
  end
  for _, x in ipairs(extra or {}) do out[#out + 1] = x end
  return out
end

local function bump_version(ctx)
  local v = redis.call('HINCRBY', ctx.mkey, 'n', 1)
  redis.call('PEXPIRE', ctx.mkey, ctx.ns_ttl)
  return v
end

local function publish(ctx, b, s)
  redis.call('PUBLISH', ctx.channel, table.concat({ 'brk2', b.name, s.w, int(s.inflight),
    int(s.dl), int(ctx.now), s.by, int(s.rs), ctx.epoch }, '|'))
end

-- The window is one string of its non-empty buckets, `epoch:successes:failures:slow;...`,
-- epochs counted modulo 10^6 (unambiguous: the whole string is rewritten on every write, buckets
-- older than the window are dropped then, and the key expires two windows after its last write).
local EPOCH_MOD = 1000000

-- Adds counts to the current bucket; the window's totals: successes, failures, slow.
local function window_add(ctx, b, a)
  local bms = math.floor(a.window / a.buckets)
  local epoch = math.floor(ctx.now / bms) % EPOCH_MOD
  local old = redis.call('GET', b.wkey)
  local parts, ts, tf, tl = {}, a.succ, a.fail, a.slow
  local cs, cf, cl = a.succ, a.fail, a.slow
  if old and #old <= 40 * MAX_BUCKETS then
    local seen = 0
    for e, s, f, l in string.gmatch(old, '(%d+):(%d+):(%d+):(%d+)') do
      seen = seen + 1
      if seen > MAX_BUCKETS then break end
      e, s, f, l = tonumber(e), tonumber(s), tonumber(f), tonumber(l)
      local age = (epoch - e) % EPOCH_MOD
      if age == 0 then
        cs, cf, cl = cs + s, cf + f, cl + l
        ts, tf, tl = ts + s, tf + f, tl + l
      elseif age < a.buckets then
        parts[#parts + 1] = int(e) .. ':' .. int(s) .. ':' .. int(f) .. ':' .. int(l)
        ts, tf, tl = ts + s, tf + f, tl + l
      end
    end
  end
  if a.succ + a.fail > 0 then
    parts[#parts + 1] = int(epoch) .. ':' .. int(cs) .. ':' .. int(cf) .. ':' .. int(cl)
    redis.call('SET', b.wkey, table.concat(parts, ';'), 'PX', int(math.max(2 * a.window, 1000)))
  end
  return ts, tf, tl
end

-- Per-item arguments after the name: the parser (nil: bad) and the op.
local OPS = {
  -- (no arguments) the word, nothing written
  read = { n = 0, parse = function(_) return {} end, fn = function(ctx, b, _)
    local s = load(ctx, b)
    if not s then return item(MISSING) end
    return item(APPLIED, s)
  end },

  -- expected word, create 0/1, successes, failures, slow, window ms, buckets, ttl ms: the
  -- counts are added if the stored word is the expected one (the closed period they were
  -- recorded in), and the window's totals returned. With `create`, a breaker the store holds
  -- no word for is created as the expected word first (one never written: a lost one is the
  -- client's to seed).
  add = { n = 8, parse = function(a)
    local p = { expect = word(a[1]), create = num(a[2]), succ = num(a[3]), fail = num(a[4]),
      slow = num(a[5]), window = num(a[6]), buckets = num(a[7]), ttl = num(a[8]) }
    if not (p.expect and p.create and p.succ and p.fail and p.slow and p.window and p.buckets
      and p.ttl) or p.expect == '' or p.create > 1 or p.buckets < 1 or p.buckets > MAX_BUCKETS
      or p.buckets ~= math.floor(p.buckets) or math.floor(p.window / p.buckets) < 1
      or p.slow > p.succ + p.fail or p.ttl < 1 then
      return nil
    end
    return p
  end, fn = function(ctx, b, a)
    local s = load(ctx, b)
    if not s and a.create == 1 then
      redis.call('HSET', b.skey, 'w', a.expect, 'dl', '0', 'by', '', 'rs', '0', 'fp', '')
      redis.call('PEXPIRE', b.skey, int(a.ttl))
      s = load(ctx, b)
    end
    if not s then return item(MISSING) end
    if s.w ~= a.expect then return item(STALE, s) end
    local ts, tf, tl = window_add(ctx, b, a)
    if a.succ + a.fail > 0 then redis.call('PEXPIRE', b.skey, int(a.ttl)) end
    return item(APPLIED, s, { ts, tf, tl })
  end },

  -- expected word, create 0/1, window ms, ttl ms: records this replica's vote in the expected
  -- word's period (with `create`, a breaker never written is created as the expected word
  -- first); the distinct votes within the window.
  vote = { n = 4, parse = function(a)
    local p = { expect = word(a[1]), create = num(a[2]), window = num(a[3]), ttl = num(a[4]) }
    if not (p.expect and p.create and p.window and p.ttl) or p.expect == '' or p.create > 1
      or p.window < 1 or p.ttl < 1 then
      return nil
    end
    return p
  end, fn = function(ctx, b, a)
    local s = load(ctx, b)
    if not s and a.create == 1 then
      redis.call('HSET', b.skey, 'w', a.expect, 'dl', '0', 'by', '', 'rs', '0', 'fp', '')
      redis.call('PEXPIRE', b.skey, int(a.ttl))
      s = load(ctx, b)
    end
    if not s then return item(MISSING) end
    if s.w ~= a.expect then return item(STALE, s) end
    redis.call('ZADD', b.qkey, int(ctx.now), ctx.replica)
    redis.call('ZREMRANGEBYSCORE', b.qkey, '-inf', '(' .. int(ctx.now - a.window))
    redis.call('PEXPIRE', b.qkey, int(a.ttl))
    return item(APPLIED, s, { redis.call('ZCARD', b.qkey) })
  end },

  -- expected word ('' = missing), next word, transition 0/1, join 0/1, not before ms (0:
  -- none), cooldown ms ('': keep the deadline; on a transition without it, none), leases
  -- wanted, probe cap, lease ms, lease to release ('': none), reason code, fingerprint, ttl ms.
  -- With `join`, a stored word that already is `next` (another replica made the same
  -- deterministic change first) is joined: nothing is written but the leases.
  cas = { n = 13, parse = function(a)
    local p = { expect = word(a[1]), next = word(a[2]), tr = num(a[3]), join = num(a[4]),
      nb = num(a[5]), want = num(a[7]), cap = num(a[8]), lease = num(a[9]),
      release = text(a[10], MAX_LEASE_ID), rs = num(a[11]), fp = text(a[12], 64),
      ttl = num(a[13]) }
    if a[6] ~= '' then p.cool = num(a[6]) end
    if not (p.expect and p.next and p.tr and p.join and p.nb and p.want and p.cap and p.lease
      and p.release and p.rs and p.fp and p.ttl) or (a[6] ~= '' and not p.cool)
      or p.next == '' or p.tr > 1 or p.join > 1 or p.want > MAX_LEASES or p.cap > MAX_PROBES
      or p.rs > 255 or p.ttl < 1 or (p.want > 0 and p.lease < 1) then
      return nil
    end
    return p
  end, fn = function(ctx, b, a)
    local s = load(ctx, b)
    local have = ''
    if s then have = s.w end
    local joined = a.join == 1 and s ~= nil and have == a.next and have ~= a.expect
    if have ~= a.expect and not joined then
      if s then return item(STALE, s) end
      return item(MISSING)
    end
    if ctx.now < a.nb then return item(EARLY, s) end
    if not s then
      s = { w = a.expect, dl = 0, by = '', rs = 0, fp = '', inflight = 0 }
    end
    if a.release ~= '' then
      redis.call('ZREM', b.pkey, a.release)
    end
    local transition = a.tr == 1 and not joined
    if not joined then
      s.w = a.next
      if transition then
        redis.call('DEL', b.wkey, b.pkey, b.qkey)
        s.by, s.rs, s.fp, s.dl = ctx.replica, a.rs, a.fp, 0
      end
      if a.cool then s.dl = ctx.now + a.cool end
    end
    -- The lease semaphore: the one decision kept here (see the header).
    local granted = {}
    if a.want > 0 then
      local held = redis.call('ZCARD', b.pkey)
      local n = math.min(a.want, math.max(a.cap - held, 0))
      local exp = ctx.now + a.lease
      for i = 1, n do
        local seq = redis.call('HINCRBY', b.skey, 'ls', 1)
        local member = int(seq) .. ':' .. ctx.epoch .. ':' .. ctx.replica
        redis.call('ZADD', b.pkey, int(exp), member)
        granted[i] = member
      end
      if n > 0 then
        redis.call('PEXPIRE', b.pkey, int(a.ttl))
        granted[#granted + 1] = exp
      end
    end
    s.inflight = redis.call('ZCARD', b.pkey)
    redis.call('HSET', b.skey, 'w', s.w, 'dl', int(s.dl), 'by', s.by, 'rs', int(s.rs), 'fp', s.fp)
    redis.call('PEXPIRE', b.skey, int(a.ttl))
    if transition then
      bump_version(ctx)
      publish(ctx, b, s)
    end
    return item(APPLIED, s, granted)
  end },
}

local function dispatch(op, keys, args)
  local spec = OPS[op]
  if not spec then return redis.error_reply('BRK unknown op') end
  local n = num(args[6])
  local valid_until, live, ns_ttl = num(args[3]), num(args[4]), num(args[5])
  if not n or n < 1 or n > MAX_ITEMS or n ~= math.floor(n) or not valid_until or not live
    or not ns_ttl or ns_ttl < 1 or #args ~= 6 + n * (spec.n + 1) or #keys ~= 2 + 4 * n
    or not text(args[1], MAX_REPLICA) or #args[1] < 1 or not text(args[2], MAX_CHANNEL) then
    return redis.error_reply('BRK bad arguments')
  end
  local ctx = { now = now_ms(), replica = args[1], channel = args[2], ns_ttl = int(ns_ttl),
    mkey = keys[2] }
  local out = { 'brk2', ctx.now, '', 0, 0 }
  -- Every argument of every item is checked before the first write.
  local items = {}
  for i = 0, n - 1 do
    local base = 6 + i * (spec.n + 1)
    local k = 2 + i * 4
    local a = {}
    for j = 1, spec.n do a[j] = args[base + 1 + j] end
    local name = text(args[base + 1], MAX_ID)
    local parsed = nil
    if name and #name >= 1 then parsed = spec.parse(a) end
    items[i + 1] = { b = { name = name, skey = keys[k + 1], wkey = keys[k + 2],
      pkey = keys[k + 3], qkey = keys[k + 4] }, a = parsed }
  end
  if ctx.now >= valid_until then
    out[3] = redis.call('HGET', ctx.mkey, 'e') or ''
    for i = 1, n do out[#out + 1] = item(EXPIRED) end
    return out
  end
  if redis.call('HSETNX', ctx.mkey, 'e', int(ctx.now) .. '.' .. redis.call('TIME')[2]) == 1 then
    redis.call('PEXPIRE', ctx.mkey, ctx.ns_ttl)
  end
  ctx.epoch = redis.call('HGET', ctx.mkey, 'e')
  if op == 'add' then
    redis.call('ZADD', keys[1], int(ctx.now), ctx.replica)
    redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', '(' .. int(ctx.now - live))
    redis.call('PEXPIRE', keys[1], ctx.ns_ttl)
  end
  for i = 1, n do
    local it = items[i]
    if it.a then
      out[#out + 1] = spec.fn(ctx, it.b, it.a)
    else
      out[#out + 1] = item(BAD)
    end
  end
  out[3] = ctx.epoch
  out[4] = redis.call('ZCARD', keys[1])
  out[5] = tonumber(redis.call('HGET', ctx.mkey, 'n') or '0') or 0
  return out
end
