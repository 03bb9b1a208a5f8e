// leasehold's status page. Every key and owner is user input: the DOM is
// built with createElement and textContent only, never innerHTML, and the
// Content-Security-Policy allows no inline script. Long keys and owners are
// cut by CSS (an ellipsis) and whole in the cell's title.
'use strict';

const LOCKS_EVERY_MS = 500;
const STATS_EVERY_MS = 1000;
const HISTORY_EVERY_MS = 1000;
const HOT_EVERY_MS = 5000;
const CHART_SECONDS = 300; // a chart's span: the server's history
const EVENTS_KEPT = 300; // as many as the server's history holds
const LOCKS_LIMIT = 200;
const HISTORY_WAIT_MS = 2000; // the most the history waits for the event stream

// el makes an element with its text (as text, never markup) and class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// cell is a table cell whose text, cut to its column by CSS, is whole in
// its title (a tooltip) and selectable.
function cell(text, cls) {
  const td = el('td', text, cls);
  td.title = String(text);
  return td;
}

function $(id) { return document.getElementById(id); }

function fmtDuration(ms) {
  if (ms <= 0) return '0 s';
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + ' s';
  if (s < 60) return Math.floor(s) + ' s';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  const h = Math.floor(s / 3600);
  if (h < 48) return h + 'h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
}

// fmtLatency shows a percentile given in milliseconds with three
// significant digits and a unit: 159 µs, 20.5 ms, 60.0 s.
function fmtLatency(ms) {
  if (typeof ms !== 'number' || !(ms > 0)) return '0';
  ms = Number(ms.toPrecision(3)); // 999.9 ms is 1.00 s
  const sig = v => v >= 1000 ? Math.round(v).toString() : v.toPrecision(3);
  if (ms < 1) return sig(ms * 1000) + ' µs';
  if (ms < 1000) return sig(ms) + ' ms';
  return sig(ms / 1000) + ' s';
}

// fmtCount groups a count's digits: 1,234,567.
function fmtCount(n) { return typeof n === 'number' ? n.toLocaleString('en-US') : String(n); }

// fmtRate shows a rate per second with at most three significant digits.
function fmtRate(v) {
  if (!(v > 0)) return '0';
  if (v >= 100) return fmtCount(Math.round(v));
  return String(Number(v.toPrecision(v >= 10 ? 3 : 2)));
}

// fmtClock is a time of day, 24-hour: 14:03:07.
function fmtClock(ms) {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map(v => String(v).padStart(2, '0')).join(':');
}

function fmtBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + units[i];
}

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) { const e = new Error(url + ': HTTP ' + r.status); e.status = r.status; throw e; }
  return r.json();
}

// ---- summary tiles ----

const tiles = {};
function setupTiles() {
  const box = $('tiles');
  for (const [id, label] of [
    ['clients', 'clients connected'], ['waiting', 'clients waiting'], ['locks', 'locks'], ['held', 'leases held'],
    ['grants', 'grants'], ['waits', 'waits'], ['expiries', 'expiries'], ['memory', 'memory used'],
  ]) {
    const t = el('div', null, 'tile');
    t.id = 'tile-' + id;
    const v = el('div', '…', 'tile-value');
    const l = el('div', label, 'tile-label');
    t.append(v, l);
    box.append(t);
    tiles[id] = { tile: t, value: v, label: l, text: label };
  }
}

// setTile shows value with unit; sub, if given, follows the label.
function setTile(id, value, unit, sub, bad) {
  const t = tiles[id];
  t.value.replaceChildren(String(value));
  if (unit) t.value.append(el('span', unit, 'unit'));
  t.label.textContent = t.text + (sub ? ' · ' + sub : '');
  t.tile.title = t.label.textContent;
  t.tile.classList.toggle('bad', !!bad);
}

// ---- server stats ----

