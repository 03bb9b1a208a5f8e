package server

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// Command statistics (INFO commandstats and latencystats, and /metrics):
// per command, the calls, the failed and rejected ones and a latency
// histogram; per server, the bytes read and written on client sockets and
// the connections the idle timeout closed.
//
// Counting must put neither a lock nor contention on the command path, so
// the counters live in blocks that one writer owns, summed when read:
//   - each event loop has a block that only its goroutine writes, with an
//     atomic load and store (no locked instruction: nobody else writes it;
//     the atomics are for the reader, which sums at any time);
//   - the goroutine transport's connections share a few stripes, picked by
//     connection id, written with atomic adds: the stripes make two
//     connections running at once unlikely to share a block.
//
// Commands are counted by their index in protocol.Commands; a name not in
// the table counts under "unknown", never under the client's text, which
// would let a client create series without bound.

// latencyBounds is the number of latency buckets with an upper bound: bucket
// k holds the calls that took at most 2^k µs (1 µs to about 1.05 s), and one
// more holds those above.
const latencyBounds = 21

// LatencyBounds are the upper bounds of CommandStats.Buckets, all but the
// last, which counts the calls slower than the last bound.
var LatencyBounds = func() []time.Duration {
	b := make([]time.Duration, latencyBounds)
	for k := range b {
		b[k] = time.Microsecond << k
	}
	return b
}()

// latencyBucket is the index of the bucket for a call that took d ns: the
// least k with d <= 2^k µs. For d >= 1, that is the bit length of
// (d-1)/1000: d <= 1000·2^k iff (d-1)/1000 < 2^k.
func latencyBucket(d int64) int {
	if d <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(d-1)/1000), latencyBounds)
}

// unknownCommand is the name commands not in the table count under.
const unknownCommand = "unknown"

// outcome is how a command ended, for its counters.
type outcome uint8

const (
	cmdRan      outcome = iota // ran, and answered as it does
	cmdFailed                  // ran, and answered with an error
	cmdRejected                // refused before it ran: unknown, arity, AUTH, ACL, a subscribed connection
)

// cmdCounters is one command's counters in one block. Each outcome has its
// own counter, so that each figure exported only grows, however a read
// interleaves with the writes (calls minus failed, read apart, could not).
type cmdCounters struct {
	ok, failed, rejected, nanos atomic.Uint64
	buckets                     [latencyBounds + 1]atomic.Uint64
}

// counterBlock is one writer's counters (see the top of this file). shared
// says how it is written: with atomic adds (a stripe) or by its one owner
// (an event loop's).
type counterBlock struct {
	shared        bool
	netIn, netOut atomic.Uint64
	cmds          []cmdCounters // by index in protocol.Commands, then unknownCommand's
}

func newCounterBlock(shared bool) *counterBlock {
	return &counterBlock{shared: shared, cmds: make([]cmdCounters, len(protocol.Commands)+1)}
}

// add adds n to x, one of b's counters.
func (b *counterBlock) add(x *atomic.Uint64, n uint64) {
	if b.shared {
		x.Add(n)
		return
	}
	x.Store(x.Load() + n)
}

// record counts one command: i is its index in protocol.Commands, -1 for
// one not there; d is the ns it took, unused for a rejected command.
func (b *counterBlock) record(i int, out outcome, d int64) {
	if i < 0 {
		i = len(b.cmds) - 1
	}
	cc := &b.cmds[i]
	switch out {
	case cmdRejected:
		b.add(&cc.rejected, 1)
		return
	case cmdFailed:
		b.add(&cc.failed, 1)
	default:
		b.add(&cc.ok, 1)
	}
	b.add(&cc.nanos, uint64(max(d, 0)))
	b.add(&cc.buckets[latencyBucket(d)], 1)
}

