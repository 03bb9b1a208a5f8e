'use strict';
// Node's Redis lock libraries, unchanged, against the server at
// LOCKS_ADDR (HOST:PORT): npm redlock 4.2.0, @sesamecare-oss/redlock 1.4.0
// and redis-semaphore 5.8.0's Mutex, all on ioredis 5.11.1. Run by
// clients/redislibs's Go tests:
//
//   node locks.js LIBRARY SCENARIO KEY
//
// LIBRARY is redlock4, sesamecare or semaphore; SCENARIO is api (the
// library's calls, one step a line), count (workers incrementing a counter
// under the lock: prints "count N" and "overlaps N") or hold (takes the
// lock, prints "held VALUE", waits for a line on stdin, then extends and
// releases it). A step that goes wrong ends the run with its error on
// stderr and status 1; every run is bounded in time.

const assert = require('node:assert/strict');
const readline = require('node:readline');
const Redis = require('ioredis');

const [lib, scenario, key] = process.argv.slice(2);
const addr = process.env.LOCKS_ADDR || '';
const sep = addr.lastIndexOf(':');
if (!lib || !scenario || !key || sep < 0) {
  console.error('usage: LOCKS_ADDR=HOST:PORT node locks.js LIBRARY SCENARIO KEY');
  process.exit(2);
}
const host = addr.slice(0, sep);
const port = Number(addr.slice(sep + 1));

// No run outlives this: the Go test kills it after longer still.
const overall = setTimeout(() => {
  console.error(`${lib} ${scenario}: did not finish within 45s`);
  process.exit(3);
}, 45000);

