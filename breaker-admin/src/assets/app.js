// The breakers dashboard: polls the status API every second, and follows the event stream so
// that a transition shows at once. No framework, no other origin: everything is served by the
// same breaker-admin service. Strings from the API are only ever set as text, never as HTML.
'use strict';
(() => {
  const base = location.pathname.endsWith('/') ? location.pathname : location.pathname + '/';
  const api = (path) => base + 'api/v1/' + path;
  const $ = (sel) => document.querySelector(sel);
  const tbody = $('#breakers tbody');
  const BAND = { c: '#2e7d32', o: '#c62828', h: '#ef6c00', f: '#6a1b9a', d: '#546e7a' };
  const ACTIONS = ['force-open', 'force-closed', 'disable', 'reset'];

  let rows = [];
  let admin = false;
  let fleetOn = false;
  let sortKey = 'id';
  let sortDir = 1;
  let filter = '';
  const lastState = new Map();
  const expanded = new Set();
  const keyPages = new Map();

  const stateOf = (b) => b.state || b.group_state || 'closed';
  const rate = (b, k) => (b.rates ? b.rates[k] : null);
  const fmtRate = (v) => (v == null ? '–' : v < 10 ? v.toFixed(1) : String(Math.round(v)));
  const fmtUs = (us) => (us == null ? '–' : us < 1000 ? us + 'µs' : us < 1e6 ? (us / 1000).toFixed(1) + 'ms' : (us / 1e6).toFixed(2) + 's');
  function fmtMs(ms) {
    if (ms == null) return '–';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  }
  const SEVERITY = { open: 4, 'forced-open': 3, 'half-open': 2, 'forced-closed': 1, closed: 0 };
  function sortValue(b, key) {
    switch (key) {
      case 'state': return SEVERITY[stateOf(b)];
      case 'fleet': return b.fleet ? SEVERITY[b.fleet.state] : -1;
      case 'time': return b.time_in_state_ms || 0;
      case 'calls': return rate(b, 'calls_per_s') || 0;
      case 'failures': return rate(b, 'failures_per_s') || 0;
      case 'rejections': return rate(b, 'rejections_per_s') || 0;
      case 'rate': return b.window ? b.window.failure_rate_percent : 0;
      case 'p50': return b.latency ? b.latency.p50_us : -1;
      case 'p99': return b.latency ? b.latency.p99_us : -1;
      default: return b.id.toLowerCase();
    }
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c != null) e.append(c);
    return e;
  }

  // The states over the history the server keeps, newest at the right edge.
  function band(history) {
    const c = el('canvas', { class: 'band', width: '240', height: '14' });
    const ctx = c.getContext('2d');
    if (ctx && history) {
      const states = history.states;
      const slots = Math.max(history.slots || states.length, 1);
      const w = c.width / slots;
      const x0 = c.width - states.length * w;
      for (let i = 0; i < states.length; i++) {
        ctx.fillStyle = BAND[states[i]] || '#eee';
        ctx.fillRect(x0 + i * w, 0, Math.max(w, 1), c.height);
      }
      c.title = 'one reading every ' + history.every_ms + ' ms; newest at the right';
    }
    return c;
  }

  function policyCell(b) {
    const p = b.policy || {};
    const parts = [];
    if (p.order) parts.push(p.order);
    if (p.breaker) parts.push('breaker: ' + p.breaker);
    if (p.retry) parts.push('retry: ' + p.retry);
    if (p.timeout) parts.push('timeout: ' + p.timeout);
    if (p.deadline) parts.push('deadline: ' + p.deadline);
    if (p.bulkhead) parts.push('bulkhead: ' + p.bulkhead);
    if (p.rate) parts.push('rate: ' + p.rate);
    if (p.hedge) parts.push('hedge: ' + p.hedge);
    if (p.adaptive) parts.push('adaptive: ' + p.adaptive);
    if (p.throttle) parts.push('throttle: ' + p.throttle);
    const s = b.source || {};
    const source = s.kind === 'file' ? s.path + ' (reload ' + s.generation + ')'
      : s.kind === 'attribute' ? '#[circuit_breaker] on ' + s.function
        : s.kind === 'config' ? 'config (reload ' + s.generation + ')' : 'code';
    return el('td', { class: 'policy' }, parts.join('; '), el('br'), el('span', { class: 'source', text: source }));
  }

  function actionButtons(id, key) {
    const td = el('td', { class: 'actions admin-col' });
    td.hidden = !admin;
    for (const a of ACTIONS) {
      const btn = el('button', { type: 'button', 'data-action': a, text: a });
      btn.addEventListener('click', () => act(id, key, a));
      td.append(btn);
    }
    return td;
  }

  // A shared breaker's state in the fleet's store (what every replica follows), who made its
  // last transition, its deadline, and this replica's store health when it is not healthy.
  function fleetCell(f) {
    const td = el('td', { class: 'fleet-col fleet' });
    td.hidden = !fleetOn;
    if (!f) return td;
    const state = f.state || '?';
    td.dataset.fleetState = state;
    const notes = [];
    if (f.caused_by) notes.push('by ' + f.caused_by);
    if (f.retry_after_ms != null) notes.push(fmtMs(f.retry_after_ms) + ' left');
    if (f.known === false) notes.push('not in the store yet');
    if (f.store && f.store !== 'healthy') notes.push('store ' + f.store);
    td.append(el('span', { class: 'state ' + state, text: state }));
    if (notes.length) td.append(el('div', { class: 'fleet-notes', text: notes.join(' · ') }));
    return td;
  }

  function row(b) {
    const state = stateOf(b);
    const tr = el('tr', { 'data-id': b.id, 'data-state': state, 'data-kind': b.kind });
    if (lastState.has(b.id) && lastState.get(b.id) !== state) tr.classList.add('changed');
    lastState.set(b.id, state);
    const name = el('td', {}, el('span', { class: 'name', text: b.id }), el('span', { class: 'kind', text: b.kind }));
    if (b.keys) {
      const k = b.keys;
      const toggle = el('button', { type: 'button', class: 'keys-toggle', text: (expanded.has(b.id) ? '▾ ' : '▸ ') + k.count + ' keys' });
      toggle.addEventListener('click', () => {
        if (expanded.has(b.id)) expanded.delete(b.id); else expanded.add(b.id);
        refresh();
      });
      name.append(el('br'), toggle, el('span', { class: 'keys', text: ' ' + k.by_state.open + ' open, ' + k.by_state['half-open'] + ' half-open' }));
    }
    tr.append(
      name,
      el('td', {}, el('span', { class: 'state ' + state, text: state }),
        b.keys ? el('span', { class: 'keys', text: ' worst of ' + b.keys.count + ' keys' }) : null),
      fleetCell(b.fleet),
      el('td', { class: 'num', text: fmtMs(b.time_in_state_ms) }),
      el('td', {}, band(b.history)),
      el('td', { class: 'num', text: fmtRate(rate(b, 'calls_per_s')) }),
      el('td', { class: 'num', text: fmtRate(rate(b, 'failures_per_s')) }),
      el('td', { class: 'num', text: fmtRate(rate(b, 'rejections_per_s')) }),
      el('td', { class: 'num', text: b.window ? b.window.failure_rate_percent.toFixed(1) + '%' : '–' }),
      el('td', { class: 'num', text: fmtUs(b.latency && b.latency.p50_us) }),
      el('td', { class: 'num', text: fmtUs(b.latency && b.latency.p99_us) }),
      policyCell(b),
    );
    if (b.keys) {
      const td = el('td', { class: 'admin-col' });
      td.hidden = !admin;
      tr.append(td);
    } else {
      tr.append(actionButtons(b.id, null));
    }
    return tr;
  }

  function keyRow(group, k) {
    const tr = el('tr', { class: 'key', 'data-id': group + '/' + k.key, 'data-state': k.state });
    tr.append(
      el('td', { text: k.key }),
      el('td', {}, el('span', { class: 'state ' + k.state, text: k.state })),
      fleetCell(null),
      el('td', { class: 'num', text: fmtMs(k.time_in_state_ms) }),
      el('td'), el('td'), el('td'), el('td'),
      el('td', { class: 'num', text: k.window.failure_rate_percent.toFixed(1) + '%' }),
      el('td'), el('td'), el('td'),
      actionButtons(group, k.key),
    );
    return tr;
  }

  function render() {
    fleetOn = rows.some((b) => b.fleet);
    const shown = rows
      .filter((b) => b.id.toLowerCase().includes(filter))
      .sort((a, b) => {
        const x = sortValue(a, sortKey);
        const y = sortValue(b, sortKey);
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir || a.id.localeCompare(b.id);
      });
    const out = [];
    for (const b of shown) {
      out.push(row(b));
      const page = expanded.has(b.id) && keyPages.get(b.id);
      if (page) for (const k of page.keys) out.push(keyRow(b.id, k));
    }
    tbody.replaceChildren(...out);
    for (const th of document.querySelectorAll('.admin-col')) th.hidden = !admin;
    for (const th of document.querySelectorAll('th.fleet-col')) th.hidden = !fleetOn;
    $('#admin-controls').hidden = !admin;
    $('#empty').hidden = rows.length > 0;
    const open = rows.filter((b) => stateOf(b) !== 'closed').length;
    $('#summary').textContent = rows.length + ' breakers, ' + open + ' not closed';
    for (const th of document.querySelectorAll('th[data-sort]')) {
      th.classList.toggle('sorted', th.dataset.sort === sortKey);
      th.classList.toggle('asc', th.dataset.sort === sortKey && sortDir > 0);
      th.classList.toggle('desc', th.dataset.sort === sortKey && sortDir < 0);
    }
  }

  let inFlight = false;
  async function refresh() {
    if (inFlight) return;
    inFlight = true;
    try {
      const r = await fetch(api('breakers?history=true'), { cache: 'no-store' });
      if (!r.ok) throw new Error('status API answered ' + r.status);
      const j = await r.json();
      admin = j.admin;
      rows = j.breakers;
      for (const id of expanded) {
        const k = await fetch(api('breakers/' + encodeURIComponent(id) + '/keys?limit=10'), { cache: 'no-store' });
        if (k.ok) keyPages.set(id, await k.json());
      }
      render();
    } catch (e) {
      notice('cannot read the status API: ' + e.message, 'error', 0);
    } finally {
      inFlight = false;
    }
  }

  function notice(text, kind, status) {
    const n = $('#notice');
    n.textContent = text;
    n.className = kind;
    n.dataset.status = String(status);
  }

  async function post(path, body) {
    const headers = { 'Content-Type': 'application/json' };
    const token = $('#token').value.trim();
    if (token) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(api(path), { method: 'POST', headers, body: JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
    let j = {};
    try { j = await r.json(); } catch (_) { /* not JSON */ }
    return { r, j };
  }

  async function act(id, key, action) {
    const path = 'breakers/' + encodeURIComponent(id) + (key == null ? '' : '/keys/' + encodeURIComponent(key)) + '/actions';
    const { r, j } = await post(path, { action });
    if (r.ok) notice(action + ' ' + id + (key == null ? '' : ' / ' + key) + ': now ' + j.state, 'ok', r.status);
    else notice('refused (' + r.status + '): ' + (j.error || r.statusText), 'error', r.status);
    refresh();
  }

  $('#reload').addEventListener('click', async () => {
    const { r, j } = await post('reload', {});
    if (r.ok) notice('config reloaded', 'ok', r.status);
    else notice('reload refused (' + r.status + '): ' + (j.error || r.statusText) + (j.errors ? ' ' + j.errors.join('; ') : ''), 'error', r.status);
    refresh();
  });

  $('#filter').addEventListener('input', (e) => { filter = e.target.value.trim().toLowerCase(); render(); });
  for (const th of document.querySelectorAll('th[data-sort]')) {
    th.addEventListener('click', () => {
      if (sortKey === th.dataset.sort) sortDir = -sortDir; else { sortKey = th.dataset.sort; sortDir = th.dataset.sort === 'id' ? 1 : -1; }
      render();
    });
  }

  function logEvent(text, cls) {
    const list = $('#events');
    list.prepend(el('li', { class: cls || '', text: new Date().toLocaleTimeString() + '  ' + text }));
    while (list.children.length > 50) list.lastChild.remove();
  }

  function follow() {
    const stream = new EventSource(api('events'));
    const status = $('#stream');
    stream.addEventListener('open', () => { status.textContent = 'live'; status.classList.add('live'); });
    stream.addEventListener('error', () => { status.textContent = 'reconnecting…'; status.classList.remove('live'); });
    stream.addEventListener('transition', (m) => {
      const e = JSON.parse(m.data);
      const b = rows.find((x) => x.id === e.breaker);
      if (b && b.state && e.key == null) { b.state = e.to; b.time_in_state_ms = 0; render(); }
      logEvent('transition ' + e.breaker + (e.key != null ? ' / ' + e.key : '') + ' ' + e.from + ' → ' + e.to + ' (' + e.reason + ')' + (e.origin ? ' by ' + e.origin : ''));
      refresh();
    });
    // Rejections of one breaker in a row add up in one line.
    let rejected = null;
    stream.addEventListener('rejections', (m) => {
      const e = JSON.parse(m.data);
      const top = $('#events').firstChild;
      if (rejected && top === rejected.li && rejected.breaker === e.breaker) {
        rejected.count += e.count;
      } else {
        logEvent('');
        rejected = { li: $('#events').firstChild, breaker: e.breaker, count: e.count, since: new Date().toLocaleTimeString() };
      }
      rejected.li.textContent = rejected.since + '  rejected ' + rejected.count + ' calls: ' + e.breaker + ' (' + e.state + ')';
    });
    stream.addEventListener('keys', (m) => {
      const e = JSON.parse(m.data);
      logEvent('keys ' + e.breaker + ': ' + e.by_state.open + ' open of ' + e.keys);
      refresh();
    });
    stream.addEventListener('action', (m) => {
      const e = JSON.parse(m.data);
      logEvent('action ' + e.action + ' on ' + e.breaker + (e.key ? ' / ' + e.key : '') + ' by ' + e.who);
    });
    stream.addEventListener('reload', (m) => {
      const e = JSON.parse(m.data);
      logEvent('config reload ' + (e.ok ? 'ok' : 'failed') + ', generation ' + e.generation);
      refresh();
    });
    stream.addEventListener('dropped', (m) => {
      const e = JSON.parse(m.data);
      logEvent(e.message || ('this page fell behind: ' + e.dropped + ' events dropped'), 'dropped');
      refresh();
    });
  }

  refresh();
  follow();
  setInterval(refresh, 1000);
})();
