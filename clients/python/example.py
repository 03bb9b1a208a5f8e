#!/usr/bin/env python3
"""Takes a leasehold lock with redis-py, checks it, and watches its events.

    make example-python [KEY=key]      # finds a python3 that imports redis
    python3 clients/python/example.py [key]

Runs on Debian's python3-redis (redis-py 4) or any later redis-py.
The environment says how to reach the server, as for the leasehold binary:
LEASEHOLD_ADDR (HOST:PORT, default 127.0.0.1:7379); LEASEHOLD_PASSWORD (else
REDISCLI_AUTH) and LEASEHOLD_USER for a server with a password;
LEASEHOLD_TLS=1 for TLS, with LEASEHOLD_TLS_CACERT (the CA to verify the
server with; default the system's) and, for a server that asks for a client
certificate, LEASEHOLD_TLS_CERT and LEASEHOLD_TLS_KEY.
It prints what it does, one step a line, ends with "ok" and exits 0; on any
surprise it prints why on stderr and exits 1.
"""

import os
import socket
import sys

import redis

ADDR = os.environ.get("LEASEHOLD_ADDR") or "127.0.0.1:7379"


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def next_event(pubsub, timeout=5.0):
    """The next message on the subscribed channel, as text."""
    msg = pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
    check(msg is not None, "no event within %.0f s" % timeout)
    return msg["data"]


def host_port(addr):
    """HOST:PORT split, an IPv6 host in brackets ([::1]:7379) without them."""
    host, sep, port = addr.rpartition(":")
    check(sep and host and port.isdigit(), "LEASEHOLD_ADDR must be HOST:PORT, got %r" % addr)
    return host.strip("[]"), int(port)


TRUE, FALSE = ("1", "t", "T", "true", "TRUE", "True"), ("", "0", "f", "F", "false", "FALSE", "False")
TLS_SETTINGS = ("LEASEHOLD_TLS_CACERT", "LEASEHOLD_TLS_CERT", "LEASEHOLD_TLS_KEY")


def connection_options():
    """redis.Redis's options for the password and TLS the environment sets.
    The password is never printed."""
    opts = {}
    password = os.environ.get("LEASEHOLD_PASSWORD") or os.environ.get("REDISCLI_AUTH")
    if password:
        opts["password"] = password
        # AUTH user password; without a user, AUTH password (the default user).
        opts["username"] = os.environ.get("LEASEHOLD_USER") or None
    tls = os.environ.get("LEASEHOLD_TLS", "")
    check(tls in TRUE + FALSE, "LEASEHOLD_TLS must be 1 or 0, got %r" % tls)
    if tls in FALSE:
        for name in TLS_SETTINGS:
            # Not a connection in plain text that the user believes encrypted.
            check(not os.environ.get(name), "%s is a setting of TLS: set LEASEHOLD_TLS=1" % name)
        return opts
    opts.update(
        ssl=True,
        ssl_cert_reqs="required",
        # redis-py 4 leaves the host name unchecked unless asked.
        ssl_check_hostname=True,
        ssl_ca_certs=os.environ.get("LEASEHOLD_TLS_CACERT") or None,
        ssl_certfile=os.environ.get("LEASEHOLD_TLS_CERT") or None,
        ssl_keyfile=os.environ.get("LEASEHOLD_TLS_KEY") or None,
    )
    return opts


def main():
    key = sys.argv[1] if len(sys.argv) > 1 else "examples:python"
    host, port = host_port(ADDR)
    owner = "python-example-%s-%d" % (socket.gethostname(), os.getpid())
    # decode_responses: replies and messages as str. Integer replies (tokens)
    # are Python ints either way. The PubSub below connects with the same
    # options, password and TLS included.
    r = redis.Redis(host=host, port=port, socket_timeout=10, decode_responses=True, **connection_options())
    # A subscribed connection runs only (P)SUBSCRIBE, PING and QUIT: the
    # PubSub object keeps one of its own.
    events = r.pubsub()
    try:
        events.subscribe("__lock__:" + key)
        # Wait for the server's confirmation, so the ACQUIRE's event below
        # cannot be missed.
        confirm = events.get_message(timeout=5)
        check(confirm is not None and confirm["type"] == "subscribe",
              "no subscribe confirmation: %r" % (confirm,))

        # ACQUIRE answers the fencing token (an int) or None when held.
        token = r.execute_command("ACQUIRE", key, 30000, "OWNER", owner)
        check(token is not None, "%s is held by someone else" % key)
        check(isinstance(token, int) and token > 0, "ACQUIRE answered %r" % (token,))
        print("acquired %s token %d" % (key, token), flush=True)

        # Another owner gets None while the lease is held; the same owner
        # would get the same token back (a safe retry).
        other = r.execute_command("ACQUIRE", key, 30000, "OWNER", owner + "-other")
        check(other is None, "a second owner got %r for a held lock" % (other,))
        print("second owner refused", flush=True)

        check(r.execute_command("VERIFY", key, token) == 1, "VERIFY did not answer 1")
        print("verified token %d" % token, flush=True)

        event = next_event(events)
        check(event == "acquired %d %s" % (token, owner), "unexpected event %r" % event)
        print("event: " + event, flush=True)

        check(r.execute_command("RELEASE", key, token) == 1, "RELEASE did not answer 1")
        print("released token %d" % token, flush=True)

        event = next_event(events)
        check(event == "released %d %s" % (token, owner), "unexpected event %r" % event)
        print("event: " + event, flush=True)

        check(r.execute_command("VERIFY", key, token) == 0, "VERIFY after RELEASE did not answer 0")
        events.unsubscribe()
        print("ok", flush=True)
    finally:
        events.close()
        r.close()


if __name__ == "__main__":
    try:
        main()
    except (Failed, redis.RedisError) as e:
        print("python example: %s" % e, file=sys.stderr)
        sys.exit(1)
