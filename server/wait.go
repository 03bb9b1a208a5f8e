package server

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// blockState is a connection parked in ACQUIRE ... WAIT: it runs no further
// command until the lease is handed to it or the wait ends.
type blockState struct {
	timer     int // index in the loop's wait heap; -1 when not in it
	wait      *locker.Wait
	key       string
	deadline  int64 // Server.monotonic() ns
	ephemeral bool  // the lease, once granted, is released when c closes
}

// acquireWaiting serves ACQUIRE with WAIT: granted at once, or parked until
// the lock's queue hands it the lease or the wait times out.
func acquireWaiting(c *conn, req protocol.AcquireRequest) error {
	if max := c.srv.cfg.Locker.MaxTTL; req.Wait > max {
		return &protocol.Error{Code: protocol.CodeErr, Msg: "WAIT must be at most max-ttl (" + max.String() + ")"}
	}
	w := &locker.Wait{TTL: req.TTL, Owner: req.Owner, Priority: req.Priority}
	key := string(req.Key)
	var grants chan uint64
	if l := c.loop; l != nil {
		w.Notify = func(token uint64) {
			if !l.post(func() { l.granted(c, w, token) }) {
				c.srv.table.Release([]byte(key), token) // the server is closing
			}
		}
	} else {
		grants = make(chan uint64, 1)
		w.Notify = func(token uint64) { grants <- token }
	}
	token, granted, err := c.srv.table.AcquireWait(req.Key, w)
	if err != nil || granted {
		if err == nil {
			c.srv.ties.granted(c, req.Key, token, req.Ephemeral)
			protocol.WriteToken(c.wr, token, true)
		}
		return err
	}
	c.srv.stats.blocked.Add(1)
	b := &blockState{timer: -1, wait: w, key: key, deadline: c.srv.monotonic() + int64(req.Wait), ephemeral: req.Ephemeral}
	c.blocked = b
	if c.loop != nil {
		c.loop.armWaitTimer(c, b) // the loop parks the connection and replies later
		return nil
	}
	c.waitInline(b, grants)
	return nil
}

// unblock ends c's wait with token (granted) or nil, and writes the reply.
func (c *conn) unblock(token uint64, granted bool) {
	if b := c.blocked; b != nil && granted {
		c.srv.ties.granted(c, []byte(b.key), token, b.ephemeral)
	}
	c.blocked = nil
	c.srv.stats.blocked.Add(-1)
	c.lastRead = c.srv.monotonic() // the idle clock restarts when the wait ends
	protocol.WriteToken(c.wr, token, granted)
	c.unflushed = true
}

// waitInline is the goroutine transport's wait: the connection's goroutine
// blocks until the grant, the timeout, the client's hang-up or the server's
// Close. A client that pipelines more commands behind its waiting ACQUIRE is
// not watched for hang-ups once its bytes arrive (the watch must not consume
// them); a lease granted to it after it left is released at once, found by a
// check for the peer's FIN before the reply (Linux) or by the failed reply.
func (c *conn) waitInline(b *blockState, grants chan uint64) {
	if c.unflushed {
		c.unflushed = false
		c.wr.Flush() // earlier pipelined replies should not wait with us
	}
	// The idle timeout does not apply while waiting (nor may its deadline cut
	// the hang-up watch short); the next read arms it again.
	c.nc.SetReadDeadline(time.Time{})
	hangup, stopWatch := watchHangup(c.nc)
	timer := time.NewTimer(time.Duration(b.deadline - c.srv.monotonic()))
	var token uint64
	var granted, gone bool
	select {
	case token = <-grants:
		granted = token != 0 // 0: superseded by the owner's retry
	case <-timer.C:
		if token, granted = c.srv.table.CancelWait(b.wait); !granted {
			c.srv.stats.waitTimeouts.Add(1)
		}
	case <-hangup:
		gone = true
	case <-c.srv.closing:
		gone = true
	}
	timer.Stop()
	stopWatch()
	if granted && !gone && peerClosed(c.nc) {
		// The watch stops at pipelined bytes; a FIN behind them still
		// means nobody will read this grant.
		gone = true
	}
	if gone {
		if !granted {
			token, granted = c.srv.table.CancelWait(b.wait)
		}
		if granted {
			c.srv.table.Release([]byte(b.key), token)
		}
		c.blocked = nil
		c.srv.stats.blocked.Add(-1)
		c.quit = true
		return
	}
	c.unblock(token, granted)
	c.unflushed = false
	if err := c.wr.Flush(); err != nil && granted {
		c.srv.table.Release([]byte(b.key), token) // nobody to hand it to
	}
}

// waitTimer is one parked connection's deadline in its loop's timer heap.
type waitTimer struct {
	deadline int64
	c        *conn
	b        *blockState
}

// waitTimers is a min-heap of deadlines. Each blockState knows its index, so
// a wait that ends early (granted, connection closed) leaves the heap at once
// rather than pinning its connection until the deadline.
type waitTimers []waitTimer

func (h waitTimers) Len() int           { return len(h) }
func (h waitTimers) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h waitTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].b.timer, h[j].b.timer = i, j
}
func (h *waitTimers) Push(x any) {
	t := x.(waitTimer)
	t.b.timer = len(*h)
	*h = append(*h, t)
}
func (h *waitTimers) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = waitTimer{}
	*h = old[:len(old)-1]
	x.b.timer = -1
	return x
}

func (h *waitTimers) add(c *conn, b *blockState) {
	heap.Push(h, waitTimer{deadline: b.deadline, c: c, b: b})
}

// disarm takes b's deadline out of the heap, if it is there.
func (h *waitTimers) disarm(b *blockState) {
	if b.timer >= 0 && b.timer < len(*h) && (*h)[b.timer].b == b {
		heap.Remove(h, b.timer)
	}
}
