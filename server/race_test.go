package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fencedResource stands for the storage a lock protects: it accepts a write
// only with a token above every token it has accepted, as a fencing token's
// consumer must.
type fencedResource struct {
	mu       sync.Mutex // guards highest, accepted, rejected
	highest  uint64
	accepted int
	rejected int
}

func (r *fencedResource) write(token uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token <= r.highest {
		r.rejected++
		return false
	}
	r.highest = token
	r.accepted++
	return true
}

// grant is one lease a worker was granted, and what it did with it.
type grant struct {
	worker, key int
	token       uint64
	ttl         time.Duration
	t0          time.Time // read before ACQUIRE was sent
	entry       time.Time // the grant's reply arrived
	exit        time.Time // zero when the grant came too late to use
	released    bool      // ended by RELEASE rather than left to expire
	written     bool      // the fenced resource accepted the section's write
}

// deadline is the earliest the server's lease can end: the server stamps
// the grant after t0, so its deadline is at or after t0+ttl.
func (g *grant) deadline() time.Time { return g.t0.Add(g.ttl) }

// inTime reports whether the grant reply arrived while the lease was surely live.
func (g *grant) inTime() bool { return !g.entry.After(g.deadline()) }

// section reports whether the grant had a critical section that ended while
// the lease was surely live. One that overran (the worker was descheduled
// past its bound) proves nothing about the server and is left out.
func (g *grant) section() bool { return !g.exit.IsZero() && !g.exit.After(g.deadline()) }

