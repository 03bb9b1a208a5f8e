package limits

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// MemoryGuard is a server's side of --maxmemory and of returning memory to
// the OS. A watch goroutine of the server's calls Sample every
// MemorySampleEvery, with or without a limit: it reads the Go heap in use,
// publishes whether it is over the limit in force (SetLimit may change
// it), and hands memory that the lock table gave back to the OS. Commands
// only load an atomic (Over); nothing on a command's path reads the
// runtime's statistics, and nothing here holds a shard lock.
type MemoryGuard struct {
	limit    atomic.Uint64 // the limit in force, 0 for none
	over     atomic.Bool   // used > limit > 0: commands that make locks or leases are refused
	refusals atomic.Uint64 // commands refused for it
	returns  atomic.Uint64 // times the heap's free pages were returned to the OS

	// Read is the reading: HeapInUse, or a test's.
	Read func() uint64

	// Only the watch goroutine uses these.
	lastGC    time.Time // the last collection the watch forced
	lastFree  time.Time // the last return to the OS
	peakTable int       // the lock table's bytes at their highest since lastFree
}

const (
	// MemorySampleEvery is how often the watch samples.
	MemorySampleEvery = 100 * time.Millisecond
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

// NewMemoryGuard returns a guard reading HeapInUse, with limit in force.
func NewMemoryGuard(limit uint64) *MemoryGuard {
	m := &MemoryGuard{Read: HeapInUse}
	m.limit.Store(limit)
	return m
}

// Limit is the limit in force, 0 for none.
func (m *MemoryGuard) Limit() uint64 { return m.limit.Load() }

// SetLimit puts limit in force from the next sample and returns the one
// it replaced.
func (m *MemoryGuard) SetLimit(limit uint64) (was uint64) { return m.limit.Swap(limit) }

// Over reports whether the last sample was over the limit.
func (m *MemoryGuard) Over() bool { return m.over.Load() }

// Refused counts a command refused because Over.
func (m *MemoryGuard) Refused() { m.refusals.Add(1) }

// Refusals and Returns are the commands refused, and the times free memory
// was returned to the OS, so far.
func (m *MemoryGuard) Refusals() uint64 { return m.refusals.Load() }
func (m *MemoryGuard) Returns() uint64  { return m.returns.Load() }

// Sample is one turn of the watch, at now, with the lock table at
// tableBytes; it logs what changed.
func (m *MemoryGuard) Sample(now time.Time, tableBytes int, log zerolog.Logger) {
	limit := m.limit.Load()
	used := m.Read()
	if limit > 0 && used > limit && now.Sub(m.lastGC) >= forcedGCEvery {
		m.lastGC = now
		runtime.GC()
		used = m.Read()
	}
	if over := limit > 0 && used > limit; over != m.over.Load() {
		m.over.Store(over) // written on a change only: every command reads it
		if over {
			log.Warn().Uint64("used_memory", used).Uint64("maxmemory", limit).
				Msg("memory in use is over maxmemory: commands that make locks or leases get -OOM until it is back under")
		} else {
			log.Info().Uint64("used_memory", used).Uint64("maxmemory", limit).
				Msg("memory in use is back under maxmemory")
		}
	}

	m.peakTable = max(m.peakTable, tableBytes)
	if fall := m.peakTable - tableBytes; fall >= max(returnMin, m.peakTable/4) && now.Sub(m.lastFree) >= returnEvery {
		debug.FreeOSMemory()
		m.lastFree = now
		m.peakTable = tableBytes
		m.returns.Add(1)
		log.Debug().Int("table_bytes", tableBytes).Int("fell_by", fall).Msg("returned free memory to the OS after the lock table shrank")
	}
}
