"""redis-py's Lock (Debian's python3-redis 4.3.4), unchanged, against the
server at LOCKS_ADDR (HOST:PORT). Run by clients/redislibs's Go tests:

    LOCKS_ADDR=HOST:PORT python3 redispy_lock.py SCENARIO KEY

SCENARIO is api (the Lock's calls, one step a line), notimeout (a Lock
without a timeout: SET NX with no expiry; LOCKS_TARGET=redis when the
server is redis-server, where it never expires), count (threads incrementing a
counter under the lock: prints "count N" and "overlaps N") or hold (takes
the lock, prints "held TOKEN", waits for a line on stdin, then extends and
releases it). A step that goes wrong ends the run with its traceback on
stderr and status 1; every run is bounded in time.
"""

import os
import select
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError


def step(s):
    print(s, flush=True)


def client():
    host, _, port = os.environ["LOCKS_ADDR"].rpartition(":")
    return redis.Redis(host=host, port=int(port), socket_timeout=10, socket_connect_timeout=5)


def in_range(v, lo, hi, what):
    assert lo < v <= hi, "%s: %r not in (%d, %d]" % (what, v, lo, hi)


def expect(exc, what, f, *args, **kwargs):
    """Calls f, which must raise exc; returns the exception."""
    try:
        f(*args, **kwargs)
    except exc as e:
        return e
    raise AssertionError("%s: no %s" % (what, exc.__name__))


def until(seconds, what, cond):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %ss" % (what, seconds))
        time.sleep(0.01)


def api(key):
    r = client()
    other = client()

    a = r.lock(key, timeout=10)
    assert a.acquire(blocking=False)
    assert r.get(key) == a.local.token
    in_range(r.pttl(key), 9000, 10000, "PTTL after acquire")
    assert a.locked() and a.owned()
    step("acquired")

    b = other.lock(key, timeout=10)
    assert not b.acquire(blocking=False)
    assert b.locked() and not b.owned()
    t0 = time.monotonic()
    assert not b.acquire(blocking=True, blocking_timeout=0.3, sleep=0.05)
    waited = time.monotonic() - t0
    assert 0.2 < waited < 5, "blocking acquire gave up after %.3fs" % waited
    assert r.get(key) == a.local.token, "the refused attempts left the lock alone"
    step("second refused")

    assert a.extend(5)
    in_range(r.pttl(key), 13000, 15000, "PTTL after extend(5)")
    assert a.extend(2, replace_ttl=True)
    in_range(r.pttl(key), 1000, 2000, "PTTL after extend(2, replace_ttl=True)")
    step("extended")

    assert a.reacquire()
    in_range(r.pttl(key), 9000, 10000, "PTTL after reacquire")
    step("reacquired")

    a.release()
    assert not a.locked() and not a.owned()
    assert r.get(key) is None
    e = expect(LockError, "release of an unlocked lock", a.release)
    assert str(e) == "Cannot release an unlocked lock", str(e)
    step("released")

    # Blocking: the holder's short lease runs out, a blocking acquire takes it.
    short = r.lock(key + ":x", timeout=0.3)
    assert short.acquire(blocking=False)
    waiter = other.lock(key + ":x", timeout=10, sleep=0.01)
    t0 = time.monotonic()
    assert waiter.acquire(blocking=True, blocking_timeout=8)
    assert time.monotonic() - t0 < 8
    assert waiter.owned() and not short.owned()
    step("acquired after expiry")

    e = expect(LockNotOwnedError, "stale extend", short.extend, 1)
    assert str(e) == "Cannot extend a lock that's no longer owned", str(e)
    e = expect(LockNotOwnedError, "stale reacquire", short.reacquire)
    assert str(e) == "Cannot reacquire a lock that's no longer owned", str(e)
    e = expect(LockNotOwnedError, "stale release", short.release)
    assert str(e) == "Cannot release a lock that's no longer owned", str(e)
    assert waiter.owned(), "the stale calls left the new holder alone"
    step("stale release refused")
    waiter.release()

    # Expired with nobody taking it: the release is refused all the same.
    gone = r.lock(key + ":g", timeout=0.2)
    assert gone.acquire(blocking=False)
    until(5, "the lease's expiry", lambda: not gone.locked())
    expect(LockNotOwnedError, "release of an expired lock", gone.release)
    step("expired release refused")

    with r.lock(key + ":c", timeout=10) as cm:
        assert cm.owned()
        assert not other.lock(key + ":c", timeout=10).acquire(blocking=False)
    assert r.get(key + ":c") is None
    holder = other.lock(key + ":c", timeout=10)
    assert holder.acquire(blocking=False)
    try:
        with r.lock(key + ":c", timeout=10, blocking_timeout=0.2, sleep=0.05):
            raise AssertionError("entered a held lock")
    except LockError as e:
        assert str(e) == "Unable to acquire lock within the time specified", str(e)
    holder.release()
    step("context manager")


def notimeout(key):
    r = client()
    if os.environ.get("LOCKS_TARGET") != "redis":
        # leasehold has no lease without end: SET NX with no expiry takes
        # the lock's default ttl, and a lock with none refuses it
        # (docs/redis-compat.md). CREATE gives it one.
        e = expect(redis.exceptions.ResponseError, "a lock without a timeout or a default ttl", r.lock(key).acquire, blocking=False)
        assert str(e) == "no ttl given and the lock has no default ttl", str(e)
        step("refused without a default ttl")
        r.execute_command("CREATE", key, "TTL", "10000")
    a = r.lock(key)
    assert a.acquire(blocking=False)
    if os.environ.get("LOCKS_TARGET") == "redis":
        assert r.pttl(key) == -1, r.pttl(key)
    else:
        in_range(r.pttl(key), 9000, 10000, "PTTL of a lock taken with its default ttl")
    assert not r.lock(key).acquire(blocking=False)
    e = expect(LockError, "extend of a lock without a timeout", a.extend, 1)
    assert str(e) == "Cannot extend a lock with no timeout", str(e)
    a.release()
    assert r.get(key) is None
    step("lock without a timeout")


def count(key):
    workers, rounds = 4, 25
    state = {"counter": 0, "inside": 0, "overlaps": 0}
    errors = []

    def work():
        try:
            r = client()
            for _ in range(rounds):
                lock = r.lock(key, timeout=5, sleep=0.005, blocking_timeout=20)
                assert lock.acquire(), "no lock within 20s"
                state["inside"] += 1
                if state["inside"] > 1:
                    state["overlaps"] += 1
                v = state["counter"]
                time.sleep(0.002)
                state["counter"] = v + 1
                state["inside"] -= 1
                lock.release()
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    assert not any(t.is_alive() for t in threads), "workers still running after 40s"
    assert not errors, errors
    step("count %d" % state["counter"])
    step("overlaps %d" % state["overlaps"])


def hold(key):
    r = client()
    lock = r.lock(key, timeout=15)
    assert lock.acquire(blocking=False)
    step("held " + lock.local.token.decode())
    ready, _, _ = select.select([sys.stdin], [], [], 40)
    assert ready and sys.stdin.readline(), "no go-ahead on stdin within 40s"
    assert lock.extend(15, replace_ttl=True)
    in_range(r.pttl(key), 10000, 15000, "PTTL after the extend")
    assert lock.owned()
    step("extended")
    lock.release()
    assert r.get(key) is None
    step("released")


def main():
    scenario, key = sys.argv[1], sys.argv[2]
    {"api": api, "notimeout": notimeout, "count": count, "hold": hold}[scenario](key)
    step("ok")


if __name__ == "__main__":
    main()
