package lockfsm

import (
	"time"

	"github.com/leasehold/leasehold/locker"
)

// applyGrace applies an OpGrace, which a leader proposes with its OpTerm
// when it is given a restart grace: every live lease (exclusive, shared or
// a permit; not one serving its lock-delay) runs at least grace from now,
// so that holders the election or the cluster's restart cut off can renew.
// No lease gets shorter. Every one is renewed, whatever its time left, so
// that the renewal counts (locker.Due.Renewals) stay alike on every
// replica while the deadlines, each replica's own, differ. It returns how
// many leases it renewed.
func applyGrace(t *locker.Table, grace time.Duration) int {
	if grace <= 0 {
		return 0
	}
	type lease struct {
		key      []byte
		token    uint64
		deadline int64
	}
	var leases []lease
	t.Dump(func(st *locker.LockState) {
		for _, l := range st.Leases {
			if l.DelayedUntil == 0 {
				leases = append(leases, lease{st.Key, l.Token, l.Deadline})
			}
		}
	})
	maxTTL := t.Config().MaxTTL
	now := int64(t.Config().Clock.Now())
	n := 0
	for _, l := range leases {
		ttl := min(max(grace, time.Duration(l.deadline-now)), maxTTL)
		if ok, _ := t.Extend(l.key, l.token, ttl); ok {
			n++
		}
	}
	return n
}
