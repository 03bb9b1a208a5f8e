package locker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkTableInvariants checks, under each shard's lock, what every
// operation must leave true: each live entry is found by its key and the
// index counts them; a holder set is non-empty, in strictly rising token
// order, with no token past the shard's last, its live count right, no
// owner with two live leases, its owner index agreeing with the live
// holders, within its limit, never beside an exclusive lease; and the
// entry's deadline is no later than its earliest holder's, with a timer set.
func checkTableInvariants(t *testing.T, tb *Table, where string) {
	t.Helper()
	for sn, s := range tb.shards {
		s.mu.Lock()
		live := 0
		for i := uint32(1); i < s.top; i++ {
			e := s.at(i)
			if e.flags&flagLive == 0 {
				continue
			}
			live++
			if got := s.lookup(uint32(hashKey(tb, s.key(e))), s.key(e)); got != i {
				s.mu.Unlock()
				t.Fatalf("%s: shard %d entry %d key %q: lookup gives %d", where, sn, i, s.key(e), got)
			}
			hs := s.holders(i)
			if hs == nil {
				if _, ok := s.holderSets[i]; ok {
					s.mu.Unlock()
					t.Fatalf("%s: stray holder set", where)
				}
				continue
			}
			if len(hs.items) == 0 {
				s.mu.Unlock()
				t.Fatalf("%s: empty holder set kept", where)
			}
			nlive := 0
			owners := map[string]uint64{}
			minD := hs.items[0].deadline
			for n, h := range hs.items {
				if n > 0 && hs.items[n-1].token >= h.token {
					s.mu.Unlock()
					t.Fatalf("%s: %q holders out of token order: %d then %d", where, s.key(e), hs.items[n-1].token, h.token)
				}
				if h.token > s.lastToken {
					s.mu.Unlock()
					t.Fatalf("%s: holder token %d above shard lastToken %d", where, h.token, s.lastToken)
				}
				minD = min(minD, h.deadline)
				if !h.delayed {
					nlive++
					if h.owner != "" {
						if old, dup := owners[h.owner]; dup {
							s.mu.Unlock()
							t.Fatalf("%s: %q owner %q holds %d and %d", where, s.key(e), h.owner, old, h.token)
						}
						owners[h.owner] = h.token
						if hs.byOwner != nil && hs.byOwner[h.owner] != h.token {
							s.mu.Unlock()
							t.Fatalf("%s: byOwner[%q]=%d, live lease %d", where, h.owner, hs.byOwner[h.owner], h.token)
						}
					}
				}
			}
			for o, tok := range hs.byOwner {
				if owners[o] != tok {
					// stale entry: harmless only if tok is not a live lease of another owner
					n := s.liveHolder(i, tok)
					if n >= 0 && hs.items[n].owner != o {
						s.mu.Unlock()
						t.Fatalf("%s: byOwner[%q]=%d misdirects to %q", where, o, tok, hs.items[n].owner)
					}
				}
			}
			if nlive != hs.live {
				s.mu.Unlock()
				t.Fatalf("%s: live %d, counted %d", where, hs.live, nlive)
			}
			if e.deadline > minD {
				s.mu.Unlock()
				t.Fatalf("%s: %q entry deadline %d after earliest holder %d", where, s.key(e), e.deadline, minD)
			}
			if e.timer.slot == 0 {
				s.mu.Unlock()
				t.Fatalf("%s: %q multi entry with no timer", where, s.key(e))
			}
			if e.flags&(flagHeld|flagDelayed) != 0 {
				s.mu.Unlock()
				t.Fatalf("%s: mixed exclusive and holder set", where)
			}
			if lim := s.limit(i); lim > 0 && len(hs.items) > lim {
				s.mu.Unlock()
				t.Fatalf("%s: %d holders over limit %d", where, len(hs.items), lim)
			}
		}
		if live != s.index.count {
			s.mu.Unlock()
			t.Fatalf("%s: shard %d: %d live entries, index count %d", where, sn, live, s.index.count)
		}
		s.mu.Unlock()
	}
}

// hashKey is key's hash within its shard.
func hashKey(tb *Table, k []byte) uint32 { h, _ := tb.place(k); return h }

