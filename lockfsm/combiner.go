package lockfsm

import (
	"errors"
	"sync"
	"sync/atomic"
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
// Before it proposes, the combiner lingers for the members of the group it
// answered last: clients that wait for each answer before they send again
// come back a round trip after it, and without the wait they would split
// into two cohorts that take turns, each entry carrying half of them (see
// linger).
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

	// lingerLimit is how long after the last answer linger waits, given
	// that answer's commit time.
	lingerLimit func(took time.Duration) time.Duration
	// answered counts the groups answered. A proposal notes it when it
	// arrives, so the members that came back since the last answer are
	// known.
	answered atomic.Uint64
	proposed atomic.Uint64 // entries proposed
	members  atomic.Uint64 // proposals they carried
	mu       sync.Mutex
	last     lastAnswer // under mu
	// sending is held (read) by ApplyAsync while it queues; Stop sets
	// stopped under it, so that nothing queues after Stop's last look.
	sending sync.RWMutex
	stopped bool
}

// lastAnswer is what linger knows of the last group answered.
type lastAnswer struct {
	gen     uint64        // the value of answered it set
	members int           // how many proposals it answered
	at      time.Time     // when
	took    time.Duration // from its proposal to its answer
}

// ErrCombinerStopped answers a proposal made after Combiner.Stop: it was
// not proposed.
var ErrCombinerStopped = errors.New("lockfsm: the combiner is stopped")

type combined struct {
	gen   uint64 // Combiner.answered when it arrived
	entry []byte
	out   any
	err   error
	done  chan struct{}    // Apply's: closed once answered
	then  func(any, error) // ApplyAsync's: called once answered
}

// finish answers r.
func (r *combined) finish() {
	if r.then != nil {
		r.then(r.out, r.err)
		return
	}
	close(r.done)
}

// maxGroupBytes is the size past which a group takes no more members (the
// last one taken may bring it past, by at most one batch).
const maxGroupBytes = 1 << 20

// NewCombiner starts a combiner over p, with at most inflight proposals in
// flight, each bounded by timeout as Proposer.Apply bounds it, and lingering
// for the last group's members at most maxLinger (0: never).
func NewCombiner(p Proposer, inflight int, timeout, maxLinger time.Duration) *Combiner {
	return newCombiner(p, inflight, timeout, func(took time.Duration) time.Duration { return min(took, maxLinger) })
}

func newCombiner(p Proposer, inflight int, timeout time.Duration, lingerLimit func(time.Duration) time.Duration) *Combiner {
	c := &Combiner{
		p: p, timeout: timeout, lingerLimit: lingerLimit,
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
	r := &combined{entry: entry, done: make(chan struct{}), gen: c.answered.Load()}
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

// ApplyAsync is Apply without the wait: then is called with what Apply
// would return, once, on the goroutine that proposed the entry it went in
// (it must not block), or on this one if the combiner is stopped. A
// proposal that queues as the combiner stops is answered by Stop.
func (c *Combiner) ApplyAsync(entry []byte, then func(any, error)) {
	r := &combined{entry: entry, then: then, gen: c.answered.Load()}
	c.sending.RLock()
	defer c.sending.RUnlock()
	if !c.stopped {
		select {
		case c.reqs <- r:
			return
		case <-c.stop:
		}
	}
	then(nil, ErrCombinerStopped)
}

// CombinerStats counts what a Combiner proposed: Members over Entries is
// how many proposals an entry carried on average.
type CombinerStats struct {
	Entries uint64 // entries proposed (a group, or a proposal alone)
	Members uint64 // the proposals they carried
}

// Stats reads the combiner's counts so far.
func (c *Combiner) Stats() CombinerStats {
	return CombinerStats{Entries: c.proposed.Load(), Members: c.members.Load()}
}

// Stop ends the combiner once the proposals in flight are answered; a
// proposal queued and not yet proposed gets ErrCombinerStopped.
func (c *Combiner) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.sending.Lock()
		c.stopped = true
		c.sending.Unlock()
		c.wg.Wait()
		close(c.finished)
		// What queued after run stopped taking requests: Apply's callers
		// see finished; ApplyAsync's are told here.
		for {
			select {
			case r := <-c.reqs:
				if r.then != nil {
					r.err = ErrCombinerStopped
					r.finish()
				}
			default:
				return
			}
		}
	})
}

func (c *Combiner) run() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
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
			first.finish()
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
		group = c.linger(group, size, timer)
		c.proposed.Add(1)
		c.members.Add(uint64(len(group)))
		c.wg.Add(1)
		go c.propose(group)
	}
}

// linger adds to group the proposals that arrive until every member of the
// last group answered has come back (a proposal that arrived since that
// answer counts as one), or until the last answer is min(its commit time,
// maxLinger) old. Clients that wait for their answer come back together a
// round trip after it; proposed without them, the group would leave them
// to wait for its commit before theirs could begin, and the two cohorts
// would take turns from then on, every entry half as large. With 50 such
// clients on 2 cores, groups grew from 23 to 41–49 members and lock cycles
// from about 4,600 to 6,000 a second (raft-wal; raft-boltdb about 3,100 to
// 4,400; docs/benchmarks-log.md, 2026-11-25). A client alone, or a group whose
// members all came back, waits for nothing; a member that does not come
// back costs the group at most maxLinger, and never more than a commit.
func (c *Combiner) linger(group []*combined, size int, timer *time.Timer) []*combined {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	limit := c.lingerLimit(last.took)
	if limit <= 0 {
		return group
	}
	back := 0
	for _, r := range group {
		if r.gen == last.gen {
			back++
		}
	}
	deadline := last.at.Add(limit)
	for back < last.members && len(group) < maxGroupMembers && size < maxGroupBytes {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		timer.Reset(wait)
		select {
		case r := <-c.reqs:
			timer.Stop()
			group = append(group, r)
			size += len(r.entry)
			if r.gen == last.gen {
				back++
			}
		case <-timer.C:
			return group
		case <-c.stop:
			timer.Stop()
			return group
		}
	}
	return group
}

// answer records a group of members, proposed at start, as answered: it
// must be called before its members are, so that each sees the new count
// when it comes back.
func (c *Combiner) answer(members int, start time.Time) {
	now := time.Now()
	c.mu.Lock()
	c.last = lastAnswer{gen: c.answered.Add(1), members: members, at: now, took: now.Sub(start)}
	c.mu.Unlock()
}

// propose proposes group as one entry (its member alone, if just one) and
// answers each member.
func (c *Combiner) propose(group []*combined) {
	defer c.wg.Done()
	defer func() { <-c.slots }()
	start := time.Now()
	if len(group) == 1 {
		r := group[0]
		r.out, r.err = c.p.Apply(r.entry, c.timeout)
		c.answer(1, start)
		r.finish()
		return
	}
	members := make([][]byte, len(group))
	for i, r := range group {
		members[i] = r.entry
	}
	out, err := c.p.Apply(AppendGroupEntry(nil, members), c.timeout)
	answers, ok := out.([]any)
	c.answer(len(group), start)
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
		r.finish()
	}
}