function renderStats(st) {
  const ready = $('ready');
  ready.textContent = st.ready ? 'ready' : 'not ready: ' + st.why;
  ready.className = 'badge ' + (st.ready ? 'ok' : 'bad');
  $('version').textContent = 'version ' + st.Version;
  $('uptime').textContent = 'up ' + fmtDuration(st.uptime_s * 1000);
  setTile('clients', fmtCount(st.Clients.Connected), null, 'max ' + fmtCount(st.Clients.MaxClients));
  setTile('waiting', fmtCount(st.Clients.Blocked));
  setTile('locks', fmtCount(st.Locks.Locks), null, st.Locks.MaxLocks ? 'max ' + fmtCount(st.Locks.MaxLocks) : '');
  setTile('held', fmtCount(st.Locks.Held));
  setTile('memory', ...fmtBytes(st.Memory.Used).split(' '));
  const rows = [
    ['Clients connected', fmtCount(st.Clients.Connected) + ' of ' + fmtCount(st.Clients.MaxClients)],
    ['Clients waiting', fmtCount(st.Clients.Blocked)],
    ['Locks', fmtCount(st.Locks.Locks) + (st.Locks.MaxLocks ? ' of ' + fmtCount(st.Locks.MaxLocks) : '')],
    ['Leases held', fmtCount(st.Locks.Held)],
    ['Granted', fmtCount(st.Locks.Granted)],
    ['Granted from the queue', fmtCount(st.Locks.WaitGrants)],
    ['Hand-offs', fmtCount(st.Locks.HandOffs)],
    ['Waits', fmtCount(st.Locks.Waits)],
    ['Wait timeouts', fmtCount(st.Locks.WaitTimeouts)],
    ['Released', fmtCount(st.Locks.Released)],
    ['Expired', fmtCount(st.Locks.Expired)],
    ['Commands', fmtCount(st.Traffic.CommandsProcessed)],
    ['Memory used', fmtBytes(st.Memory.Used)],
  ];
  if (st.Persistence) rows.push(['Data directory', st.Persistence.OK ? 'ok (fsync ' + st.Persistence.Fsync + ')' : 'failing: ' + st.Persistence.Error]);
  if (st.Cluster) rows.push(['Cluster', st.Cluster.NodeID + ': ' + st.Cluster.Role + ', term ' + st.Cluster.Term]);
  const dl = $('stats');
  dl.replaceChildren();
  for (const [k, v] of rows) dl.append(el('dt', k), el('dd', v));
}

async function pollStats() {
  try {
    renderStats(await getJSON('/api/stats'));
  } catch (e) {
    const ready = $('ready');
    ready.textContent = 'unreachable';
    ready.className = 'badge bad';
  }
  setTimeout(pollStats, STATS_EVERY_MS);
}

// ---- history: the charts' samples, from the server ----
// The server samples its counters once a second from the admin listener's
// start and keeps 5 minutes (/api/history); the page draws them as it
// opens and then asks for the new ones.

const SVGNS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

// charts: each with its lines, the first drawn with an area under it.
const charts = [
  { id: 'grants', title: 'Grants', lines: [{ field: 'grants', label: 'grants', cls: 's-grants' }, { field: 'hand_offs', label: 'of them hand-offs', cls: 's-handoffs' }] },
  { id: 'waits', title: 'Waits', lines: [{ field: 'waits', label: 'waits', cls: 's-waits' }, { field: 'timeouts', label: 'timeouts', cls: 's-timeouts' }] },
  { id: 'expiries', title: 'Expiries', lines: [{ field: 'expiries', label: 'expiries', cls: 's-expiries' }] },
];
let samples = [];
let lastSampleT = 0;
let clockSkew = 0; // server's clock minus the browser's, ms

function setupCharts() {
  const box = $('charts');
  for (const c of charts) {
    const div = el('div', null, 'chart');
    div.id = 'chart-' + c.id;
    const h = el('h3', c.title + ' per second');
    for (const l of c.lines) {
      const lg = el('span', null, 'legend');
      lg.append(el('span', null, 'swatch ' + l.cls), l.label);
      h.append(lg);
    }
    c.now = el('span', '', 'now');
    h.append(c.now);
    c.svg = svg('svg', { role: 'img', 'aria-label': c.title + ' per second over the last 5 minutes' });
    div.append(h, c.svg);
    box.append(div);
  }
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, for an axis.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p + 1e-9) return m * p;
  return 10 * p;
}

