#!/usr/bin/env node
// Takes a leasehold lock with node-redis v4, checks it, and watches its events.
//
//   cd clients/node && npm ci && node example.js [key]
//
// The environment says how to reach the server, as for the leasehold binary:
// LEASEHOLD_ADDR (HOST:PORT, default 127.0.0.1:7379); LEASEHOLD_PASSWORD (else
// REDISCLI_AUTH) and LEASEHOLD_USER for a server with a password;
// LEASEHOLD_TLS=1 for TLS, with LEASEHOLD_TLS_CACERT (the CA to verify the
// server with; default Node's) and, for a server that asks for a client
// certificate, LEASEHOLD_TLS_CERT and LEASEHOLD_TLS_KEY.
// It prints what it does, one step a line, ends with "ok" and exits 0; on any
// surprise it prints why on stderr and exits 1.
'use strict';

const fs = require('fs');
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

const TRUE = ['1', 't', 'T', 'true', 'TRUE', 'True'];
const FALSE = ['', '0', 'f', 'F', 'false', 'FALSE', 'False'];

// connectionOptions adds to createClient's options the password and TLS the
// environment sets. The password is never printed.
function connectionOptions(options) {
  const env = process.env;
  const password = env.LEASEHOLD_PASSWORD || env.REDISCLI_AUTH;
  if (password) {
    // AUTH user password; without a user, AUTH password (the default user).
    options.password = password;
    if (env.LEASEHOLD_USER) options.username = env.LEASEHOLD_USER;
  }
  const tls = env.LEASEHOLD_TLS || '';
  check(TRUE.includes(tls) || FALSE.includes(tls), `LEASEHOLD_TLS must be 1 or 0, got ${JSON.stringify(tls)}`);
  const files = { ca: 'LEASEHOLD_TLS_CACERT', cert: 'LEASEHOLD_TLS_CERT', key: 'LEASEHOLD_TLS_KEY' };
  if (FALSE.includes(tls)) {
    for (const name of Object.values(files)) {
      // Not a connection in plain text that the user believes encrypted.
      check(!env[name], `${name} is a setting of TLS: set LEASEHOLD_TLS=1`);
    }
    return options;
  }
  // tls.connect's options: the server's certificate is verified (against
  // ca, else Node's CAs) for the host connected to.
  options.socket.tls = true;
  for (const [option, name] of Object.entries(files)) {
    if (env[name]) options.socket[option] = fs.readFileSync(env[name]);
  }
  return options;
}

async function main() {
  const [host, port] = hostPort(addr);
  // duplicate() copies them, password and TLS included.
  const options = connectionOptions({ socket: { host, port, connectTimeout: 5000, reconnectStrategy: false } });
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