// TestTableInvariantsRandom runs random operations of every kind (grants,
// shared grants, waits and their cancellation, releases, extensions,
// multi-lock grants, deletes, clock moves with and without the reaper, and
// now and then a dump restored, in reverse lease order, into a fresh table)
// on a few hot keys, semaphores of 40 to 70 permits among them, with and
// without lock-delays, and checks the table's invariants after every step
// and, after each reaper pass, that nothing due is left unreaped. (From a
// review of the holder-set and index changes.)
func TestTableInvariantsRandom(t *testing.T) {
	type grant struct {
		k   string
		tok uint64
	}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 99))
		tb, clock := newTestTable(t, func(c *Config) { c.Shards = 2; c.LockDelay = time.Duration(seed%2) * 5 * time.Millisecond })
		keys := make([]string, 300)
		for j := range keys {
			keys[j] = fmt.Sprintf("k%d", j)
		}
		for j := 0; j < 4; j++ {
			tb.Create([]byte(keys[j]), CreateOptions{Limit: 40 + 10*j, LockDelay: time.Duration(j%2) * 3 * time.Millisecond, LockDelaySet: j >= 2})
		}
		var toks []grant
		var waits []*Wait
		for step := range 6000 {
			k := keys[rng.IntN(len(keys))]
			if rng.IntN(3) != 0 {
				k = keys[rng.IntN(6)]
			}
			owner := ""
			if rng.IntN(4) != 0 {
				owner = fmt.Sprintf("o%d", rng.IntN(70))
			}
			ttl := time.Duration(1+rng.IntN(1000)) * time.Millisecond
			switch op := rng.IntN(14); op {
			case 0, 1, 2:
				tok, ok, _ := tb.Acquire(&Request{Key: []byte(k), TTL: ttl, Owner: []byte(owner)})
				if ok {
					toks = append(toks, grant{k, tok})
				}
			case 3, 4:
				tok, ok, _ := tb.Acquire(&Request{Key: []byte(k), TTL: ttl, Owner: []byte(owner), Mode: Shared})
				if ok {
					toks = append(toks, grant{k, tok})
				}
			case 5:
				req := Request{Key: []byte(k), TTL: ttl, Owner: []byte(owner), Priority: rng.IntN(3), Mode: sharedIf(rng.IntN(2) == 0)}
				w := &Wait{Notify: func(uint64) {}}
				if _, ok, err := tb.AcquireWait(&req, w); err == nil && !ok {
					waits = append(waits, w)
				}
			case 6:
				if len(waits) > 0 {
					j := rng.IntN(len(waits))
					tb.CancelWait(waits[j])
					waits = append(waits[:j], waits[j+1:]...)
				}
			case 7, 8:
				if len(toks) > 0 {
					x := toks[rng.IntN(len(toks))]
					tb.Release([]byte(x.k), x.tok)
				}
			case 9:
				if len(toks) > 0 {
					x := toks[rng.IntN(len(toks))]
					tb.Extend([]byte(x.k), x.tok, ttl)
				}
			case 10:
				ks := [][]byte{[]byte(keys[rng.IntN(6)]), []byte(keys[6+rng.IntN(20)])}
				tb.AcquireAll(&Request{Keys: ks, TTL: ttl, Owner: []byte(owner), Mode: sharedIf(rng.IntN(2) == 0)})
			case 11:
				clock.Advance(time.Duration(rng.IntN(8)) * time.Millisecond)
				if rng.IntN(2) == 0 {
					tb.ExpireDue()
					checkHoldersReaped(t, tb, int64(clock.Now()), fmt.Sprintf("seed %d step %d", seed, step))
				}
			case 12:
				tb.Delete([]byte(k))
			case 13:
				if rng.IntN(300) == 0 {
					// dump and restore into a fresh table sharing the clock
					nt, err := New(tb.cfg)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { nt.Close() })
					tb.Dump(func(st *LockState) {
						// reverse the leases, as a replay may list them in any order
						for a, b := 0, len(st.Leases)-1; a < b; a, b = a+1, b-1 {
							st.Leases[a], st.Leases[b] = st.Leases[b], st.Leases[a]
						}
						if err := nt.Restore(st); err != nil {
							t.Fatal(err)
						}
					})
					tb = nt
					waits = nil
				}
			}
			checkTableInvariants(t, tb, fmt.Sprintf("seed %d step %d", seed, step))
		}
	}
}

// checkHoldersReaped fails if a holder whose deadline the wheel's tick has passed
// is still in its set after the reaper ran at now.
func checkHoldersReaped(t *testing.T, tb *Table, now int64, where string) {
	for _, s := range tb.shards {
		s.mu.Lock()
		for i, hs := range s.holderSets {
			for _, h := range hs.items {
				if ceilDiv(h.deadline, s.tick)*s.tick <= now {
					s.mu.Unlock()
					t.Fatalf("%s: %q holder %d deadline %d not reaped at %d (entry deadline %d)", where, s.key(s.at(i)), h.token, h.deadline, now, s.at(i).deadline)
				}
			}
		}
		s.mu.Unlock()
	}
}

// TestRestoreRaisesTokensToItsLeases: a restored holder's token counts as
// granted even when the state's LastToken is lower, so the next grant comes
// after it, in the token order holder sets are searched by.
func TestRestoreRaisesTokensToItsLeases(t *testing.T) {
	tb, clock := newTestTable(t) // tokens from 1000
	now := int64(clock.Now())
	st := &LockState{Key: []byte("s"), Created: true, Options: CreateOptions{Limit: 4},
		Leases: []LeaseState{{Token: 5000, Deadline: now + int64(time.Hour), Owner: []byte("a")}}}
	if err := tb.Restore(st); err != nil {
		t.Fatal(err)
	}
	tok := mustAcquire(t, tb, "s", time.Hour, "b")
	if tok <= 5000 || !tb.Verify([]byte("s"), tok) || !tb.Verify([]byte("s"), 5000) {
		t.Fatalf("after restoring lease 5000, a grant got %d (verifies: %v), and 5000 verifies: %v", tok, tb.Verify([]byte("s"), tok), tb.Verify([]byte("s"), 5000))
	}
}

// sharedIf is Shared when shared, Exclusive otherwise.
func sharedIf(shared bool) Mode {
	if shared {
		return Shared
	}
	return Exclusive
}
