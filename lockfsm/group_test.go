package lockfsm

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestGroupEntryAppliesLikeItsMembers applies the same tagged batches to
// two replicas, one entry each on the first and as one group entry on the
// second: the same answers, the same table, the same sessions (a member
// repeated in the group is answered from its session, as a retry in a later
// entry would be).
func TestGroupEntryAppliesLikeItsMembers(t *testing.T) {
	acquire := func(key string) Command { return Command{Op: OpAcquire, Key: []byte(key), TTL: time.Second} }
	c1, c2 := Tag{Client: []byte("n1/c1"), Seq: 1}, Tag{Client: []byte("n2/c9"), Seq: 7}
	members := [][]byte{
		AppendTaggedEntry(nil, c1, []Command{acquire("a"), acquire("b")}),
		AppendTaggedEntry(nil, c2, []Command{acquire("a")}),
		AppendEntry(nil, []Command{acquire("c")}),
		AppendTaggedEntry(nil, c1, []Command{acquire("a"), acquire("b")}), // c1's retry
		{entryVersion, 9}, // damaged: fails alone
	}
	alone, grouped := newReplica(t, 4), newReplica(t, 4)
	// Alone at the group's index, since sessions note the index of their
	// last use.
	var want []any
	for _, m := range members {
		want = append(want, alone.fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: m}))
	}
	out := grouped.fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: AppendGroupEntry(nil, members)})
	got, ok := out.([]any)
	if !ok || len(got) != len(members) {
		t.Fatalf("a group entry answered %T %v, want %d answers", out, out, len(members))
	}
	for i := range members[:4] {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("member %d answered %+v, alone %+v", i, got[i], want[i])
		}
	}
	if err, ok := got[4].(error); !ok || !errors.Is(err, ErrBadEntry) {
		t.Errorf("the damaged member answered %v, want ErrBadEntry", got[4])
	}
	if res := got[1].([]Result); res[0].Granted {
		t.Error("c2 was granted a lock c1 held")
	}
	if a, b := dump(t, alone), dump(t, grouped); !reflect.DeepEqual(a, b) {
		t.Error("the tables differ")
	}
	if a, b := alone.fsm.sessions.len(), grouped.fsm.sessions.len(); a != b || a != 2 {
		t.Errorf("sessions: %d alone, %d grouped, want 2", a, b)
	}
}

func TestDecodeGroupEntryRefusesDamage(t *testing.T) {
	good := AppendGroupEntry(nil, [][]byte{AppendEntry(nil, sampleCommands()), AppendEntry(nil, nil)})
	if _, err := decodeGroupEntry(good); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		good[:len(good)-1],                   // a member cut short
		append(append([]byte{}, good...), 0), // a byte after the last member
		{entryVersionGroup},                  // no count
		{entryVersionGroup, 5, 0},            // more members than bytes
		AppendGroupEntry(nil, make([][]byte, maxGroupMembers+1)),
	} {
		if _, err := decodeGroupEntry(b); !errors.Is(err, ErrBadEntry) {
			t.Errorf("decodeGroupEntry(%x): %v, want ErrBadEntry", b, err)
		}
	}
}

func FuzzDecodeGroupEntry(f *testing.F) {
	f.Add(AppendGroupEntry(nil, [][]byte{AppendEntry(nil, sampleCommands())}))
	f.Add([]byte{entryVersionGroup, 2, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isGroupEntry(b) {
			return
		}
		members, err := decodeGroupEntry(b)
		if err != nil {
			return
		}
		again, err := decodeGroupEntry(AppendGroupEntry(nil, members))
		if err != nil || !reflect.DeepEqual(again, members) {
			t.Fatalf("re-encoding %d members: %d, %v", len(members), len(again), err)
		}
	})
}

// gateProposer is a Proposer whose Apply records each entry and blocks
// until the test lets it go, answering each member of a group with its
// index in the group (and a lone entry with -1).
type gateProposer struct {
	mu      sync.Mutex
	entries [][]byte
	started chan struct{}
	release chan struct{}
	err     error
}

