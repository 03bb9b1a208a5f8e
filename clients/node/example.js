#!/usr/bin/env node
// Takes a leasehold lock with node-redis v4, checks it, and watches its events.
//
//   cd clients/node && npm ci && node example.js [key]
//
// LEASEHOLD_ADDR (HOST:PORT, default 127.0.0.1:7379) names the server, as for
// the leasehold binary.
// It prints what it does, one step a line, ends with "ok" and exits 0; on any
// surprise it prints why on stderr and exits 1.
'use strict';

const os = require('os');
const { createClient } = require('redis');

const addr = process.env.LEASEHOLD_ADDR || '127.0.0.1:7379';
const key = process.argv[2] || 'examples:node';
const owner = `node-example-${os.hostname()}-${process.pid}`;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// events collects the messages of the lock's channel, in order.
class Events {
  constructor() {
    this.queue = [];
    this.waiting = null;
  }

  push(message) {
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = null;
      resolve(message);
    } else {
      this.queue.push(message);
    }
  }

  // next resolves to the next message, or rejects after ms.
  next(ms = 5000) {
    if (this.queue.length > 0) return Promise.resolve(this.queue.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = null;
        reject(new Error(`no event on __lock__:${key} within ${ms} ms`));
      }, ms);
      this.waiting = (message) => {
        clearTimeout(timer);
        resolve(message);
      };
    });
  }
}

// hostPort splits HOST:PORT; an IPv6 host in brackets ([::1]:7379) loses them.
function hostPort(a) {
  const i = a.lastIndexOf(':');
  const host = a.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = a.slice(i + 1);
  check(i > 0 && host !== '' && /^[0-9]+$/.test(port), `LEASEHOLD_ADDR must be HOST:PORT, got ${JSON.stringify(a)}`);
  return [host, Number(port)];
}

async function main() {
  const [host, port] = hostPort(addr);
  const options = { socket: { host, port, connectTimeout: 5000, reconnectStrategy: false } };
  const client = createClient(options);
  // A subscribed connection runs only (P)SUBSCRIBE, PING and QUIT: use a second one.
  const subscriber = client.duplicate();
  for (const c of [client, subscriber]) {
    c.on('error', (err) => console.error(`redis: ${err.message}`));
  }
  await client.connect();
  await subscriber.connect();
  try {
    const events = new Events();
    // subscribe resolves once the server has confirmed the subscription, so
    // the events of the ACQUIRE below cannot be missed.
    await subscriber.subscribe(`__lock__:${key}`, (message) => events.push(message));

    // ACQUIRE answers the fencing token, a JavaScript number (tokens stay
    // below 2^53, so it is exact), or null when the lock is held.
    const token = await client.sendCommand(['ACQUIRE', key, '30000', 'OWNER', owner]);
    check(token !== null, `${key} is held by someone else`);
    check(Number.isSafeInteger(token) && token > 0, `ACQUIRE answered ${token}, not a token`);
    console.log(`acquired ${key} token ${token}`);

    // Another owner gets null while the lease is held; the same owner would
    // get the same token back (a safe retry).
    const other = await client.sendCommand(['ACQUIRE', key, '30000', 'OWNER', `${owner}-other`]);
    check(other === null, `a second owner got ${other} for a held lock`);
    console.log('second owner refused');

    const verified = await client.sendCommand(['VERIFY', key, String(token)]);
    check(verified === 1, `VERIFY answered ${verified}`);
    console.log(`verified token ${token}`);

    let event = await events.next();
    check(event === `acquired ${token} ${owner}`, `unexpected event ${JSON.stringify(event)}`);
    console.log(`event: ${event}`);

    const released = await client.sendCommand(['RELEASE', key, String(token)]);
    check(released === 1, `RELEASE answered ${released}`);
    console.log(`released token ${token}`);

    event = await events.next();
    check(event === `released ${token} ${owner}`, `unexpected event ${JSON.stringify(event)}`);
    console.log(`event: ${event}`);

    const again = await client.sendCommand(['VERIFY', key, String(token)]);
    check(again === 0, `VERIFY after RELEASE answered ${again}`);
    await subscriber.unsubscribe(`__lock__:${key}`);
    console.log('ok');
  } finally {
    await Promise.allSettled([client.quit(), subscriber.quit()]);
  }
}

main().catch((err) => {
  console.error(`node example: ${err.message}`);
  process.exitCode = 1;
});