// commandStats is the server's blocks.
type commandStats struct {
	stripes    []*counterBlock // the goroutine transport's, by connection id; a power of two of them
	idleCloses atomic.Uint64   // connections the idle timeout closed (rare: no block needed)

	mu    sync.Mutex      // guards loops
	loops []*counterBlock // the event loops', kept after a loop ends, so sums never go down
}

func newCommandStats() *commandStats {
	n := 4
	for n < 2*runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	cs := &commandStats{stripes: make([]*counterBlock, n)}
	for i := range cs.stripes {
		cs.stripes[i] = newCounterBlock(true)
	}
	return cs
}

// stripe is the block of the goroutine-transport connection id.
func (cs *commandStats) stripe(id uint64) *counterBlock {
	return cs.stripes[id&uint64(len(cs.stripes)-1)]
}

// loopBlock makes the block of a new event loop, which only the loop's
// goroutine may write.
func (cs *commandStats) loopBlock() *counterBlock {
	b := newCounterBlock(false)
	cs.mu.Lock()
	cs.loops = append(cs.loops, b)
	cs.mu.Unlock()
	return b
}

// blocks returns every block, to sum.
func (cs *commandStats) blocks() []*counterBlock {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append(append([]*counterBlock(nil), cs.stripes...), cs.loops...)
}

// CommandStats is one command's figures: INFO commandstats' and
// latencystats' line, and the metrics leasehold_commands_total and
// leasehold_command_duration_seconds.
type CommandStats struct {
	Name     string        // lower case, as in the command table; "unknown" for every name not in it
	Calls    uint64        // commands that ran: OK and Failed
	OK       uint64        // commands that ran and were not answered with an error
	Failed   uint64        // commands that ran and were answered with an error
	Rejected uint64        // commands refused before they ran (not in Calls)
	Duration time.Duration // the time the Calls took
	// Buckets counts the Calls by time taken: Buckets[k] those that took at
	// most LatencyBounds[k] and more than the bound before, the last one
	// those slower than every bound.
	Buckets []uint64
}

// Percentile returns the upper bound of the bucket that the call at
// quantile q (0 < q <= 1) falls in, or the last bound's double above them:
// an estimate that errs high by at most a factor of two.
func (st CommandStats) Percentile(q float64) time.Duration {
	if st.Calls == 0 {
		return 0
	}
	rank := min(max(uint64(math.Ceil(q*float64(st.Calls))), 1), st.Calls)
	var seen uint64
	for k, n := range st.Buckets {
		if seen += n; seen >= rank {
			if k < len(LatencyBounds) {
				return LatencyBounds[k]
			}
			break
		}
	}
	return 2 * LatencyBounds[len(LatencyBounds)-1]
}

// commandStats sums the blocks: the commands called (or rejected) at least
// once, in the command table's order, "unknown" last.
func (s *Server) commandStats() []CommandStats {
	blocks := s.cmdStats.blocks()
	var out []CommandStats
	for i := range len(protocol.Commands) + 1 {
		st := CommandStats{Name: unknownCommand}
		if i < len(protocol.Commands) {
			st.Name = protocol.Commands[i].Name
		}
		var nanos uint64
		buckets := make([]uint64, latencyBounds+1)
		for _, b := range blocks {
			cc := &b.cmds[i]
			st.OK += cc.ok.Load()
			st.Failed += cc.failed.Load()
			st.Rejected += cc.rejected.Load()
			nanos += cc.nanos.Load()
			for k := range buckets {
				buckets[k] += cc.buckets[k].Load()
			}
		}
		st.Calls = st.OK + st.Failed
		if st.Calls == 0 && st.Rejected == 0 {
			continue
		}
		st.Duration = time.Duration(nanos)
		st.Buckets = buckets
		out = append(out, st)
	}
	return out
}

// netBytes sums the bytes read from and written to client sockets.
func (s *Server) netBytes() (in, out uint64) {
	for _, b := range s.cmdStats.blocks() {
		in += b.netIn.Load()
		out += b.netOut.Load()
	}
	return in, out
}