function drawCharts() {
  const now = Date.now() + clockSkew;
  samples = samples.filter(s => now - s.t_ms <= CHART_SECONDS * 1000);
  for (const c of charts) {
    const W = Math.max(120, Math.round(c.svg.getBoundingClientRect().width));
    const H = 150;
    const m = { l: 44, r: 8, t: 8, b: 30 };
    const pw = W - m.l - m.r, ph = H - m.t - m.b;
    c.svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    const peak = Math.max(0, ...samples.flatMap(s => c.lines.map(l => s[l.field])));
    const top = niceCeil(peak);
    const x = t => m.l + pw - (now - t) / 1000 * (pw / CHART_SECONDS);
    const y = v => m.t + ph - v / top * ph;
    const kids = [];
    const axis = svg('g', { class: 'axis' });
    for (const v of [0, top / 2, top]) {
      const yy = y(v).toFixed(1);
      kids.push(svg('line', { class: 'grid-line', x1: m.l, x2: m.l + pw, y1: yy, y2: yy }));
      axis.append(svg('text', { x: m.l - 4, y: Number(yy) + 3, 'text-anchor': 'end' }, fmtRate(v) + '/s'));
    }
    for (let ago = CHART_SECONDS; ago >= 0; ago -= 60) {
      const xx = (m.l + pw - ago * (pw / CHART_SECONDS)).toFixed(1);
      kids.push(svg('line', { class: 'axis-line', x1: xx, x2: xx, y1: m.t + ph, y2: m.t + ph + 3 }));
      axis.append(svg('text', { x: xx, y: m.t + ph + 13, 'text-anchor': ago === CHART_SECONDS ? 'start' : ago === 0 ? 'end' : 'middle' }, ago === 0 ? 'now' : ago + ' s'));
    }
    axis.append(svg('text', { x: m.l + pw / 2, y: H - 2, 'text-anchor': 'middle' }, 'seconds ago'));
    kids.push(svg('line', { class: 'axis-line', x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph }));
    c.lines.forEach((l, i) => {
      let d = '';
      samples.forEach((s, j) => { d += (j ? 'L' : 'M') + x(s.t_ms).toFixed(1) + ' ' + y(s[l.field]).toFixed(1); });
      if (i === 0 && samples.length) {
        const base = (m.t + ph).toFixed(1);
        kids.push(svg('path', { class: 'area ' + l.cls, d: d + 'L' + x(samples[samples.length - 1].t_ms).toFixed(1) + ' ' + base + 'L' + x(samples[0].t_ms).toFixed(1) + ' ' + base + 'Z' }));
      }
      kids.push(svg('path', { class: 'line ' + l.cls + (i ? ' second' : ''), d }));
    });
    kids.push(axis);
    c.svg.replaceChildren(...kids);
    c.svg.dataset.points = String(samples.length);
    c.svg.dataset.peak = String(peak);
    const last = samples[samples.length - 1];
    c.now.textContent = last ? 'now ' + fmtRate(last[c.lines[0].field]) + '/s, peak ' + fmtRate(peak) + '/s' : 'no samples yet';
  }
  const last = samples[samples.length - 1];
  if (last) {
    setTile('grants', fmtRate(last.grants), '/s', 'hand-offs ' + fmtRate(last.hand_offs) + '/s');
    setTile('waits', fmtRate(last.waits), '/s', 'timeouts ' + fmtRate(last.timeouts) + '/s', last.timeouts > 0);
    setTile('expiries', fmtRate(last.expiries), '/s', null, last.expiries > 0);
  }
}

function addSamples(h) {
  clockSkew = h.now_ms - Date.now();
  for (const s of h.samples) {
    if (s.t_ms > lastSampleT) { samples.push(s); lastSampleT = s.t_ms; }
  }
  $('history-since').textContent = 'kept by the server since ' + fmtClock(h.since_ms);
  drawCharts();
}

async function pollHistory() {
  try {
    addSamples(await getJSON('/api/history?events=0&since=' + lastSampleT));
  } catch (e) {
    for (const c of charts) c.now.textContent = '(' + e.message + ')';
  }
  setTimeout(pollHistory, HISTORY_EVERY_MS);
}

// ---- locks, holders and queues ----

// ttls are the countdown cells: each holder's ttl as read, and when.
let ttls = [];

function lockState(l) {
  if (l.held) return ['held' + (l.shared ? ' (shared)' : '') + (l.limit ? ', ' + l.holders_total + '/' + l.limit + ' permits' : ''), 'state-held'];
  if (l.delayed) return ['lock-delay ' + fmtDuration(l.delay_left_ms), 'state-delayed'];
  return ['free', 'state-free'];
}