func newGateProposer() *gateProposer {
	return &gateProposer{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (p *gateProposer) Apply(cmd []byte, _ time.Duration) (any, error) {
	p.mu.Lock()
	p.entries = append(p.entries, cmd)
	p.mu.Unlock()
	p.started <- struct{}{}
	<-p.release
	if p.err != nil {
		return nil, p.err
	}
	if !isGroupEntry(cmd) {
		return -1, nil
	}
	members, err := decodeGroupEntry(cmd)
	if err != nil {
		return err, nil
	}
	out := make([]any, len(members))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

func (*gateProposer) IsLeader() bool                { return true }
func (*gateProposer) Term() uint64                  { return 1 }
func (*gateProposer) Barrier(_ time.Duration) error { return nil }

// TestCombinerGroupsWhatWaits: a proposal alone goes alone, at once; the
// ones that arrive while it is in flight go together, as one group entry,
// when it is answered; each gets its own member's answer.
func TestCombinerGroupsWhatWaits(t *testing.T) {
	p := newGateProposer()
	c := NewCombiner(p, 1, time.Second, 0)
	defer stopCombiner(c, p)
	type answer struct {
		out any
		err error
	}
	first := make(chan answer, 1)
	go func() {
		out, err := c.Apply(AppendEntry(nil, []Command{{Op: OpAcquire, Key: []byte("first")}}))
		first <- answer{out, err}
	}()
	<-p.started // the first is in flight, alone

	const waiting = 5
	answers := make(chan answer, waiting)
	for range waiting {
		go func() {
			out, err := c.Apply(AppendEntry(nil, []Command{{Op: OpAcquire, Key: []byte("later")}}))
			answers <- answer{out, err}
		}()
	}
	// The five queue behind the one slot (the combiner holds the first of
	// them while it waits for the slot); wait until they all have.
	testutil.Eventually(t, 5*time.Second, "the later proposals queued", func() bool { return len(c.reqs) >= waiting-1 })
	p.release <- struct{}{}
	if a := <-first; a.err != nil || a.out != -1 {
		t.Fatalf("the first proposal: %v %v, want its own entry's answer", a.out, a.err)
	}
	<-p.started
	p.release <- struct{}{}
	seen := map[any]bool{}
	for range waiting {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		seen[a.out] = true
	}
	if len(seen) != waiting {
		t.Fatalf("the group's members got answers %v, want one each of 0..%d", seen, waiting-1)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.entries) != 2 || isGroupEntry(p.entries[0]) || !isGroupEntry(p.entries[1]) {
		t.Fatalf("%d entries proposed, want the first alone and one group", len(p.entries))
	}
}

// TestCombinerSharesTheGroupsError: a group that fails fails each member
// with its error; after Stop, a proposal is refused.
func TestCombinerSharesTheGroupsError(t *testing.T) {
	p := newGateProposer()
	p.err = errors.New("outcome unknown")
	close(p.release)
	c := NewCombiner(p, 1, time.Second, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Apply(AppendEntry(nil, nil)); err != p.err {
				t.Errorf("Apply: %v, want the group's error", err)
			}
		}()
	}
	wg.Wait()
	c.Stop()
	if _, err := c.Apply(AppendEntry(nil, nil)); err != ErrCombinerStopped {
		t.Fatalf("Apply after Stop: %v, want ErrCombinerStopped", err)
	}
}

// stopCombiner stops c, letting through whatever a failed test left in
// flight at p.
func stopCombiner(c *Combiner, p *gateProposer) {
	stopped := make(chan struct{})
	go func() {
		for {
			select {
			case p.release <- struct{}{}:
			case <-stopped:
				return
			}
		}
	}()
	c.Stop()
	close(stopped)
}

// recv is the next value from ch, or a fatal error after 10 s: a combiner
// that holds a proposal back fails the test rather than hanging it.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("still waiting for %s after 10 s", what)
		panic("unreachable")
	}
}

// groupSizes is the members of each entry p was given (1 for a lone one).
func (p *gateProposer) groupSizes(t *testing.T) []int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var sizes []int
	for _, e := range p.entries {
		if !isGroupEntry(e) {
			sizes = append(sizes, 1)
			continue
		}
		members, err := decodeGroupEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(members))
	}
	return sizes
}

