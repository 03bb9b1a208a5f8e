package lockfsm

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// Proposer is what a leader's duties need of its Raft node (a
// cluster.Node).
type Proposer interface {
	Apply(cmd []byte, timeout time.Duration) (any, error)
	IsLeader() bool
	Term() uint64
	Barrier(timeout time.Duration) error
}

// Duties runs what only a leader does for the lock table, on a goroutine
// of its own: when the node becomes leader, it waits until every earlier
// entry is applied, then begins its term (OpTerm, with its boot-epoch
// token as the floor, and with its restart grace, an OpGrace in the same
// entry); from then on, every tick, it proposes the expiries
// its FSM finds due (OpFire): leases, lock-delays and waits. On a follower it does nothing. Proposals
// that fail are logged and come back through CollectDue after
// locker.DueRetry.
type Duties struct {
	p     Proposer
	fsm   *FSM
	tick  time.Duration
	grace time.Duration // proposed with each OpTerm (OpGrace); 0 for none
	log   zerolog.Logger

	mu   sync.Mutex
	term uint64 // the term begun, 0 while none is

	settingsAt time.Time // when this leader last proposed OpSettings; run's goroutine only

	stop, done chan struct{}
}

// dutyTimeout bounds each of the duties' proposals and barriers.
const dutyTimeout = 5 * time.Second

// settingsEvery is how often a leader proposes its settings again
// (OpSettings), for the nodes that joined from a snapshot since: they
// learn of a mismatch within this.
const settingsEvery = 30 * time.Second

// fireBatch is the most expiries one OpFire carries.
const fireBatch = 1024

// StartDuties starts the leader's duties of the node p over fsm, checking
// every tick (the table's wheel tick is a fitting value). With a grace,
// each term this node begins gives every live lease at least that long
// (OpGrace): the server's --restart-grace.
func StartDuties(p Proposer, fsm *FSM, tick, grace time.Duration, log zerolog.Logger) *Duties {
	d := &Duties{p: p, fsm: fsm, tick: tick, grace: grace, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// Stop ends the duties and waits for their goroutine.
func (d *Duties) Stop() {
	close(d.stop)
	<-d.done
}

// Term is the term these duties have begun, 0 while the node is not a
// leader that has begun its term: until then it must not take commands
// (their tokens could be under the term's floor).
func (d *Duties) Term() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.term
}

func (d *Duties) run() {
	defer close(d.done)
	t := time.NewTicker(d.tick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.once()
	}
}

// once does one tick's duties.
func (d *Duties) once() {
	term := d.p.Term()
	if !d.p.IsLeader() {
		d.setTerm(0)
		return
	}
	if d.Term() != term {
		d.setTerm(0)
		if err := d.p.Barrier(dutyTimeout); err != nil {
			d.log.Warn().Err(err).Uint64("term", term).Msg("new leader: barrier failed")
			return
		}
		floor := locker.BootEpochToken(time.Now())
		begin := []Command{{Op: OpTerm, Term: term, Floor: floor}}
		if d.grace > 0 {
			// In the same entry: no command of the term applies before it.
			begin = append(begin, Command{Op: OpGrace, TTL: d.grace})
		}
		if _, err := d.propose(begin...); err != nil {
			d.log.Warn().Err(err).Uint64("term", term).Msg("new leader: could not begin its term")
			return
		}
		d.settingsAt = time.Time{}
		d.setTerm(term)
		d.log.Info().Uint64("term", term).Uint64("token_floor", floor).Msg("leader: term begun")
	}
	// Tells every replica the settings this leader applies entries with;
	// one that differs refuses its clients (settings.go). Again every
	// settingsEvery, for the nodes that joined from a snapshot since.
	if time.Since(d.settingsAt) >= settingsEvery {
		if _, err := d.propose(Command{Op: OpSettings, Settings: []byte(d.fsm.Settings())}); err != nil {
			d.log.Warn().Err(err).Uint64("term", term).Msg("leader: could not propose its lock-table settings")
		} else {
			d.settingsAt = time.Now()
		}
	}
	if due := d.fsm.CollectDue(fireBatch); len(due) > 0 {
		if _, err := d.propose(Command{Op: OpFire, Term: term, Due: due}); err != nil {
			d.log.Warn().Err(err).Int("due", len(due)).Msg("leader: could not propose expiries; they come back after a retry interval")
		}
	}
}

func (d *Duties) setTerm(term uint64) {
	d.mu.Lock()
	d.term = term
	d.mu.Unlock()
}

func (d *Duties) propose(cmds ...Command) ([]Result, error) {
	out, err := d.p.Apply(AppendEntry(nil, cmds), dutyTimeout)
	if err != nil {
		return nil, err
	}
	if err, ok := out.(error); ok {
		return nil, err
	}
	res, _ := out.([]Result)
	return res, nil
}
