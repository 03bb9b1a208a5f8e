// Package leasehold is the Go client of the leasehold lock server: it takes
// leases with fencing tokens, keeps them alive while they are held, and says
// through a channel and a context the moment it can no longer prove that they
// are.
//
// The connections are go-redis v9's (pooling, TLS, timeouts, retries); this
// package adds the lock semantics on top:
//
//	c, err := leasehold.New(leasehold.DefaultConfig()) // 127.0.0.1:7379
//	...
//	lease, err := c.Acquire(ctx, "reports:nightly", 30*time.Second, leasehold.Wait(time.Minute))
//	if errors.Is(err, leasehold.ErrNotAcquired) {
//		return nil // someone else runs the report
//	}
//	...
//	defer lease.Release(context.WithoutCancel(ctx))
//	return makeReport(lease.Context(), lease.Token())
//
// or, shorter, [Client.WithLock].
//
// # Holding is never certain
//
// A lease is held until its deadline on the server, which this client can
// only estimate. It renews the lease in the background (every third of its
// ttl by default) and takes each renewal's deadline from the moment the
// request was sent, not from when the reply came back: the server started
// the new period no earlier than that, so the estimate does not run past the
// server's deadline as long as the two clocks run at about the same rate.
// When a renewal is refused (the server no longer has the lease), or none
// has been confirmed by the estimated deadline less a safety margin, the
// lease counts as lost: [Lease.Lost] closes and [Lease.Context] is
// cancelled. A holder must stop using the lock then.
//
// The estimate has limits it cannot see past. Go's monotonic clock stops
// while the host is suspended, so after a suspend the estimate is late by the
// time asleep. And the server can end a lease before its deadline: a RELEASE
// of the token from elsewhere, or a restart of a server without --data-dir.
// The client learns of either at its next renewal, up to a third of the ttl
// later, while someone else may already hold the lock.
//
// That is the most a client can do, and it is not enough on its own: a
// process can be paused (garbage collection, a stopped VM, swapping) between
// checking that it holds the lock and acting on it, and then act after the
// lease has gone to someone else. This is why every lease carries a fencing
// token: pass [Lease.Token] to the resource the lock protects, and have it
// refuse requests carrying a token lower than the highest it has seen. See
// the server's README.
//
// # Retries
//
// Every Acquire names an OWNER (a random id per call unless [Owner] gives
// one). The server answers a repeated ACQUIRE of the same owner with the same
// lease and token, so go-redis may retry an ACQUIRE whose reply was lost
// (Config.Redis.MaxRetries, 3 by default) without ever granting the lock
// twice. A waiting ACQUIRE sent again with the same owner while the first
// still waits takes the first one's place in the queue; once the first's
// connection is gone, so is its place, and the new one queues anew.
//
// # Several addresses
//
// [Config].Addrs lists the nodes of one leasehold cluster, every one of
// which accepts every command: each new connection goes to the first node
// that accepts it, starting at the one that last did, so the Client goes on
// working when the node it talks to is lost. Only new connections move:
// one to a node that is still up stays there, and none moves back to a
// node that returns. Each address has Redis.DialTimeout to connect (5s by
// default): a node that does not answer at all (powered off, cut off by a
// firewall that drops packets) costs a new connection that long before
// the next is tried, so keep DialTimeout well below ReadTimeout, which
// bounds the whole call. [FailoverOptions] does the same for a go-redis
// client of one's own.
//
// Do not list independent single-node servers: they do not know of each
// other's locks, so a client that fails over would be granted on the
// second a lock that someone else holds on the first, and tokens would go
// back. Nothing refuses such a list.
//
// When the node dies in the middle of a call, go-redis retries the command;
// this package's own retries are for a cluster's replies (see "Clusters"):
//
//   - A command on the shared pool (TryAcquire, Acquire without a wait,
//     Release, Extend, Verify, Status, and the keep-alive's renewals) whose
//     connection breaks is sent again on a new connection, so to the next
//     node, up to Redis.MaxRetries times (3 by default), whether or not the
//     first had reached the server: go-redis cannot tell. For ACQUIRE this
//     is safe: it carries an OWNER, and a repeated ACQUIRE of the same
//     owner gets the same lease and token back, renewed. A repeated EXTEND
//     extends again, from a later moment (the lease reckons its deadline
//     from the first send, the earlier). A repeated RELEASE after one that
//     took effect finds no lease: [Lease.Release] then returns [ErrNotHeld]
//     (Client.Release false) though the lock was released all the same.
//     With MaxRetries -1, or once the retries are spent, the call returns
//     the connection's error, and its effect is unknown: an Acquire may
//     have been granted; acquire again with the same [Owner] to get that
//     lease back, or leave it to run out at its ttl.
//   - A waiting Acquire ([Wait], [WaitForever]) runs on a connection of its
//     own, which go-redis does not retry: it returns the connection's
//     error (an EOF). Acquire again to queue again, through the next node;
//     with the same [Owner] that is safe, should the first have been
//     granted just before the node died.
//   - A renewal that fails is tried again every quarter of the renewal
//     interval, each time on a new connection if the old one broke; the
//     lease counts as lost only if none is confirmed before its Deadline.
//
// # Clusters
//
// A node of a cluster (docs/cluster.md) answers TRYAGAIN when no leader is
// ready to take the command (an election, or the node is cut off from the
// majority; a follower of a server that does not forward answers it too):
// nothing ran. It answers UNCERTAIN
// when the leader was lost after the change went into its log: it may or
// may not have been applied, and the next leader may still apply it. Every
// call of this package handles both, the same way:
//
//   - TRYAGAIN: the connection that read it is passed over (not reused, and
//     later connections start at the next address of Config.Addrs), and the
//     command is sent again. go-redis does so first, up to
//     Redis.MaxRetries times (3) after its own short backoff (8 to 512 ms),
//     so with a follower first in Addrs the call goes on at the next node
//     within the same go-redis call. When go-redis gives up, this package
//     pauses (25 ms, doubling up to 250 ms, jittered) and tries again, each
//     try bounded by the read timeout, until an answer settles the call,
//     the context ends, or the next try would start later than
//     Config.RetryTimeout (10 s) after the first. So a call waits out an
//     election of a few seconds, and lasts at most about RetryTimeout plus
//     ReadTimeout. Reads (Verify, Status, Locks, Holders) retry TRYAGAIN
//     only.
//   - UNCERTAIN: a change is sent again when a second one is harmless.
//     ACQUIRE always carries an OWNER ([Owner], or a random one per call):
//     the server answers a repeat with the same lease and token if the
//     first was granted, and grants at most one. A RELEASE (or DELETE) that
//     finds nothing after an UNCERTAIN counts as done: the first may have
//     done it, and either way the lease is gone. A repeated EXTEND extends
//     again from a later moment; the lease's Deadline is reckoned from the
//     send of the one that was answered. CREATE and FORCE-RELEASE of one
//     token are repeated too; FORCE-RELEASE of every lease (token 0) is
//     not, since it would end leases granted in between.
//   - When the retries run out after an UNCERTAIN, with no answer to
//     settle it, the error wraps [ErrUncertain] (an Acquire's names its
//     owner). A TRYAGAIN that outlasts them is returned as go-redis's error
//     (redis.HasErrorPrefix(err, "TRYAGAIN")).
//
// A connection of a Client made by NewFromRedis is passed over only if rdb
// was made with [FailoverOptions]; otherwise the retries go on on rdb's own
// connections. A waiting Acquire is retried for what is left of its wait;
// WaitForever's chain of waits ends with the error. Config.RetryTimeout 0
// leaves both replies to go-redis and the caller.
//
// # Goroutines
//
// Each lease with keep-alive owns one goroutine, which renews it and ends
// when the lease is released or lost; [Lease.Release] waits for it. A timer
// (not a goroutine) marks the estimated deadline. An Acquire whose context is
// cancelled while the server still holds its request in the queue leaves a
// goroutine owned by the Client to collect the reply and release a lease
// granted too late; [Client.Close] ends them.
package leasehold