// TestLeaseExclusionRace has 16 clients contend for 3 locks with short
// leases on the real clock, each either releasing its lease or letting it
// expire, and checks from the clients' own timestamps that no two critical
// sections on a lock overlapped and that tokens grew in grant order. A
// client that reads t0 before sending ACQUIRE and stays in its critical
// section only until t0+ttl cannot overlap the next holder: the server grants
// the next lease only after a RELEASE (sent after the section ended) or after
// the lease's deadline, which is at or after t0+ttl.
func TestLeaseExclusionRace(t *testing.T) {
	const (
		workers  = 16
		keys     = 3
		margin   = 10 * time.Millisecond
		minTTL   = 50
		maxTTL   = 100
		runFor   = 2 * time.Second
		maxIters = 1000 // per worker
	)
	ts := startServer(t)
	c := ctx(t)
	keyName := func(k int) string { return fmt.Sprintf("race:%d", k) }
	resources := make([]fencedResource, keys)

	clients := make([]*redis.Client, workers)
	for i := range clients {
		clients[i] = ts.client()
		if err := clients[i].Ping(c).Err(); err != nil { // connect before the clock starts
			t.Fatal(err)
		}
	}

	grants := make([][]grant, workers)
	var zombieWrites, zombieRejected [workers]int
	stop := time.Now().Add(runFor)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := clients[w]
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var stale *grant // a lease this worker let expire, for a zombie write
			for iter := 0; iter < maxIters && time.Now().Before(stop); iter++ {
				k := rng.IntN(keys)
				ttl := time.Duration(minTTL+rng.IntN(maxTTL-minTTL+1)) * time.Millisecond
				t0 := time.Now()
				v, err := rdb.Do(c, "ACQUIRE", keyName(k), ttl.Milliseconds()).Result()
				entry := time.Now()
				if errors.Is(err, redis.Nil) {
					// Held by another: back off a little before trying again.
					time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Microsecond)
					continue
				}
				if err != nil {
					t.Errorf("worker %d: ACQUIRE: %v", w, err)
					return
				}
				tok, ok := v.(int64)
				if !ok || tok <= 0 {
					t.Errorf("worker %d: ACQUIRE = %#v", w, v)
					return
				}
				g := grant{worker: w, key: k, token: uint64(tok), ttl: ttl, t0: t0, entry: entry}
				bound := t0.Add(ttl - margin)

				if entry.Before(bound) {
					// Critical section: from entry until at most bound.
					g.written = resources[k].write(g.token)
					if rng.IntN(3) == 0 {
						// Let the lease expire: work until the bound.
						time.Sleep(time.Until(bound))
						g.exit = time.Now()
					} else {
						work := time.Duration(rng.Int64N(int64(bound.Sub(entry))/2 + 1))
						time.Sleep(work)
						n, err := rdb.Do(c, "VERIFY", keyName(k), g.token).Int()
						if err != nil {
							t.Errorf("worker %d: VERIFY: %v", w, err)
							return
						}
						// A reply that arrived before t0+ttl was computed
						// while the lease was surely live.
						if at := time.Now(); n != 1 && at.Before(g.deadline()) {
							t.Errorf("worker %d: VERIFY %s %d = %d at t0+%v, lease of %v", w, keyName(k), g.token, n, at.Sub(t0), ttl)
						}
						g.exit = time.Now()
						g.released = true
					}
				} else {
					g.released = true // too late to use: give it back at once
				}
				if g.released {
					n, err := rdb.Do(c, "RELEASE", keyName(k), g.token).Int()
					if err != nil {
						t.Errorf("worker %d: RELEASE: %v", w, err)
						return
					}
					if at := time.Now(); n != 1 && at.Before(g.deadline()) {
						t.Errorf("worker %d: RELEASE %s %d = %d at t0+%v, lease of %v", w, keyName(k), g.token, n, at.Sub(t0), ttl)
					}
				}
				grants[w] = append(grants[w], g)

				// Now and then, a worker whose lease expired comes back and
				// writes with its old token, as a paused process would.
				if stale != nil && rng.IntN(2) == 0 {
					zombieWrites[w]++
					if !resources[stale.key].write(stale.token) {
						zombieRejected[w]++
					}
					stale = nil
				}
				if !g.released && g.exit.Before(g.deadline()) {
					gg := g
					stale = &gg
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var all []grant
	for _, gs := range grants {
		all = append(all, gs...)
	}
	var sections, overran, expiredKind, zw, zr int
	for w := range workers {
		zw += zombieWrites[w]
		zr += zombieRejected[w]
	}
	for k := range keys {
		var inTime, secs []grant
		for _, g := range all {
			if g.key != k {
				continue
			}
			if g.inTime() {
				inTime = append(inTime, g)
			}
			switch {
			case g.section():
				secs = append(secs, g)
				if !g.released {
					expiredKind++
				}
			case !g.exit.IsZero():
				overran++
			}
		}
		byEntry := func(a, b grant) int { return a.entry.Compare(b.entry) }
		slices.SortFunc(inTime, byEntry)
		slices.SortFunc(secs, byEntry)

		// Tokens strictly increase in grant order.
		for i := 1; i < len(inTime); i++ {
			if prev, cur := inTime[i-1], inTime[i]; cur.token <= prev.token {
				t.Errorf("%s: token %d (worker %d) granted %v after token %d (worker %d)",
					keyName(k), cur.token, cur.worker, cur.entry.Sub(prev.entry), prev.token, prev.worker)
			}
		}
		// Critical sections never overlap, and each one's fenced write went through.
		for i, cur := range secs {
			if !cur.written {
				t.Errorf("%s: the fenced resource rejected token %d of a live critical section (worker %d)", keyName(k), cur.token, cur.worker)
			}
			if i == 0 {
				continue
			}
			if prev := secs[i-1]; cur.entry.Before(prev.exit) {
				t.Errorf("%s: critical sections overlap by %v: worker %d token %d [t0+%v, t0+%v] (released %v, ttl %v) and worker %d token %d entered at t0+%v",
					keyName(k), prev.exit.Sub(cur.entry), prev.worker, prev.token, prev.entry.Sub(prev.t0), prev.exit.Sub(prev.t0),
					prev.released, prev.ttl, cur.worker, cur.token, cur.entry.Sub(prev.t0))
			}
		}
		sections += len(secs)
		if len(secs) < 5 {
			t.Errorf("%s: only %d critical sections: the test exercised too little", keyName(k), len(secs))
		}
		res := &resources[k]
		res.mu.Lock()
		t.Logf("%s: %d grants in time, %d critical sections, resource accepted %d writes, rejected %d",
			keyName(k), len(inTime), len(secs), res.accepted, res.rejected)
		res.mu.Unlock()
	}
	t.Logf("%d grants, %d critical sections (%d left to expire), %d overran their bound and were not checked, zombie writes %d (%d rejected)",
		len(all), sections, expiredKind, overran, zw, zr)
	if expiredKind == 0 {
		t.Error("no critical section ended by letting its lease expire")
	}

	// Once every lease has run out, the table holds nothing. The server
	// stamped each grant before its reply arrived, so each lease ended by
	// entry+ttl: wait for that instant (at most maxTTL).
	var latest time.Time
	for _, g := range all {
		if end := g.entry.Add(g.ttl); end.After(latest) {
			latest = end
		}
	}
	time.Sleep(time.Until(latest) + time.Millisecond)
	cn := stickyConn(t, ts.client())
	for k := range keys {
		if st := status(t, cn, keyName(k)); st != nil {
			t.Errorf("STATUS %s after every lease ran out = %v, want nil", keyName(k), st)
		}
	}
	if held := infoField(t, cn, "locks", "leases_held"); held != "0" {
		t.Errorf("leases_held = %s after every lease ran out", held)
	}
}