const clients = [];
function client() {
  const c = new Redis({ host, port, connectTimeout: 5000, commandTimeout: 10000, maxRetriesPerRequest: 2 });
  c.on('error', (err) => console.error(`ioredis: ${err.message}`));
  clients.push(c);
  return c;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const step = (s) => console.log(s);

// expectReject awaits p, which must fail with an error of class cls (by
// name); it returns the error.
async function expectReject(p, cls, what) {
  let err;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what}: no error`);
  assert.equal(err.name === cls || err.constructor.name === cls, true, `${what}: ${err.name}: ${err.message}`);
  return err;
}

// until polls cond every 10 ms until it holds, for up to ms.
async function until(ms, what, cond) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(10);
  }
}

function inRange(v, lo, hi, what) {
  assert.ok(typeof v === 'number' && v > lo && v <= hi, `${what}: ${v} not in (${lo}, ${hi}]`);
}

// Each library as the scenarios use it: make(client, opts) gives an object
// with lock(ttl) -> handle, and handle.value, extend(ttl), release().
const libs = {
  redlock4: {
    make(c, { retries = 0, retryDelay = 10 } = {}) {
      const Redlock = require('redlock');
      const rl = new Redlock([c], { retryCount: retries, retryDelay, retryJitter: retryDelay });
      rl.on('clientError', (err) => console.error(`redlock clientError: ${err.message}`));
      return {
        async lock(res, ttl) {
          const l = await rl.lock(res, ttl);
          const h = {
            value: l.value,
            async extend(t) { const n = await l.extend(t); h.value = n.value; return h; },
            release: () => l.unlock(),
          };
          return h;
        },
      };
    },
  },
  sesamecare: {
    make(c, { retries = 0, retryDelay = 10 } = {}) {
      const { Redlock } = require('@sesamecare-oss/redlock');
      const rl = new Redlock([c], { retryCount: retries, retryDelay, retryJitter: retryDelay });
      rl.on('error', () => {}); // every refusal is emitted too
      return {
        rl,
        async lock(res, ttl) {
          let l = await rl.acquire([res], ttl);
          const h = {
            value: l.value,
            async extend(t) { l = await l.extend(t); return h; },
            release: () => l.release(),
          };
          return h;
        },
      };
    },
  },
  semaphore: {
    make(c, { retries = 0, retryDelay = 10, refreshInterval = 0 } = {}) {
      const { Mutex } = require('redis-semaphore');
      return {
        async lock(res, ttl) {
          const m = new Mutex(c, res, {
            lockTimeout: ttl,
            acquireTimeout: retries > 0 ? 20000 : retryDelay,
            acquireAttemptsLimit: retries > 0 ? retries + 1 : 1,
            retryInterval: retryDelay,
            refreshInterval,
            onLockLost: (err) => {
              console.error(`onLockLost: ${err.message}`);
              process.exit(4);
            },
          });
          await m.acquire();
          return { value: m.identifier, mutex: m, release: () => m.release() };
        },
      };
    },
  },
};

// The Redis key a library's lock on res lives in.
const redisKey = (res) => (lib === 'semaphore' ? `mutex:${res}` : res);

async function count() {
  const workers = 4;
  const rounds = 25;
  let counter = 0;
  let inside = 0;
  let overlaps = 0;
  await Promise.all(Array.from({ length: workers }, async () => {
    const l = libs[lib].make(client(), { retries: 100000, retryDelay: 5 });
    for (let i = 0; i < rounds; i++) {
      const h = await l.lock(key, 5000);
      inside++;
      if (inside > 1) overlaps++;
      const v = counter;
      await sleep(2);
      counter = v + 1;
      inside--;
      await h.release();
    }
  }));
  step(`count ${counter}`);
  step(`overlaps ${overlaps}`);
}

async function hold() {
  const c = client();
  const l = libs[lib].make(c, { refreshInterval: lib === 'semaphore' ? 1000 : 0 });
  const h = await l.lock(key, 15000);
  step(`held ${h.value}`);
  const rl = readline.createInterface({ input: process.stdin });
  const it = rl[Symbol.asyncIterator]();
  const line = await it.next();
  rl.close();
  assert.ok(!line.done, 'stdin closed before the go-ahead');
  if (h.extend) {
    await h.extend(15000);
    inRange(await c.pttl(redisKey(key)), 10000, 15000, 'PTTL after the extend');
    assert.equal(await c.get(redisKey(key)), h.value);
    step('extended');
  }
  await h.release();
  assert.equal(await c.get(redisKey(key)), null);
  step('released');
}

async function apiRedlock4() {
  const Redlock = require('redlock');
  const c = client();
  const other = client();
  const rl = new Redlock([c], { retryCount: 0 });
  const rival = new Redlock([other], { retryCount: 2, retryDelay: 20, retryJitter: 10 });
  for (const r of [rl, rival]) r.on('clientError', (err) => console.error(`redlock clientError: ${err.message}`));

  let lock = await rl.lock(key, 10000);
  assert.match(lock.value, /^[0-9a-f]{32}$/);
  assert.equal(await c.get(key), lock.value);
  inRange(await c.pttl(key), 9000, 10000, 'PTTL after lock');
  step('acquired');

  let err = await expectReject(rival.lock(key, 10000), 'LockError', 'lock of a held resource');
  assert.equal(err.message, `Exceeded 2 attempts to lock the resource "${key}".`);
  assert.equal(await c.get(key), lock.value, 'the refused rival left the lock alone');
  step('second refused');

  lock = await lock.extend(3000);
  inRange(await c.pttl(key), 2000, 3000, 'PTTL after extend(3000)');
  lock = await rl.extend(lock, 20000);
  inRange(await c.pttl(key), 19000, 20000, 'PTTL after extend(20000)');
  step('extended');

  await lock.unlock();
  assert.equal(await c.get(key), null);
  step('released');
  err = await expectReject(rl.unlock(lock), 'LockError', 'a second unlock');
  assert.equal(err.message, `Unable to fully release the lock on resource "${key}".`);
  step('second release refused');

  // Several resources at once.
  const multi = await rl.lock([`${key}:a`, `${key}:b`], 10000);
  await expectReject(rival.lock(`${key}:b`, 10000), 'LockError', 'lock of one of a held pair');
  await expectReject(rival.lock([`${key}:c`, `${key}:a`], 10000), 'LockError', 'lock of a pair half held');
  assert.equal(await c.get(`${key}:c`), null, 'the refused pair took neither');
  await multi.unlock();
  assert.equal(await c.get(`${key}:a`), null);
  assert.equal(await c.get(`${key}:b`), null);
  step('multi-resource');

  // Expiry: a short lock runs out, the rival takes it, the stale unlock fails.
  const short = await rl.lock(`${key}:x`, 300);
  const poller = new Redlock([other], { retryCount: 500, retryDelay: 10, retryJitter: 5 });
  const t0 = Date.now();
  const taken = await poller.lock(`${key}:x`, 10000);
  assert.ok(Date.now() - t0 < 8000);
  step('acquired after expiry');
  err = await expectReject(short.unlock(), 'LockError', 'stale unlock');
  assert.equal(await c.get(`${key}:x`), taken.value, 'the stale unlock left the new holder alone');
  step('stale release refused');
  await taken.unlock();
}

async function apiSesamecare() {
  const { Redlock } = require('@sesamecare-oss/redlock');
  const c = client();
  const other = client();
  const rl = new Redlock([c], { retryCount: 0 });
  const rival = new Redlock([other], { retryCount: 2, retryDelay: 20, retryJitter: 10 });
  for (const r of [rl, rival]) r.on('error', () => {});

  let lock = await rl.acquire([key], 10000);
  assert.match(lock.value, /^[0-9a-f]{32}$/);
  assert.equal(await c.get(key), lock.value);
  inRange(await c.pttl(key), 9000, 10000, 'PTTL after acquire');
  step('acquired');

  let err = await expectReject(rival.acquire([key], 10000), 'ExecutionError', 'acquire of a held resource');
  assert.equal(err.message, 'The operation was unable to achieve a quorum during its retry window.');
  assert.equal(await c.get(key), lock.value, 'the refused rival left the lock alone');
  step('second refused');

  lock = await lock.extend(3000);
  inRange(await c.pttl(key), 2000, 3000, 'PTTL after extend(3000)');
  lock = await rl.extend(lock, 20000);
  inRange(await c.pttl(key), 19000, 20000, 'PTTL after extend(20000)');
  step('extended');

  await lock.release();
  assert.equal(await c.get(key), null);
  step('released');
  err = await expectReject(rl.release(lock), 'ExecutionError', 'a second release');
  step('second release refused');

  const multi = await rl.acquire([`${key}:a`, `${key}:b`], 10000);
  await expectReject(rival.acquire([`${key}:c`, `${key}:b`], 10000), 'ExecutionError', 'acquire of a pair half held');
  assert.equal(await c.get(`${key}:c`), null, 'the refused pair took neither');
  await multi.release();
  assert.equal(await c.get(`${key}:a`), null);
  step('multi-resource');

  // using: the routine outlives the first duration; the library extends.
  let seen;
  await rl.using([`${key}:u`], 1000, { automaticExtensionThreshold: 500 }, async (signal) => {
    seen = await c.get(`${key}:u`);
    assert.ok(seen, 'held inside using');
    await expectReject(rival.acquire([`${key}:u`], 10000), 'ExecutionError', 'acquire while using holds it');
    await sleep(1500);
    assert.equal(signal.aborted, false, `using's extension failed: ${signal.error && signal.error.message}`);
    assert.equal(await c.get(`${key}:u`), seen, 'still held after the first duration');
  });
  assert.equal(await c.get(`${key}:u`), null, 'released after using');
  step('using');

  const short = await rl.acquire([`${key}:x`], 300);
  const poller = new Redlock([other], { retryCount: 500, retryDelay: 10, retryJitter: 5 });
  poller.on('error', () => {});
  const taken = await poller.acquire([`${key}:x`], 10000);
  step('acquired after expiry');
  await expectReject(rl.release(short), 'ExecutionError', 'stale release');
  assert.equal(await c.get(`${key}:x`), taken.value, 'the stale release left the new holder alone');
  step('stale release refused');
  await taken.release();
}