import "errors"

var (
	// ErrNotAcquired is returned by Acquire and TryAcquire when the lock was
	// not granted: another lease holds it, or the wait ran out.
	ErrNotAcquired = errors.New("leasehold: lock not acquired")
	// ErrLeaseLost is wrapped by the error that ends a lease the client can
	// no longer prove it holds: a renewal refused, or none confirmed in time.
	// Lease.Err, context.Cause(Lease.Context()) and WithLock return it.
	ErrLeaseLost = errors.New("leasehold: lease lost")
	// ErrReleased is Lease.Err and the cause of Lease.Context's cancellation
	// after Release.
	ErrReleased = errors.New("leasehold: lease released")
	// ErrNotHeld is returned by Lease.Release when the server no longer had
	// the lease (it had expired, or was released before).
	ErrNotHeld = errors.New("leasehold: lease not held")
	// ErrUncertain is wrapped by the error of a change whose outcome is
	// unknown: a cluster answered UNCERTAIN (its leader was lost while the
	// change was on its way, and the next leader may still apply it), and
	// the retries ran out (Config.RetryTimeout, or the context) before an
	// answer settled it. An Acquire may then have been granted: acquire
	// again with the same Owner to get that lease back, or let it run out
	// at its ttl. See "Clusters".
	ErrUncertain = errors.New("leasehold: outcome unknown")
	// ErrUnknownLock is returned by Client.Status for a lock the server does
	// not know: never made, or made on the fly by ACQUIRE and free again.
	ErrUnknownLock = errors.New("leasehold: unknown lock")
	// ErrInUse is wrapped by the error of Client.Delete for a lock that a
	// lease holds, that requests wait for, or that is in its lock-delay,
	// and of Client.Create for Limit on a lock made on the fly that a lease
	// holds: the server's INUSE reply.
	ErrInUse = errors.New("leasehold: lock in use")
)
