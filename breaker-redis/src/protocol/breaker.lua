-- The shared-breaker protocol, version 1: every write to a shared breaker goes through here.
--
-- Loaded as one function library (`breaker_v1`, functions `breaker_v1_<op>`), or, on a server
-- without functions, as one EVALSHA script whose first argument is the op's name. Both wrap the
-- `dispatch` below.
--
-- Rules every op follows:
--  * Time is the server's (`TIME`), in milliseconds. No client clock is ever read.
--  * Every transition bumps the breaker's generation `g`, clears its window, leases and votes,
--    bumps the namespace version and publishes one message. Writes carry the generation they
--    were computed from; a write of another generation is dropped (`stale`).
--  * A replica's high-water generation (the newest it has seen) repairs a store that lost
--    writes: if it is newer than the store's, the replica's state is adopted.
--  * Every key written gets an expiry (the pinned policy's ttl): hygiene only.
--  * Every loop is bounded: breakers per call (512), window buckets (20), leases per acquire
--    (64), cooldown growth steps (64).
--  * Keys come only from KEYS (built and escaped by the client; one hash tag per namespace).
--
-- KEYS: [1] live-replica zset, [2] namespace version counter, then 4 per breaker:
--       state hash, window string, lease zset, vote zset.
-- ARGV: [1] replica id, [2] channel, [3] namespace ttl ms, [4] jitter draw 0..999999,
--       [5] live window ms, [6] breakers in this call, then the op's per-breaker arguments.
-- Reply: { 'brk1', server now ms, live replicas, namespace version, item, item, ... }
--   item: { code, generation, state, deadline ms (0: none), open streak, successful probes,
--           leases in flight, policy mismatch 0/1, caused by, reason, pinned fingerprint,
--           granted leases {member, ...} (acquire only, else empty), lease expiry ms }

local CLOSED, OPEN, HALF, FOPEN, FCLOSED = 0, 1, 2, 3, 4
-- reasons
local R_CONSEC, R_RATE, R_SLOW, R_COOLDOWN, R_PROBE_FAILED, R_PROBES_OK, R_MANUAL, R_REPAIR, R_NONE =
  0, 1, 2, 3, 4, 5, 7, 8, 9
-- codes
local APPLIED, STALE, REPAIRED, TRIPPED, IGNORED, VOTED, LATE, DENIED = 0, 1, 2, 3, 4, 5, 6, 7

local MAX_BREAKERS, MAX_BUCKETS, MAX_LEASES = 512, 20, 64

local function int(x)
  return string.format('%d', x)
end

local function num(v)
  if v == false or v == nil then return nil end
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n > 9007199254740991 then return nil end
  return n
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- rate%, slow%, min calls, window ms, buckets, cooldown ms, multiplier x1000, cooldown max ms,
-- jitter x1000, probes, successes to close, quorum, ttl ms
local function parse_policy(s)
  if type(s) ~= 'string' or #s > 200 then return nil end
  local p, n = {}, 0
  for tok in string.gmatch(s, '[^,]+') do
    n = n + 1
    if n > 13 then return nil end
    local v = num(tok)
    if v == nil then return nil end
    p[n] = v
  end
  if n ~= 13 then return nil end
  local pol = { rate = p[1], slow = p[2], min_calls = p[3], window = p[4], buckets = p[5],
    cool = p[6], mult = p[7], cool_max = p[8], jitter = p[9], probes = p[10], succ = p[11],
    quorum = p[12], ttl = p[13] }
  if pol.rate > 100 or pol.slow > 100 or pol.min_calls < 1 or pol.buckets < 1
    or pol.buckets > MAX_BUCKETS or pol.buckets ~= math.floor(pol.buckets)
    or math.floor(pol.window / pol.buckets) < 1 or pol.cool < 1 or pol.mult < 1000
    or pol.cool_max < pol.cool or pol.jitter > 1000 or pol.probes < 1 or pol.succ < 1
    or pol.quorum < 1 or pol.ttl < 1 then
    return nil
  end
  return pol
end

local function cooldown(pp, streak, u)
  local d = pp.cool
  if pp.mult > 1000 then
    local f = pp.mult / 1000
    for _ = 2, math.min(streak, 64) do
      d = d * f
      if d >= pp.cool_max then
        d = pp.cool_max
        break
      end
    end
  end
  d = d * (1 - (pp.jitter / 1000) * (u / 1000000))
  return math.max(1, math.floor(d))
end

local function load(key)
  local v = redis.call('HMGET', key, 'g', 'st', 'dl', 'sk', 'ok', 'fp', 'pol', 'inc', 'by', 'rs')
  local g, st = num(v[1]), num(v[2])
  if g == nil or st == nil or st > 4 or not v[7] then return nil end
  return { g = g, st = st, dl = num(v[3]) or 0, sk = num(v[4]) or 0, ok = num(v[5]) or 0,
    fp = v[6] or '', pol = v[7], inc = v[8] or '0', by = v[9] or '', rs = num(v[10]) or R_NONE }
end

local function save(b, s, pp)
  redis.call('HSET', b.skey, 'g', int(s.g), 'st', int(s.st), 'dl', int(s.dl), 'sk', int(s.sk),
    'ok', int(s.ok), 'fp', s.fp, 'pol', s.pol, 'inc', s.inc, 'by', s.by, 'rs', int(s.rs))
  redis.call('PEXPIRE', b.skey, int(pp.ttl))
end

local function bump_version(ctx)
  local v = redis.call('INCR', ctx.vkey)
  redis.call('PEXPIRE', ctx.vkey, ctx.ns_ttl)
  return v
end

-- The breaker's state, created closed (generation 0) with our policy pinned when missing and
-- `create` is set; `nil` when missing and not created.
local function ensure(ctx, b, create)
  local s = load(b.skey)
  if s then
    local pp = parse_policy(s.pol)
    if pp then return s, pp end
    -- A corrupt pinned policy: pin ours, keep the state.
    s.fp, s.pol = b.fp, b.pol
    save(b, s, b.pp)
    return s, b.pp
  end
  if not create then return nil, b.pp end
  s = { g = 0, st = CLOSED, dl = 0, sk = 0, ok = 0, fp = b.fp, pol = b.pol,
    inc = int(ctx.now) .. '.' .. int(bump_version(ctx)), by = '', rs = R_NONE }
  save(b, s, b.pp)
  return s, b.pp
end

local function publish(ctx, b, s)
  redis.call('PUBLISH', ctx.channel, table.concat({ 'brk1', b.name, int(s.g), int(s.st),
    int(s.dl), int(ctx.now), s.by, int(s.rs), int(s.sk) }, '|'))
end

local function transition(ctx, b, s, pp, to, reason)
  s.g = s.g + 1
  s.st = to
  s.ok = 0
  s.by = ctx.replica
  s.rs = reason
  if to == OPEN then
    s.sk = math.min(s.sk + 1, 255)
    s.dl = ctx.now + cooldown(pp, s.sk, ctx.u)
  else
    s.dl = 0
    if to == CLOSED then s.sk = 0 end
  end
  redis.call('DEL', b.wkey, b.pkey, b.qkey)
  bump_version(ctx)
  save(b, s, pp)
  publish(ctx, b, s)
end

-- Adopts a replica's newer state (the store lost writes: restart, failover, expiry).
local function repair(ctx, b, s, pp, hw_gen, hw_state, hw_rem, hw_streak)
  s.g = hw_gen
  s.st = hw_state
  s.ok = 0
  s.sk = math.min(hw_streak, 255)
  s.by = ctx.replica
  s.rs = R_REPAIR
  if hw_state == OPEN then s.dl = ctx.now + hw_rem else s.dl = 0 end
  redis.call('DEL', b.wkey, b.pkey, b.qkey)
  bump_version(ctx)
  save(b, s, pp)
  publish(ctx, b, s)
end

-- The window is one string of its non-empty buckets, `epoch:successes:failures:slow;...`,
-- epochs counted modulo 10^6 (unambiguous: the whole string is rewritten on every write, buckets
-- older than the window are dropped then, and the key expires two windows after its last write).
local EPOCH_MOD = 1000000

-- Adds deltas to the current bucket and returns the window's totals: successes, failures, slow.
local function window_add(ctx, b, pp, succ, fail, slow)
  local bms = math.floor(pp.window / pp.buckets)
  local epoch = math.floor(ctx.now / bms) % EPOCH_MOD
  local old = redis.call('GET', b.wkey)
  local parts, ts, tf, tl = {}, succ, fail, slow
  local cs, cf, cl = succ, fail, slow
  if old and #old <= 2000 then
    local seen = 0
    for e, s, f, l in string.gmatch(old, '(%d+):(%d+):(%d+):(%d+)') do
      seen = seen + 1
      if seen > MAX_BUCKETS then break end
      e, s, f, l = tonumber(e), tonumber(s), tonumber(f), tonumber(l)
      local age = (epoch - e) % EPOCH_MOD
      if age == 0 then
        cs, cf, cl = cs + s, cf + f, cl + l
        ts, tf, tl = ts + s, tf + f, tl + l
      elseif age < pp.buckets then
        parts[#parts + 1] = int(e) .. ':' .. int(s) .. ':' .. int(f) .. ':' .. int(l)
        ts, tf, tl = ts + s, tf + f, tl + l
      end
    end
  end
  parts[#parts + 1] = int(epoch) .. ':' .. int(cs) .. ':' .. int(cf) .. ':' .. int(cl)
  redis.call('SET', b.wkey, table.concat(parts, ';'), 'PX', int(math.max(2 * pp.window, 1000)))
  return ts, tf, tl
end

local function item(ctx, b, s, code, granted, lease_exp)
  local inflight = 0
  if s and s.st == HALF then
    inflight = redis.call('ZCOUNT', b.pkey, '(' .. int(ctx.now), '+inf')
  end
  if not s then
    return { code, 0, CLOSED, 0, 0, 0, 0, 0, '', R_NONE, b.fp, granted or {}, 0 }
  end
  local mismatch = 0
  if s.fp ~= b.fp then mismatch = 1 end
  return { code, s.g, s.st, s.dl, s.sk, s.ok, inflight, mismatch, s.by, s.rs, s.fp,
    granted or {}, lease_exp or 0 }
end

-- Per-breaker arguments: name, fingerprint, policy, then the op's own.
local OPS = {
  -- generation, successes, failures, slow, hw generation, hw state, hw remaining ms, hw streak
  flush = { n = 11, fn = function(ctx, b, a)
    local gen, succ, fail, slow = num(a[1]), num(a[2]), num(a[3]), num(a[4])
    local hg, hs, hr, hk = num(a[5]), num(a[6]), num(a[7]), num(a[8])
    if not (gen and succ and fail and slow and hg and hs and hr and hk) or hs > 4
      or slow > succ + fail then
      return nil
    end
    local has = succ + fail > 0
    local s, pp = ensure(ctx, b, has or hg > 0)
    if not s then return item(ctx, b, nil, APPLIED) end
    local code = APPLIED
    if hg > s.g then
      repair(ctx, b, s, pp, hg, hs, hr, hk)
      code = REPAIRED
    end
    if has then
      if gen ~= s.g then
        code = STALE
      elseif s.st ~= CLOSED then
        if code ~= REPAIRED then code = IGNORED end
      else
        local ts, tf, tl = window_add(ctx, b, pp, succ, fail, slow)
        local calls = ts + tf
        if calls >= pp.min_calls then
          if pp.rate > 0 and tf * 100 >= pp.rate * calls then
            transition(ctx, b, s, pp, OPEN, R_RATE)
            code = TRIPPED
          elseif pp.slow > 0 and tl * 100 >= pp.slow * calls then
            transition(ctx, b, s, pp, OPEN, R_SLOW)
            code = TRIPPED
          end
        end
      end
    end
    return item(ctx, b, s, code)
  end },
  -- generation, reason
  trip = { n = 5, fn = function(ctx, b, a)
    local gen, reason = num(a[1]), num(a[2])
    if not gen or not reason or reason > R_SLOW then return nil end
    local s, pp = ensure(ctx, b, true)
    if gen ~= s.g or s.st ~= CLOSED then return item(ctx, b, s, STALE) end
    if pp.quorum > 1 then
      redis.call('ZADD', b.qkey, int(ctx.now), ctx.replica)
      redis.call('ZREMRANGEBYSCORE', b.qkey, '-inf', '(' .. int(ctx.now - pp.window))
      redis.call('PEXPIRE', b.qkey, int(pp.ttl))
      if redis.call('ZCARD', b.qkey) < pp.quorum then return item(ctx, b, s, VOTED) end
    end
    transition(ctx, b, s, pp, OPEN, reason)
    return item(ctx, b, s, TRIPPED)
  end },
  -- leases wanted, lease ms
  acquire_probe = { n = 5, fn = function(ctx, b, a)
    local want, lease = num(a[1]), num(a[2])
    if not want or not lease or lease < 1 or lease > 86400000 then return nil end
    local s, pp = ensure(ctx, b, true)
    if s.st == OPEN and ctx.now >= s.dl then
      transition(ctx, b, s, pp, HALF, R_COOLDOWN)
    end
    if s.st ~= HALF then return item(ctx, b, s, DENIED) end
    redis.call('ZREMRANGEBYSCORE', b.pkey, '-inf', int(ctx.now))
    local free = pp.probes - redis.call('ZCARD', b.pkey)
    local n = math.min(want, free, MAX_LEASES)
    local granted = {}
    local exp = ctx.now + lease
    for i = 1, n do
      local seq = redis.call('HINCRBY', b.skey, 'ls', 1)
      local member = int(s.g) .. ':' .. s.inc .. ':' .. int(seq) .. ':' .. ctx.replica
      redis.call('ZADD', b.pkey, int(exp), member)
      granted[i] = member
    end
    redis.call('PEXPIRE', b.pkey, int(pp.ttl))
    if n < 1 then return item(ctx, b, s, DENIED, granted, 0) end
    return item(ctx, b, s, APPLIED, granted, exp)
  end },
  -- lease member, outcome (s: success, f: failure, n: neutral)
  end_probe = { n = 5, fn = function(ctx, b, a)
    local lease, outcome = a[1], a[2]
    if type(lease) ~= 'string' or #lease > 300 or (outcome ~= 's' and outcome ~= 'f'
      and outcome ~= 'n') then
      return nil
    end
    local lg = num(string.match(lease, '^(%d+):'))
    if not lg then return nil end
    local s, pp = ensure(ctx, b, false)
    if not s then return item(ctx, b, nil, STALE) end
    if lg ~= s.g or s.st ~= HALF then
      redis.call('ZREM', b.pkey, lease)
      return item(ctx, b, s, STALE)
    end
    local score = num(redis.call('ZSCORE', b.pkey, lease))
    redis.call('ZREM', b.pkey, lease)
    if not score or score <= ctx.now then return item(ctx, b, s, LATE) end
    if outcome == 's' then
      s.ok = s.ok + 1
      if s.ok >= pp.succ then
        transition(ctx, b, s, pp, CLOSED, R_PROBES_OK)
      else
        save(b, s, pp)
      end
    elseif outcome == 'f' then
      transition(ctx, b, s, pp, OPEN, R_PROBE_FAILED)
    end
    return item(ctx, b, s, APPLIED)
  end },
  -- target state (0 closed = reset, 1 open, 3 forced-open, 4 forced-closed)
  force = { n = 4, fn = function(ctx, b, a)
    local to = num(a[1])
    if not to or (to ~= CLOSED and to ~= OPEN and to ~= FOPEN and to ~= FCLOSED) then
      return nil
    end
    local s = ensure(ctx, b, true)
    s.fp, s.pol = b.fp, b.pol
    transition(ctx, b, s, b.pp, to, R_MANUAL)
    return item(ctx, b, s, APPLIED)
  end },
  -- hw generation, hw state, hw remaining ms, hw streak
  repair = { n = 7, fn = function(ctx, b, a)
    local hg, hs, hr, hk = num(a[1]), num(a[2]), num(a[3]), num(a[4])
    if not (hg and hs and hr and hk) or hs > 4 then return nil end
    local s, pp = ensure(ctx, b, hg > 0)
    if not s then return item(ctx, b, nil, APPLIED) end
    if hg > s.g then
      repair(ctx, b, s, pp, hg, hs, hr, hk)
      return item(ctx, b, s, REPAIRED)
    end
    return item(ctx, b, s, STALE)
  end },
}

local function dispatch(op, keys, args)
  local spec = OPS[op]
  if not spec then return redis.error_reply('BRK unknown op') end
  local n = num(args[6])
  local ns_ttl, u, live = num(args[3]), num(args[4]), num(args[5])
  if not n or n < 1 or n > MAX_BREAKERS or n ~= math.floor(n) or not ns_ttl or ns_ttl < 1
    or not u or u > 999999 or not live or #args ~= 6 + n * (spec.n - 0)
    or #keys ~= 2 + 4 * n or (op ~= 'flush' and n ~= 1) then
    return redis.error_reply('BRK bad arguments')
  end
  local ctx = { now = now_ms(), replica = args[1], channel = args[2], ns_ttl = int(ns_ttl),
    u = u, vkey = keys[2] }
  if #ctx.replica < 1 or #ctx.replica > 128 then return redis.error_reply('BRK bad replica') end
  if op == 'flush' then
    redis.call('ZADD', keys[1], int(ctx.now), ctx.replica)
    redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', '(' .. int(ctx.now - live))
    redis.call('PEXPIRE', keys[1], ctx.ns_ttl)
  end
  local out = { 'brk1', ctx.now, 0, 0 }
  for i = 0, n - 1 do
    local base = 6 + i * spec.n
    local k = 2 + i * 4
    local b = { name = args[base + 1], fp = args[base + 2], pol = args[base + 3],
      skey = keys[k + 1], wkey = keys[k + 2], pkey = keys[k + 3], qkey = keys[k + 4] }
    b.pp = parse_policy(b.pol)
    if not b.pp or #b.name < 1 or #b.name > 256 or #b.fp < 1 or #b.fp > 64 then
      return redis.error_reply('BRK bad breaker arguments')
    end
    local a = {}
    for j = 4, spec.n do a[j - 3] = args[base + j] end
    local r = spec.fn(ctx, b, a)
    if not r then return redis.error_reply('BRK bad op arguments') end
    out[#out + 1] = r
  end
  out[3] = redis.call('ZCARD', keys[1])
  out[4] = num(redis.call('GET', keys[2])) or 0
  return out
end