// TestCombinerLingersForTheLastGroup: clients that each send again as soon
// as they are answered go in one entry, not in two cohorts taking turns.
// One client is in flight alone while two more queue; once it is
// answered, the combiner waits for it to come back before it proposes the
// two, and then for all three to come back.
func TestCombinerLingersForTheLastGroup(t *testing.T) {
	p := newGateProposer()
	c := newCombiner(p, 1, time.Second, func(time.Duration) time.Duration { return time.Hour })
	defer stopCombiner(c, p)
	client := func(rounds int, done chan<- error) {
		for range rounds {
			if _, err := c.Apply(AppendEntry(nil, []Command{{Op: OpAcquire, Key: []byte("k")}})); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}
	done := make(chan error, 3)
	go client(3, done)
	recv(t, p.started, "the first client's first proposal") // alone
	go client(2, done)
	go client(2, done)
	testutil.Eventually(t, 5*time.Second, "two proposals queued", func() bool { return len(c.reqs) >= 1 })
	for range 2 { // its answer, then the group of three's
		p.release <- struct{}{}
		recv(t, p.started, "the next group")
	}
	p.release <- struct{}{}
	for range 3 {
		if err := recv(t, done, "the clients' last answers"); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.groupSizes(t); !slices.Equal(got, []int{1, 3, 3}) {
		t.Fatalf("entries of %v members, want [1 3 3]", got)
	}
	if st := c.Stats(); st != (CombinerStats{Entries: 3, Members: 7}) {
		t.Fatalf("Stats %+v, want 3 entries carrying 7 proposals", st)
	}
}

// TestCombinerLingerIsBounded: a client alone is never held back, and a
// member of the last group that does not come back holds the next group
// back no longer than the limit.
func TestCombinerLingerIsBounded(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		p := newGateProposer()
		close(p.release)
		c := newCombiner(p, 1, time.Second, func(time.Duration) time.Duration { return time.Hour })
		defer c.Stop()
		for range 3 {
			applied := make(chan error, 1)
			go func() {
				_, err := c.Apply(AppendEntry(nil, nil))
				applied <- err
			}()
			if err := recv(t, applied, "a lone client's answer"); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("one does not come back", func(t *testing.T) {
		p := newGateProposer()
		c := newCombiner(p, 1, time.Second, func(time.Duration) time.Duration { return 20 * time.Millisecond })
		defer stopCombiner(c, p)
		apply := func(done chan<- error) {
			_, err := c.Apply(AppendEntry(nil, nil))
			done <- err
		}
		done := make(chan error, 4)
		go apply(done)
		recv(t, p.started, "the first proposal")
		go apply(done)
		go apply(done)
		testutil.Eventually(t, 5*time.Second, "two proposals queued", func() bool { return len(c.reqs) >= 1 })
		p.release <- struct{}{}                                  // the first, alone: it does not come back
		recv(t, p.started, "the two, once the limit has passed") // proposed without it
		p.release <- struct{}{}
		go apply(done) // one of the two comes back; the other does not
		recv(t, p.started, "the one that came back, once the limit has passed")
		p.release <- struct{}{}
		for range 4 {
			if err := recv(t, done, "an answer"); err != nil {
				t.Fatal(err)
			}
		}
		if got := p.groupSizes(t); !slices.Equal(got, []int{1, 2, 1}) {
			t.Fatalf("entries of %v members, want [1 2 1]", got)
		}
	})
}

// TestCombinerApplyAsync: asynchronous proposals are answered once each,
// as Apply's would be, alone or as a group; one made once the combiner is
// stopped is answered ErrCombinerStopped, never left without an answer.
func TestCombinerApplyAsync(t *testing.T) {
	p := newGateProposer()
	c := NewCombiner(p, 1, time.Second, 0)
	type answer struct {
		out any
		err error
	}
	async := make(chan answer, 4)
	then := func(out any, err error) { async <- answer{out, err} }
	c.ApplyAsync(AppendEntry(nil, nil), then)
	<-p.started // alone, in flight
	c.ApplyAsync(AppendEntry(nil, nil), then)
	c.ApplyAsync(AppendEntry(nil, nil), then)
	testutil.Eventually(t, 5*time.Second, "the later proposals queued", func() bool { return len(c.reqs) >= 1 })
	p.release <- struct{}{}
	if a := <-async; a.err != nil || a.out != -1 {
		t.Fatalf("the first: %v %v, want its own entry's answer", a.out, a.err)
	}
	<-p.started // the other two, one group
	p.release <- struct{}{}
	seen := map[any]bool{}
	for range 2 {
		a := <-async
		if a.err != nil {
			t.Fatal(a.err)
		}
		seen[a.out] = true
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("the group's members got %v, want 0 and 1", seen)
	}
	stopCombiner(c, p)
	c.ApplyAsync(AppendEntry(nil, nil), then)
	select {
	case a := <-async:
		if a.err != ErrCombinerStopped {
			t.Fatalf("ApplyAsync after Stop: %v, want ErrCombinerStopped", a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ApplyAsync after Stop was never answered")
	}
	if len(async) != 0 {
		t.Fatalf("%d answers more than proposals", len(async))
	}
}
