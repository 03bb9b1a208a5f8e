package server

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// The memory watch is a goroutine the Server owns (started by Serve, ended
// by Close), with or without a limit: every memorySampleEvery it reads the
// Go heap in use, publishes whether it is over --maxmemory (as in force:
// SetMaxMemory may change it), and hands memory that the lock table gave
// back to the OS. (INFO takes a reading of its own.) Commands only load an
// atomic; nothing on a command's path reads the runtime's statistics, and
// nothing here holds a shard lock.
const (
	memorySampleEvery = 100 * time.Millisecond
	// forcedGCEvery bounds the collections the watch forces: the heap in
	// use counts garbage until a collection, so a reading over the limit
	// is checked by one before commands are refused, but at most this often,
	// since a heap really over the limit would otherwise be collected on
	// every sample.
	forcedGCEvery = time.Second
	// returnMin and returnEvery decide when the table has given back
	// enough to return the heap's free pages to the OS at once
	// (debug.FreeOSMemory, a forced collection and a full scavenge): a fall
	// of the table's bytes of at least a quarter of their peak, and at least
	// returnMin, at most once every returnEvery. Go's scavenger would return
	// them too, but only after a collection, which an idle server may not
	// run for two minutes, and then gradually.
	returnMin   = 16 << 20
	returnEvery = 10 * time.Second
)

// memoryGuard is the Server's side of --maxmemory and of returning memory to
// the OS.
type memoryGuard struct {
	limit    atomic.Uint64 // Config.MaxMemory until SetMaxMemory; 0 for none
	over     atomic.Bool   // used > limit > 0: commands that make locks or leases are refused
	refusals atomic.Uint64 // commands refused with protocol.ErrMaxMemory
	returns  atomic.Uint64 // times the heap's free pages were returned to the OS

	// read is the reading: limits.HeapInUse, or a test's.
	read func() uint64

	// Only the watch goroutine uses these.
	lastGC    time.Time // the last collection the watch forced
	lastFree  time.Time // the last return to the OS
	peakTable int       // the lock table's bytes at their highest since lastFree
}

// denyOOM are the commands refused while the heap is over --maxmemory:
// those that make a lock or a lease or queue for one, as Redis refuses the
// commands it flags denyoom. VERIFY, RELEASE, EXTEND, DELETE and every
// read go on, so that holders keep and end their leases.
var denyOOM = map[string]bool{"acquire": true, "macquire": true, "create": true}

// guardMemory wraps the handlers of denyOOM's commands with the check. It
// does so without a limit too, since SetMaxMemory may set one: the check is
// a load of a flag that stays false.
func (s *Server) guardMemory(hs []handler) {
	for i, cmd := range protocol.Commands {
		if !denyOOM[cmd.Name] {
			continue
		}
		h := hs[i]
		hs[i] = func(c *conn, args [][]byte) error {
			if c.srv.mem.over.Load() {
				c.srv.mem.refusals.Add(1)
				return protocol.ErrMaxMemory
			}
			return h(c, args)
		}
	}
}

// startMemoryWatch starts the watch on a goroutine the server owns; Close
// ends it (s.closing) and waits for it with the connections (s.wg).
func (s *Server) startMemoryWatch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ticker := time.NewTicker(memorySampleEvery)
		defer ticker.Stop()
		for {
			s.sampleMemory(time.Now())
			select {
			case <-s.closing:
				return
			case <-ticker.C:
			}
		}
	}()
	return nil
}

// SetMaxMemory puts a new --maxmemory in force while the server runs (a
// SIGHUP reload), in bytes, 0 for no bound, and returns the limit it
// replaced. The watch, which runs with or without a limit, compares the
// heap with it from its next sample (within memorySampleEvery): commands
// are refused, or accepted again, from then on.
func (s *Server) SetMaxMemory(n int64) (was int64, err error) {
	if n < 0 {
		return 0, fmt.Errorf("server: maxmemory must not be negative (0 for no bound), got %d", n)
	}
	return int64(s.mem.limit.Swap(uint64(n))), nil
}

// sampleMemory is one turn of the watch.
func (s *Server) sampleMemory(now time.Time) {
	m := &s.mem
	limit := m.limit.Load()
	used := m.read()
	if limit > 0 && used > limit && now.Sub(m.lastGC) >= forcedGCEvery {
		m.lastGC = now
		runtime.GC()
		used = m.read()
	}
	if over := limit > 0 && used > limit; over != m.over.Load() {
		m.over.Store(over) // written on a change only: every command reads it
		if over {
			s.log.Warn().Uint64("used_memory", used).Uint64("maxmemory", limit).
				Msg("memory in use is over maxmemory: commands that make locks or leases get -OOM until it is back under")
		} else {
			s.log.Info().Uint64("used_memory", used).Uint64("maxmemory", limit).
				Msg("memory in use is back under maxmemory")
		}
	}

	table := s.lockTable().Stats().TableBytes
	m.peakTable = max(m.peakTable, table)
	if fall := m.peakTable - table; fall >= max(returnMin, m.peakTable/4) && now.Sub(m.lastFree) >= returnEvery {
		debug.FreeOSMemory()
		m.lastFree = now
		m.peakTable = table
		m.returns.Add(1)
		s.log.Debug().Int("table_bytes", table).Int("fell_by", fall).Msg("returned free memory to the OS after the lock table shrank")
	}
}
