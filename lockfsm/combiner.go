package lockfsm

import (
	"errors"
	"sync"
	"time"
)

// Combiner proposes entries through a Proposer, combining those that wait
// at the same time into one group entry (AppendGroupEntry). A leader's
// connections each wait for their own batch's answer; with many of them,
// one entry per batch makes Raft's cost per entry (encoding, a log write,
// replication, an apply call on every replica) the limit. The combiner
// keeps at most inflight proposals in flight, and each time one slot frees,
// proposes everything that queued meanwhile as one entry: the busier the
// leader, the larger the groups, and a batch alone goes as it is, at once.
//
// Every member of a group shares its fate: the group's error (not applied,
// or outcome unknown) is each member's.
type Combiner struct {
	p        Proposer
	timeout  time.Duration
	reqs     chan *combined
	slots    chan struct{}
	stop     chan struct{}
	finished chan struct{} // closed once Stop has waited for run and every proposal
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// ErrCombinerStopped answers a proposal made after Combiner.Stop: it was
// not proposed.
var ErrCombinerStopped = errors.New("lockfsm: the combiner is stopped")

type combined struct {
	entry []byte
	out   any
	err   error
	done  chan struct{}
}

// maxGroupBytes is the size past which a group takes no more members (the
// last one taken may bring it past, by at most one batch).
const maxGroupBytes = 1 << 20

// NewCombiner starts a combiner over p, with at most inflight proposals in
// flight, each bounded by timeout as Proposer.Apply bounds it.
func NewCombiner(p Proposer, inflight int, timeout time.Duration) *Combiner {
	c := &Combiner{
		p: p, timeout: timeout,
		reqs:  make(chan *combined, maxGroupMembers),
		slots: make(chan struct{}, max(inflight, 1)),
		stop:  make(chan struct{}), finished: make(chan struct{}),
	}
	c.wg.Add(1)
	go c.run()
	return c
}

// Apply proposes entry (from AppendTaggedEntry or AppendEntry) and returns
// what the FSM answered for it, as Proposer.Apply would for the entry
// alone, or the error of the entry it went in.
func (c *Combiner) Apply(entry []byte) (any, error) {
	r := &combined{entry: entry, done: make(chan struct{})}
	select {
	case c.reqs <- r:
	case <-c.stop:
		return nil, ErrCombinerStopped
	}
	select {
	case <-r.done:
	case <-c.finished:
		// Queued after run stopped taking requests: nothing will answer it.
		select {
		case <-r.done:
		default:
			return nil, ErrCombinerStopped
		}
	}
	return r.out, r.err
}

// Stop ends the combiner once the proposals in flight are answered; a
// proposal queued and not yet proposed gets ErrCombinerStopped.
func (c *Combiner) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.wg.Wait()
		close(c.finished)
	})
}

func (c *Combiner) run() {
	defer c.wg.Done()
	for {
		var first *combined
		select {
		case first = <-c.reqs:
		case <-c.stop:
			return
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.stop:
			first.err = ErrCombinerStopped
			close(first.done)
			return
		}
		// Whatever queued while a slot was busy goes with first.
		group, size := []*combined{first}, len(first.entry)
	gather:
		for len(group) < maxGroupMembers && size < maxGroupBytes {
			select {
			case r := <-c.reqs:
				group = append(group, r)
				size += len(r.entry)
			default:
				break gather
			}
		}
		c.wg.Add(1)
		go c.propose(group)
	}
}

// propose proposes group as one entry (its member alone, if just one) and
// answers each member.
func (c *Combiner) propose(group []*combined) {
	defer c.wg.Done()
	defer func() { <-c.slots }()
	if len(group) == 1 {
		r := group[0]
		r.out, r.err = c.p.Apply(r.entry, c.timeout)
		close(r.done)
		return
	}
	members := make([][]byte, len(group))
	for i, r := range group {
		members[i] = r.entry
	}
	out, err := c.p.Apply(AppendGroupEntry(nil, members), c.timeout)
	answers, ok := out.([]any)
	for i, r := range group {
		switch {
		case err != nil:
			r.err = err
		case ok && len(answers) == len(group):
			r.out = answers[i]
		default:
			// The FSM refused the group as a whole, with an error value,
			// which answers each member as it would have answered it.
			r.out = out
		}
		close(r.done)
	}
}
