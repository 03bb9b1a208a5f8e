package locker

import (
	"fmt"
	"sync/atomic"
)

// lockBound keeps the table within Config.MaxLocks. Its count is exact
// across shards: a call that would make locks claims their places first,
// under the shard locks it holds, and a removed lock gives its place back.
// Only the paths that make or remove a lock touch it, so an acquire of an
// existing lock costs nothing more.
type lockBound struct {
	max      int64
	locks    atomic.Int64 // locks in the table, restored ones included
	refusals atomic.Uint64
	err      error // ErrTableFull with the bound, made once
}

func newLockBound(max int) *lockBound {
	return &lockBound{max: int64(max), err: fmt.Errorf("%w (max-locks %d)", ErrTableFull, max)}
}

// claim takes n places, or none and returns the bound's error.
func (b *lockBound) claim(n int64) error {
	for {
		cur := b.locks.Load()
		if cur+n > b.max {
			b.refusals.Add(1)
			return b.err
		}
		if b.locks.CompareAndSwap(cur, cur+n) {
			return nil
		}
	}
}
