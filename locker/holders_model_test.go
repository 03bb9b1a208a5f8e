package locker

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// semModel is what a semaphore should hold: its live leases by token, and
// the ends of the lock-delays of those that expired.
type semModel struct {
	limit  int
	delay  int64
	live   map[uint64]*semLease
	delays []int64
}

type semLease struct {
	owner    string
	deadline int64
}

// settle expires what is due at now, as the table does before any command.
func (m *semModel) settle(now int64) {
	for tok, l := range m.live {
		if l.deadline <= now {
			delete(m.live, tok)
			if m.delay > 0 {
				m.delays = append(m.delays, l.deadline+m.delay)
			}
		}
	}
	m.delays = slices.DeleteFunc(m.delays, func(d int64) bool { return d <= now })
}

func (m *semModel) ownersLease(owner string) (uint64, bool) {
	for tok, l := range m.live {
		if owner != "" && l.owner == owner {
			return tok, true
		}
	}
	return 0, false
}

// TestLargeSemaphoreAgainstModel runs random grants (most with owners, so
// that OWNER retries happen), releases, extensions and clock moves against
// semaphores big enough for the holder set's owner index and its binary
// search, with and without a lock-delay, and compares every answer and the
// holder list, as Status lists it and as Holders pages it, with a model.
func TestLargeSemaphoreAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		limit int
		delay time.Duration
	}{{200, 0}, {200, 30 * time.Millisecond}, {40, 0}, {40, 7 * time.Millisecond}} {
		t.Run(fmt.Sprintf("limit %d delay %s", tc.limit, tc.delay), func(t *testing.T) {
			for seed := range uint64(4) {
				runSemaphoreModel(t, seed, tc.limit, tc.delay)
			}
		})
	}
}

func runSemaphoreModel(t *testing.T, seed uint64, limit int, delay time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 77))
	tb, clock := newTestTable(t)
	key := []byte("sem")
	if _, err := tb.Create(key, CreateOptions{Limit: limit, LockDelay: delay, LockDelaySet: true}); err != nil {
		t.Fatal(err)
	}
	m := &semModel{limit: limit, delay: int64(delay), live: map[uint64]*semLease{}}
	var tokens []uint64 // every token granted, for releases and extensions of any age
	var top uint64
	now := func() int64 { return int64(clock.Now()) }
	for step := range 4000 {
		where := func(what string) string { return fmt.Sprintf("seed %d step %d: %s", seed, step, what) }
		switch op := rng.IntN(10); {
		case op < 5:
			owner := ""
			if rng.IntN(5) != 0 {
				owner = fmt.Sprintf("o%d", rng.IntN(limit*3/2))
			}
			ttl := time.Duration(1+rng.IntN(40)) * time.Millisecond
			tok, ok, err := tb.Acquire(&Request{Key: key, TTL: ttl, Owner: []byte(owner)})
			if err != nil {
				t.Fatal(where(err.Error()))
			}
			m.settle(now())
			if old, retry := m.ownersLease(owner); retry {
				if !ok || tok != old {
					t.Fatalf(where("owner %s's retry got %d, %v; want its lease %d back"), owner, tok, ok, old)
				}
				m.live[tok].deadline = now() + int64(ttl)
				break
			}
			if want := len(m.live)+len(m.delays) < limit; ok != want {
				t.Fatalf(where("acquire by %q granted %v; the model has %d live and %d delayed of %d"), owner, ok, len(m.live), len(m.delays), limit)
			}
			if ok {
				if tok <= top {
					t.Fatalf(where("new lease's token %d after %d"), tok, top)
				}
				top = tok
				tokens = append(tokens, tok)
				m.live[tok] = &semLease{owner: owner, deadline: now() + int64(ttl)}
			}
		case op < 7 && len(tokens) > 0:
			tok := tokens[rng.IntN(len(tokens))]
			got := tb.Release(key, tok)
			m.settle(now())
			_, want := m.live[tok]
			if got != want {
				t.Fatalf(where("release of %d: %v, want %v"), tok, got, want)
			}
			delete(m.live, tok)
		case op < 8 && len(tokens) > 0:
			tok := tokens[rng.IntN(len(tokens))]
			ttl := time.Duration(1+rng.IntN(40)) * time.Millisecond
			got, err := tb.Extend(key, tok, ttl)
			if err != nil {
				t.Fatal(where(err.Error()))
			}
			m.settle(now())
			l, want := m.live[tok]
			if got != want {
				t.Fatalf(where("extend of %d: %v, want %v"), tok, got, want)
			}
			if want {
				l.deadline = now() + int64(ttl)
			}
		default:
			clock.Advance(time.Duration(rng.IntN(12)) * time.Millisecond)
			if rng.IntN(2) == 0 {
				tb.ExpireDue() // else the next command settles the lock itself
			}
			continue
		}
		st, _ := tb.Status(key)
		var want []Holder
		for tok, l := range m.live {
			want = append(want, Holder{Token: tok, Owner: l.owner, TTL: time.Duration(l.deadline - now())})
		}
		slices.SortFunc(want, func(a, b Holder) int { return cmp.Compare(a.Token, b.Token) })
		if listed := want[:min(len(want), StatusHolders)]; !slices.Equal(st.Holders, listed) || st.HoldersTotal != len(want) {
			t.Fatalf(where("status lists %d of %d holders\n got %+v\nwant %+v"), len(st.Holders), st.HoldersTotal, st.Holders, listed)
		}
		var paged []Holder
		for cursor, count := uint64(0), 1+rng.IntN(60); ; {
			var page []Holder
			cursor, page = tb.Holders(key, cursor, count, nil)
			paged = append(paged, page...)
			if cursor == 0 {
				break
			}
		}
		if !slices.Equal(paged, want) {
			t.Fatalf(where("holders paged\n got %+v\nwant %+v"), paged, want)
		}
	}
}
