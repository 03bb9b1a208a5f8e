package persist

import (
	"time"

	"github.com/leasehold/leasehold/locker"
)

// model is the table as a replay rebuilds it: every entry applied in order.
// Applying an entry sets state rather than adjusting it, so replaying a log
// over a snapshot that already saw part of it (a snapshot is taken while the
// log goes on) ends in the same state as replaying it over the older one.
type model struct {
	locks   map[string]*lockModel
	ceiling uint64   // the highest token reservation
	delay   int64    // the table's default lock-delay, ns, for leases whose lock has none of its own
	mark    timeMark // the latest time mark, if marked
	marked  bool
}

type lockModel struct {
	created   bool
	options   locker.CreateOptions
	lastToken uint64
	leases    []leaseModel
}

type leaseModel struct {
	token    uint64
	deadline int64 // on the directory's time line, Unix ns
	owner    []byte
	shared   bool
	// delayedUntil, when not 0, marks a lease known to have expired, whose
	// lock-delay runs until then (on the directory's time line).
	delayedUntil int64
}

func newModel(delay time.Duration) *model {
	return &model{locks: make(map[string]*lockModel), delay: int64(delay)}
}

// lockDelay is the lock-delay that applies to l, ns.
func (m *model) lockDelay(l *lockModel) int64 {
	if l.created && l.options.LockDelaySet {
		return int64(l.options.LockDelay)
	}
	return m.delay
}

// apply applies one entry. Byte slices in e are copied.
func (m *model) apply(e *entry) {
	switch e.kind {
	case kindReserve, kindHeader:
		m.ceiling = max(m.ceiling, e.token)
		return
	case kindEnd:
		return
	case kindTime:
		// The time line only moves forward, so the latest mark is the one
		// furthest along it, wherever compaction left it.
		if !m.marked || e.mark.stamp >= m.mark.stamp {
			m.mark, m.marked = e.mark, true
		}
		return
	case kindLock:
		l := e.lock
		for n := range l.leases {
			l.leases[n].owner = clone(l.leases[n].owner)
		}
		m.locks[string(e.key)] = &l
		return
	case kindDelete:
		delete(m.locks, string(e.key))
		return
	}
	l := m.locks[string(e.key)]
	if l == nil {
		if e.kind != kindCreate && e.kind != kindGrant {
			return // a change to a lock that a snapshot already saw go
		}
		l = &lockModel{}
		m.locks[string(e.key)] = l
	}
	switch e.kind {
	case kindCreate:
		// Expiry is not logged: the leases that had expired by the time of
		// the create are settled now, by the settings they expired under,
		// before the new settings (a limit, a lock-delay) could change
		// what they mean.
		at, delay := e.deadline, m.lockDelay(l)
		keep := l.leases[:0]
		for _, x := range l.leases {
			switch {
			case x.delayedUntil != 0:
				if x.delayedUntil > at {
					keep = append(keep, x)
				}
			case x.deadline > at:
				keep = append(keep, x)
			case x.deadline+delay > at:
				x.delayedUntil = x.deadline + delay
				keep = append(keep, x)
			}
		}
		l.leases = keep
		l.created, l.options = true, e.options
	case kindGrant:
		l.lastToken = max(l.lastToken, e.token)
		semaphore := l.created && l.options.Limit > 0
		// An exclusive grant means every earlier lease has ended; a read
		// grant, that every exclusive one has. Expiry is not logged, so
		// this is where ended leases leave the model.
		keep := l.leases[:0]
		for _, x := range l.leases {
			if x.token != e.token && (semaphore || e.shared && x.shared) {
				keep = append(keep, x)
			}
		}
		l.leases = append(keep, leaseModel{token: e.token, deadline: e.deadline, owner: clone(e.owner), shared: e.shared})
	case kindExtend:
		for n := range l.leases {
			if l.leases[n].token == e.token {
				l.leases[n].deadline = e.deadline
			}
		}
	case kindRelease:
		for n := range l.leases {
			if l.leases[n].token == e.token {
				l.leases = append(l.leases[:n], l.leases[n+1:]...)
				break
			}
		}
		if !l.created && len(l.leases) == 0 {
			delete(m.locks, string(e.key))
		}
	}
}

// lockState converts a lock of the model to what locker.Table.Restore
// takes, deadlines moved from the directory's time line onto the table's
// clock; now is the time line's now. A lease still live now gets at
// least grace more (--restart-grace); one that ended long enough ago for any
// lock-delay to be over is dropped.
func (l *lockModel) lockState(key string, toClock func(at int64) int64, now int64, grace, delay time.Duration) locker.LockState {
	st := locker.LockState{Key: []byte(key), Created: l.created, Options: l.options, LastToken: l.lastToken}
	if l.created && l.options.LockDelaySet {
		delay = l.options.LockDelay
	}
	for _, x := range l.leases {
		if x.delayedUntil != 0 {
			if x.delayedUntil > now {
				st.Leases = append(st.Leases, locker.LeaseState{Token: x.token, Shared: x.shared, DelayedUntil: toClock(x.delayedUntil)})
			}
			continue
		}
		d := x.deadline
		switch {
		case d > now:
			d = max(d, now+int64(grace))
		case d+int64(delay) <= now:
			continue
		}
		st.Leases = append(st.Leases, locker.LeaseState{Token: x.token, Deadline: toClock(d), Owner: x.owner, Shared: x.shared})
	}
	return st
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
