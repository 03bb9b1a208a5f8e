// leasehold's status page. Every key and owner is user input: the DOM is
// built with createElement and textContent only, never innerHTML, and the
// Content-Security-Policy allows no inline script.
'use strict';

const LOCKS_EVERY_MS = 500;
const STATS_EVERY_MS = 1000;
const HOT_EVERY_MS = 5000;
const CHART_SECONDS = 300; // the most a chart spans
const CHART_MIN_SECONDS = 30; // the least, while the page is young
const EVENTS_KEPT = 200;
const LOCKS_LIMIT = 200;

// el makes an element with its text (as text, never markup) and class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function $(id) { return document.getElementById(id); }

function fmtDuration(ms) {
  if (ms <= 0) return '0s';
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + 's';
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  const h = Math.floor(s / 3600);
  if (h < 48) return h + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  return Math.floor(h / 24) + 'd' + (h % 24) + 'h';
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

// ---- server stats and charts ----

const series = {
  grants: { title: 'Grants', color: '#2f6feb', field: s => s.Locks.Granted, points: [] },
  waits: { title: 'Waits', color: '#9a6700', field: s => s.Locks.Waits, points: [] },
  expiries: { title: 'Expiries', color: '#b42318', field: s => s.Locks.Expired, points: [] },
};
let lastStats = null;

const SVGNS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function setupCharts() {
  const box = $('charts');
  for (const name in series) {
    const s = series[name];
    const div = el('div', null, 'chart');
    div.id = 'chart-' + name;
    const h = el('h3', s.title + ' ');
    s.now = el('span', '', 'now');
    h.append(s.now);
    s.svg = svg('svg', { viewBox: '0 0 300 90', preserveAspectRatio: 'none', role: 'img', 'aria-label': s.title + ' per second' });
    s.area = svg('path', { class: 'area', fill: s.color });
    s.line = svg('path', { class: 'line', stroke: s.color });
    s.max = svg('text', { x: 3, y: 11, 'font-size': 10, fill: '#66707a' });
    s.svg.append(s.area, s.line, s.max);
    div.append(h, s.svg);
    box.append(div);
  }
}

function drawCharts() {
  const now = Date.now();
  for (const name in series) {
    const s = series[name];
    const pts = s.points.filter(p => now - p.t <= CHART_SECONDS * 1000);
    s.points = pts;
    const max = Math.max(1, ...pts.map(p => p.v));
    // The span grows with the page's age up to CHART_SECONDS.
    const span = pts.length ? Math.min(CHART_SECONDS, Math.max(CHART_MIN_SECONDS, (now - pts[0].t) / 1000)) : CHART_SECONDS;
    const x = t => 300 - (now - t) / 1000 * (300 / span);
    const y = v => 88 - v / max * 74;
    let d = '';
    pts.forEach((p, i) => { d += (i ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1); });
    s.line.setAttribute('d', d);
    s.area.setAttribute('d', pts.length ? d + 'L' + x(pts[pts.length - 1].t).toFixed(1) + ' 90L' + x(pts[0].t).toFixed(1) + ' 90Z' : '');
    s.max.textContent = 'max ' + fmtRate(max);
    s.now.textContent = pts.length ? fmtRate(pts[pts.length - 1].v) + '/s now, last ' + fmtDuration(span * 1000) : '';
  }
}

function fmtRate(v) { return v >= 100 ? Math.round(v).toString() : v.toFixed(v >= 10 ? 1 : 2).replace(/\.?0+$/, ''); }

function renderStats(st) {
  const ready = $('ready');
  ready.textContent = st.ready ? 'ready' : 'not ready: ' + st.why;
  ready.className = 'badge ' + (st.ready ? 'ok' : 'bad');
  $('version').textContent = 'version ' + st.Version;
  $('uptime').textContent = 'up ' + fmtDuration(st.uptime_s * 1000);
  const rows = [
    ['Clients connected', st.Clients.Connected + ' / ' + st.Clients.MaxClients],
    ['Clients waiting', st.Clients.Blocked],
    ['Locks', st.Locks.Locks + (st.Locks.MaxLocks ? ' / ' + st.Locks.MaxLocks : '')],
    ['Leases held', st.Locks.Held],
    ['Granted', st.Locks.Granted],
    ['Granted from the queue', st.Locks.WaitGrants],
    ['Waits', st.Locks.Waits],
    ['Wait timeouts', st.Locks.WaitTimeouts],
    ['Released', st.Locks.Released],
    ['Expired', st.Locks.Expired],
    ['Commands', st.Traffic.CommandsProcessed],
    ['Memory used', fmtBytes(st.Memory.Used)],
  ];
  if (st.Persistence) rows.push(['Data directory', st.Persistence.OK ? 'ok (fsync ' + st.Persistence.Fsync + ')' : 'failing: ' + st.Persistence.Error]);
  if (st.Cluster) rows.push(['Cluster', st.Cluster.NodeID + ': ' + st.Cluster.Role + ', term ' + st.Cluster.Term]);
  const dl = $('stats');
  dl.replaceChildren();
  for (const [k, v] of rows) dl.append(el('dt', k), el('dd', v));

  if (lastStats && st.time_ms > lastStats.time_ms) {
    const dt = (st.time_ms - lastStats.time_ms) / 1000;
    for (const name in series) {
      const s = series[name];
      const dv = s.field(st) - s.field(lastStats);
      if (dv >= 0) s.points.push({ t: st.time_ms, v: dv / dt });
    }
  }
  lastStats = st;
  drawCharts();
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
    tr.append(el('td', l.key, 'key'));
    const [state, cls] = lockState(l);
    tr.append(el('td', state, cls));

    const hcell = el('td');
    if (l.holders.length) {
      const ul = el('ul', null, 'holders');
      for (const h of l.holders) {
        const li = el('li', null, 'holder');
        li.append(el('span', '#' + h.token, 'token'), ' ',
          el('span', h.owner === '' ? '(no owner)' : h.owner, 'owner'), ' ');
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
        const li = el('li', null, 'waiter');
        li.append(el('span', w.owner === '' ? '(no owner)' : w.owner, 'owner'), ' ',
          el('span', 'priority ' + w.priority, 'prio'));
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

function addEventItem(li) {
  const list = $('events');
  list.prepend(li);
  while (list.children.length > EVENTS_KEPT) list.lastElementChild.remove();
}

function streamEvents() {
  const feed = $('feed');
  const es = new EventSource('/api/events');
  es.addEventListener('hello', () => { feed.textContent = 'events: live'; feed.className = 'badge ok'; });
  es.addEventListener('lock', m => {
    const ev = JSON.parse(m.data);
    const li = el('li', null, 'event');
    li.append(el('span', new Date(ev.time_ms).toLocaleTimeString(), 'note'), ' ',
      el('span', ev.kind, 'kind-' + ev.kind), ' ',
      el('span', ev.key, 'evkey'), ' ',
      el('span', '#' + ev.token, 'token'));
    if (ev.owner) li.append(' ', el('span', ev.owner, 'owner'));
    addEventItem(li);
    refreshLocksSoon();
  });
  es.addEventListener('dropped', m => {
    const n = JSON.parse(m.data).count;
    addEventItem(el('li', n + ' event(s) dropped: this page did not keep up', 'dropped'));
  });
  es.onerror = () => { feed.textContent = 'events: reconnecting'; feed.className = 'badge warn'; };
}

// ---- hottest locks (LOCKSTATS) ----
// /api/lockstats answers LOCKSTATS's rows (by waits, the top 20); with lock
// statistics off (--lockstats-top 0) it is a 404 and the panel says so. Its
// rows are shown column by column as given, each value as text, the
// percentiles (the _ms columns) with their unit (fmtLatency).

async function pollHot() {
  const note = $('hot-note');
  const table = $('hot');
  try {
    const data = await getJSON('/api/lockstats');
    const rows = Array.isArray(data) ? data : (data.locks || data.top || []);
    const cols = rows.length ? Object.keys(rows[0]) : [];
    const head = el('tr');
    for (const c of cols) head.append(el('th', c));
    table.tHead.replaceChildren(head);
    table.tBodies[0].replaceChildren(...rows.map(r => {
      const tr = el('tr');
      for (const c of cols) {
        const v = c.endsWith('_ms') ? fmtLatency(r[c]) : typeof r[c] === 'object' ? JSON.stringify(r[c]) : r[c];
        tr.append(el('td', v, c === 'key' ? 'key' : ''));
      }
      return tr;
    }));
    note.textContent = rows.length ? '' : 'No contention recorded yet.';
  } catch (e) {
    table.tHead.replaceChildren();
    table.tBodies[0].replaceChildren();
    if (e.status === 404) {
      note.textContent = 'Lock statistics are off on this server (start it with --lockstats-top 100 to see the hottest locks).';
      return; // not coming back until the server is upgraded
    }
    note.textContent = 'Lock statistics unavailable: ' + e.message;
  }
  setTimeout(pollHot, HOT_EVERY_MS);
}

function main() {
  setupCharts();
  pollStats();
  pollLocks();
  pollHot();
  streamEvents();
  setInterval(tickTTLs, 200);
  setInterval(drawCharts, 1000);
}

document.addEventListener('DOMContentLoaded', main);