async function apiSemaphore() {
  const { Mutex } = require('redis-semaphore');
  const c = client();
  const other = client();
  const rk = `mutex:${key}`;

  const m = new Mutex(c, key, { lockTimeout: 10000, acquireTimeout: 1000, refreshInterval: 0 });
  await m.acquire();
  assert.equal(m.isAcquired, true);
  assert.equal(await c.get(rk), m.identifier);
  inRange(await c.pttl(rk), 9000, 10000, 'PTTL after acquire');
  step('acquired');

  const rival = new Mutex(other, key, { lockTimeout: 10000, acquireTimeout: 200, retryInterval: 20, refreshInterval: 0 });
  assert.equal(await rival.tryAcquire(), false);
  const err = await expectReject(rival.acquire(), 'TimeoutError', 'acquire of a held mutex');
  assert.equal(err.message, `Acquire mutex ${rk} timeout`);
  step('second refused');

  await m.release();
  assert.equal(m.isAcquired, false);
  assert.equal(await c.get(rk), null);
  step('released');

  // Refresh: a 1.5 s lock refreshed every 150 ms outlives its first lease.
  let lost = null;
  const r = new Mutex(c, `${key}:r`, { lockTimeout: 1500, acquireTimeout: 1000, refreshInterval: 150, onLockLost: (e) => { lost = e; } });
  await r.acquire();
  const t0 = Date.now();
  await until(5000, 'past the first lease', async () => Date.now() - t0 > 2000);
  assert.equal(lost, null, `lost: ${lost && lost.message}`);
  assert.equal(r.isAcquired, true);
  assert.equal(await c.get(`mutex:${key}:r`), r.identifier);
  inRange(await c.pttl(`mutex:${key}:r`), 0, 1500, 'PTTL while refreshed');
  step('refreshed');
  await r.release();
  assert.equal(await c.get(`mutex:${key}:r`), null);

  // Expiry: without refresh, a short lock runs out; a rival takes it; the
  // stale release (whose result redis-semaphore ignores) leaves it alone.
  const short = new Mutex(c, `${key}:x`, { lockTimeout: 300, acquireTimeout: 1000, refreshInterval: 0 });
  await short.acquire();
  const taker = new Mutex(other, `${key}:x`, { lockTimeout: 10000, acquireTimeout: 8000, retryInterval: 10, refreshInterval: 0 });
  await taker.acquire();
  step('acquired after expiry');
  await short.release();
  assert.equal(await c.get(`mutex:${key}:x`), taker.identifier, 'the stale release left the new holder alone');
  step('stale release refused');

  // A refresh that finds the lock gone reports it lost.
  let lostErr = null;
  const gone = new Mutex(c, `${key}:g`, { lockTimeout: 5000, acquireTimeout: 1000, refreshInterval: 50, onLockLost: (e) => { lostErr = e; } });
  await gone.acquire();
  await other.del(`mutex:${key}:g`);
  await until(5000, 'onLockLost', async () => lostErr !== null);
  assert.equal(lostErr.message, `Lost mutex for key mutex:${key}:g`);
  assert.equal(gone.isAcquired, false);
  step('lost lock reported');
  await taker.release();
}

async function main() {
  if (!libs[lib]) throw new Error(`unknown library ${lib}`);
  switch (scenario) {
    case 'api':
      await { redlock4: apiRedlock4, sesamecare: apiSesamecare, semaphore: apiSemaphore }[lib]();
      break;
    case 'count':
      await count();
      break;
    case 'hold':
      await hold();
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  step('ok');
}

main().then(
  async () => {
    clearTimeout(overall);
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    process.exit(0);
  },
  (err) => {
    console.error(`${lib} ${scenario}: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
