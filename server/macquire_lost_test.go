package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// jumpyClock stands still until armed, then moves by step at every reading:
// a process suspended between the steps of one request.
type jumpyClock struct{ now, step atomic.Int64 }

func (c *jumpyClock) Now() time.Duration { return time.Duration(c.now.Add(c.step.Load())) }

// Regression: a waiting MACQUIRE that takes every key in its first call but
// finds one taken on the way expired by then ends ungranted (all or none).
// The server tied the keys to the connection as if granted, indexing a nil
// token list, and the panic closed the connection with no reply.
func TestMAcquireThatLostAKeyOnTheWayRepliesNil(t *testing.T) {
	clock := &jumpyClock{}
	ts := startServer(t, func(c *Config) {
		c.Locker.Clock = clock
		c.Locker.Tick = time.Hour // no reaper reading the clock meanwhile
	})
	// b is held until 2.5s; every reading from now on moves the clock 1s: the
	// atomic attempt (1s) finds b held, a is taken at 2s for 1.5s (ttl
	// plus wait), b at 3s once expired, and a's renewal at 4s is too late.
	if _, granted, err := ts.Table().Acquire(&locker.Request{Key: []byte("b"), TTL: 2500 * time.Millisecond}); !granted || err != nil {
		t.Fatalf("ACQUIRE b: %v, %v", granted, err)
	}
	w := ts.dial()
	clock.step.Store(int64(time.Second))
	w.send("MACQUIRE 1000 2 a b EPHEMERAL WAIT 500\r\n")
	if l := w.line(); l != "*-1" {
		t.Fatalf("MACQUIRE that lost a key on the way replied %q, want a nil array *-1", l)
	}
	clock.step.Store(0)
	for _, k := range []string{"a", "b"} {
		if st, _ := ts.Table().Status([]byte(k)); st.Held {
			t.Errorf("%s held after an ungranted MACQUIRE: %+v", k, st)
		}
	}
	w.send("PING\r\n")
	w.expect("PONG")
}