function renderLocks(data, readAt) {
  const tbody = $('locks').tBodies[0];
  const rows = [];
  ttls = [];
  const locks = data.locks.slice().sort((a, b) => (b.queue_total - a.queue_total) || (b.holders_total - a.holders_total) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const l of locks) {
    const tr = el('tr');
    tr.dataset.key = l.key;
    tr.append(cell(l.key, 'key'));
    const [state, cls] = lockState(l);
    tr.append(cell(state, cls));

    const hcell = el('td');
    if (l.holders.length) {
      const ul = el('ul', null, 'holders');
      for (const h of l.holders) {
        const owner = h.owner === '' ? '(no owner)' : h.owner;
        const li = el('li', null, 'holder');
        li.title = owner + ', token ' + h.token + (h.shared ? ', shared' : '');
        li.append(el('span', '#' + h.token, 'token'), ' ', el('span', owner, 'owner'), ' ');
        const ttl = el('span', fmtDuration(h.ttl_ms), 'ttl');
        ttls.push({ el: ttl, ms: h.ttl_ms, at: readAt });
        li.append(ttl);
        if (h.shared) li.append(' ', el('span', 'shared', 'note'));
        ul.append(li);
      }
      hcell.append(ul);
      if (l.holders_total > l.holders.length) hcell.append(el('span', '… ' + (l.holders_total - l.holders.length) + ' more', 'note'));
    } else {
      hcell.append(el('span', '—', 'note'));
    }
    tr.append(hcell);

    const qcell = el('td');
    if (l.queue.length) {
      const ol = el('ol', null, 'queue');
      for (const w of l.queue) {
        const owner = w.owner === '' ? '(no owner)' : w.owner;
        const li = el('li', null, 'waiter');
        li.title = owner + ', priority ' + w.priority;
        li.append(el('span', owner, 'owner'), ' ', el('span', 'priority ' + w.priority, 'prio'));
        if (w.shared) li.append(' ', el('span', 'shared', 'note'));
        if (w.ttl_ms) li.append(' ', el('span', 'ttl ' + fmtDuration(w.ttl_ms), 'note'));
        ol.append(li);
      }
      qcell.append(ol);
      if (l.queue_total > l.queue.length) qcell.append(el('span', '… ' + (l.queue_total - l.queue.length) + ' more', 'note'));
    } else {
      qcell.append(el('span', '—', 'note'));
    }
    tr.append(qcell);
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
  $('locks-count').textContent = '(' + data.locks.length + ' shown)';
  const more = $('locks-more');
  more.hidden = data.cursor === '0';
  more.textContent = 'More locks than the ' + LOCKS_LIMIT + ' shown: use LOCKS over RESP for the rest.';
}

function tickTTLs() {
  const now = performance.now();
  for (const t of ttls) {
    const left = Math.max(0, t.ms - (now - t.at));
    t.el.textContent = fmtDuration(left);
    t.el.classList.toggle('low', left < 5000);
  }
}

let locksTimer = null;
let locksBusy = false;
async function pollLocks() {
  clearTimeout(locksTimer);
  if (locksBusy) return;
  locksBusy = true;
  try {
    const data = await getJSON('/api/locks?limit=' + LOCKS_LIMIT);
    renderLocks(data, performance.now());
  } catch (e) {
    $('locks-count').textContent = '(' + e.message + ')';
  } finally {
    locksBusy = false;
    locksTimer = setTimeout(pollLocks, LOCKS_EVERY_MS);
  }
}

// refreshLocksSoon shows a change an event reported before the next poll,
// at most once per LOCKS_SOON_MS however many events arrive.
const LOCKS_SOON_MS = 100;
let soonQueued = false;
function refreshLocksSoon() {
  if (soonQueued) return;
  soonQueued = true;
  setTimeout(() => { soonQueued = false; pollLocks(); }, LOCKS_SOON_MS);
}

// ---- events ----
// The page opens the stream first, then reads the server's recent events
// (/api/history) once the stream is live: an event in both (it came while
// the two requests crossed) is shown once. Live events that arrive before
// the history are held back until it is drawn, so that the list stays in
// order.

let historyShown = false;
let heldBack = []; // live events received before the history was drawn

function eventRow(ev) {
  const tr = el('tr', null, 'event');
  tr.append(cell(fmtClock(ev.time_ms), 'note'),
    cell(ev.kind, 'kind-' + ev.kind),
    cell(ev.key, 'key'),
    cell('#' + ev.token, 'num token'),
    cell(ev.owner, 'owner'));
  return tr;
}

function addEventRow(tr) {
  const tbody = $('events').tBodies[0];
  tbody.prepend(tr);
  while (tbody.rows.length > EVENTS_KEPT) tbody.lastElementChild.remove();
}

const sameEvent = ev => ev.kind + '\u0000' + ev.key + '\u0000' + ev.token + '\u0000' + ev.owner;

function showHistoryEvents(events) {
  if (historyShown) return;
  historyShown = true;
  const live = new Map();
  for (const ev of heldBack) live.set(sameEvent(ev), (live.get(sameEvent(ev)) || 0) + 1);
  for (const ev of events) {
    const n = live.get(sameEvent(ev));
    if (n) { live.set(sameEvent(ev), n - 1); continue; } // the stream has it
    addEventRow(eventRow(ev));
  }
  for (const ev of heldBack) addEventRow(eventRow(ev));
  heldBack = [];
  $('events-note').textContent = events.length ? '(' + events.length + ' from before this page opened, newest first)' : '(newest first)';
}

let historyAsked = false;
async function loadHistory() {
  if (historyAsked) return;
  historyAsked = true;
  try {
    const h = await getJSON('/api/history');
    addSamples(h);
    showHistoryEvents(h.events);
  } catch (e) {
    $('events-note').textContent = '(history: ' + e.message + ')';
    showHistoryEvents([]);
  }
  setTimeout(pollHistory, HISTORY_EVERY_MS);
}

function streamEvents() {
  const feed = $('feed');
  const es = new EventSource('/api/events');
  es.addEventListener('hello', () => {
    feed.textContent = 'events: live';
    feed.className = 'badge ok';
    loadHistory();
  });
  es.addEventListener('lock', m => {
    const ev = JSON.parse(m.data);
    if (historyShown) addEventRow(eventRow(ev)); else heldBack.push(ev);
    refreshLocksSoon();
  });
  es.addEventListener('dropped', m => {
    const n = JSON.parse(m.data).count;
    const tr = el('tr', null, 'dropped');
    const td = el('td', n + ' event(s) dropped: this page did not keep up');
    td.colSpan = 5;
    tr.append(td);
    addEventRow(tr);
  });
  es.onerror = () => { feed.textContent = 'events: reconnecting'; feed.className = 'badge warn'; loadHistory(); };
  // A stream that never says hello (a proxy buffering it) must not keep
  // the history from the page.
  setTimeout(loadHistory, HISTORY_WAIT_MS);
}

// ---- hottest locks (LOCKSTATS) ----
// /api/lockstats answers LOCKSTATS's rows (by waits, the top 20); with lock
// statistics off (--lockstats-top 0) it is a 404 and the panel says so. The
// counts are right-aligned, the percentiles (milliseconds) shown with a
// unit (fmtLatency).

const HOT_COLUMNS = [
  ['key', v => v, 'key'],
  ['acquisitions', fmtCount, 'num'],
  ['waits', fmtCount, 'num'],
  ['timeouts', fmtCount, 'num'],
  ['expiries', fmtCount, 'num'],
  ['wait_p50_ms', fmtLatency, 'num'],
  ['wait_p99_ms', fmtLatency, 'num'],
  ['hold_p50_ms', fmtLatency, 'num'],
  ['hold_p99_ms', fmtLatency, 'num'],
];

async function pollHot() {
  const note = $('hot-note');
  const table = $('hot');
  try {
    const data = await getJSON('/api/lockstats');
    const rows = Array.isArray(data) ? data : (data.locks || data.top || []);
    table.tBodies[0].replaceChildren(...rows.map(r => {
      const tr = el('tr');
      for (const [field, fmt, cls] of HOT_COLUMNS) tr.append(cell(r[field] === undefined ? '' : fmt(r[field]), cls));
      return tr;
    }));
    table.hidden = rows.length === 0;
    note.textContent = rows.length ? '' : 'No contention recorded yet.';
    note.hidden = rows.length !== 0;
  } catch (e) {
    table.tBodies[0].replaceChildren();
    table.hidden = true;
    note.hidden = false;
    if (e.status === 404) {
      note.textContent = 'Lock statistics are off on this server (start it with --lockstats-top 100 to see the hottest locks).';
      return; // not coming back until the server is upgraded
    }
    note.textContent = 'Lock statistics unavailable: ' + e.message;
  }
  setTimeout(pollHot, HOT_EVERY_MS);
}

function main() {
  setupTiles();
  setupCharts();
  drawCharts();
  pollStats();
  pollLocks();
  pollHot();
  streamEvents();
  setInterval(tickTTLs, 200);
  setInterval(drawCharts, 1000);
  window.addEventListener('resize', drawCharts);
}

document.addEventListener('DOMContentLoaded', main);
