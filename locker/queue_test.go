package locker

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestQueueRestoresExactly: a replicated table rebuilt from Dump,
// TokenState and each lock's Queue hands the lock to the same requests, in
// the same order (priority, arrival, an owner's retry in its first place,
// readers together), with the same tokens, as the table it was taken from.
func TestQueueRestoresExactly(t *testing.T) {
	orig, _ := newReplicatedTable(t)
	tok := mustAcquire(t, orig, "k", time.Second, "")
	var names []string // by Wait, in orig
	byWait := map[*Wait]string{}
	queue := func(tb *Table, name string, req Request) {
		t.Helper()
		w := &Wait{Notify: func(uint64) {}}
		if _, granted, err := tb.AcquireWait(&req, w); granted || err != nil {
			t.Fatalf("%s: granted %v, %v", name, granted, err)
		}
		byWait[w] = name
	}
	queue(orig, "a", Request{Key: []byte("k"), TTL: time.Second, Owner: []byte("alice")})
	queue(orig, "r1", Request{Key: []byte("k"), TTL: time.Second, Mode: Shared, Priority: 2})
	queue(orig, "b", Request{Key: []byte("k"), TTL: 2 * time.Second})
	queue(orig, "r2", Request{Key: []byte("k"), TTL: time.Second, Mode: Shared, Priority: 2})
	queue(orig, "a2", Request{Key: []byte("k"), TTL: 3 * time.Second, Owner: []byte("alice")}) // takes a's place
	for _, q := range orig.Queue([]byte("k")) {
		names = append(names, byWait[q.Wait])
	}
	if want := []string{"r1", "r2", "a2", "b"}; !slices.Equal(names, want) {
		t.Fatalf("queue %v, want %v", names, want)
	}

	restored, _ := newReplicatedTable(t, func(c *Config) { c.Shards = 1 })
	floor, counters := orig.TokenState()
	if err := restored.RestoreTokenState(floor, counters); err != nil {
		t.Fatal(err)
	}
	orig.Dump(func(st *LockState) {
		if err := restored.Restore(st); err != nil {
			t.Fatal(err)
		}
	})
	var granted [2][]string
	q := orig.Queue([]byte("k"))
	fresh := make([]QueuedWait, len(q))
	for n := range q {
		fresh[n] = q[n]
		name := byWait[q[n].Wait]
		fresh[n].Wait = &Wait{Notify: func(tok uint64) { granted[1] = append(granted[1], name) }}
		q[n].Wait.Notify = func(tok uint64) { granted[0] = append(granted[0], name) }
	}
	if err := restored.RestoreQueue([]byte("k"), fresh); err != nil {
		t.Fatal(err)
	}
	if st, _ := restored.Status([]byte("k")); st.Waiters != 4 {
		t.Fatalf("restored %d waiters, want 4", st.Waiters)
	}
	for n, tb := range []*Table{orig, restored} {
		last := tok
		for len(granted[n]) < 4 {
			st, _ := tb.Status([]byte("k"))
			for _, h := range st.Holders {
				tb.Release([]byte("k"), h.Token)
				last = max(last, h.Token)
			}
			if len(st.Holders) == 0 {
				t.Fatalf("table %d: nobody holds the lock and %v are granted", n, granted[n])
			}
		}
		if st, _ := tb.Status([]byte("k")); st.LastToken <= last {
			t.Fatalf("table %d: last token %d", n, st.LastToken)
		}
	}
	if want := []string{"r1", "r2", "a2", "b"}; !slices.Equal(granted[0], want) || !slices.Equal(granted[1], want) {
		t.Fatalf("granted %v and, restored, %v; want %v", granted[0], granted[1], want)
	}
	a, _ := orig.Status([]byte("k"))
	b, _ := restored.Status([]byte("k"))
	if a.LastToken != b.LastToken || a.Token != b.Token || a.Owner != b.Owner {
		t.Fatalf("the tables differ after the hand-offs: %+v and %+v", a, b)
	}
}

func TestRestoreQueueRefuses(t *testing.T) {
	tb, _ := newReplicatedTable(t)
	mustAcquire(t, tb, "k", time.Second, "")
	w := &Wait{Notify: func(uint64) {}}
	if _, granted, _ := tb.AcquireWait(&Request{Key: []byte("k"), TTL: time.Second}, w); granted {
		t.Fatal("granted")
	}
	for name, c := range map[string]struct {
		key string
		q   []QueuedWait
	}{
		"unknown lock": {"nope", []QueuedWait{{Wait: &Wait{}}}},
		"no handle":    {"k", []QueuedWait{{}}},
		"a used Wait":  {"k", []QueuedWait{{Wait: w}}},
	} {
		if err := tb.RestoreQueue([]byte(c.key), c.q); !errors.Is(err, ErrQueueState) {
			t.Errorf("%s: %v, want ErrQueueState", name, err)
		}
	}
	if tb.Queue([]byte("nope")) != nil || len(tb.Queue([]byte("k"))) != 1 {
		t.Fatal("Queue reports a queue that is not there, or not the one that is")
	}
}
