package server

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/protocol"
)

// Command statistics (INFO commandstats and latencystats, and /metrics):
// per command, the calls, the failed and rejected ones and a latency
// histogram; per server, the bytes read and written on client sockets and
// the connections the idle timeout closed.
//
// Counting must put neither a lock nor contention on the command path, nor
// a locked instruction per command: an atomic add, or an atomic store (an
// XCHG on amd64), waits for the stores before it to drain, which costs a
// cheap command (a pipelined PING) tens of ns. So:
//   - dispatch records a command in its connection's cmdTally, plain
//     fields owned by whoever runs the connection's commands, which adds up
//     runs of the same command, outcome and latency bucket;
//   - the tally is added to a counterBlock with atomic adds when the
//     round's replies are flushed (conn.flush), before they are written,
//     or when it is full: an add or two per distinct entry, so a round's
//     pipeline costs the adds one command does;
//   - each event loop has a block of its own and the goroutine transport's
//     connections share a few stripes, picked by connection id, so that
//     connections running at once seldom add to the same cache lines;
//   - readers sum every block.
// Bytes are added to the block per read or write system call, which costs
// far more than the add.
//
// Commands are counted by their index in protocol.Commands; a name not in
// the table counts under "unknown", never under the client's text, which
// would let a client create series without bound.

// unknownCommand is the name commands not in the table count under.
const unknownCommand = "unknown"

// outcome is how a command ended, for its counters.
type outcome uint8

const (
	cmdOK       outcome = iota // ran, and was not answered with an error
	cmdFailed                  // ran, and was answered with an error
	cmdRejected                // refused before it ran: unknown, arity, AUTH, ACL, a subscribed connection
)

// cmdCounters is one command's counters in one block. Calls are counted by
// outcome and latency bucket together, each figure in a counter of its own,
// so that every figure exported only grows however a read interleaves with
// the adds (calls minus failed, read apart, could go down).
type cmdCounters struct {
	rejected, nanos atomic.Uint64
	buckets         [cmdFailed + 1][stats.LatencyBoundCount + 1]atomic.Uint64 // by outcome (OK, failed), then latency
}

// counterBlock is a set of counters that a few writers add to (see the top
// of this file), summed by the readers.
type counterBlock struct {
	netIn, netOut atomic.Uint64
	cmds          []cmdCounters // by index in protocol.Commands, then unknownCommand's
}

func newCounterBlock() *counterBlock {
	return &counterBlock{cmds: make([]cmdCounters, len(protocol.Commands)+1)}
}

// tallySize is the most distinct (command, outcome, bucket) entries a
// cmdTally adds up before it must be flushed.
const tallySize = 8

// cmdTally is a connection's commands not yet added to its block: owned by
// whoever runs its commands, so no field is atomic.
type cmdTally struct {
	n     int
	keys  [tallySize]uint32 // command index+1 (0 for unknown) << 16 | outcome << 8 | bucket
	calls [tallySize]uint32
	nanos [tallySize]uint64
}

// record counts one command: i is its index in protocol.Commands, -1 for
// one not there; d is the ns it took, unused for a rejected command. It
// flushes to b when the tally is full.
func (t *cmdTally) record(b *counterBlock, i int, out outcome, d int64) {
	bucket := 0
	if out != cmdRejected {
		bucket = stats.LatencyBucket(d)
	} else {
		d = 0
	}
	key := uint32(i+1)<<16 | uint32(out)<<8 | uint32(bucket)
	for j := t.n - 1; j >= 0; j-- {
		if t.keys[j] == key {
			t.calls[j]++
			t.nanos[j] += uint64(max(d, 0))
			return
		}
	}
	if t.n == tallySize {
		t.flush(b)
	}
	t.keys[t.n], t.calls[t.n], t.nanos[t.n] = key, 1, uint64(max(d, 0))
	t.n++
}

// flush adds the tally to b and empties it.
func (t *cmdTally) flush(b *counterBlock) {
	for j := range t.n {
		key := t.keys[j]
		i := int(key>>16) - 1
		if i < 0 {
			i = len(b.cmds) - 1
		}
		cc := &b.cmds[i]
		out, n := outcome(key>>8), uint64(t.calls[j])
		if out == cmdRejected {
			cc.rejected.Add(n)
			continue
		}
		cc.buckets[out][key&0xff].Add(n)
		cc.nanos.Add(t.nanos[j])
	}
	t.n = 0
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
		cs.stripes[i] = newCounterBlock()
	}
	return cs
}

// stripe is the block of the goroutine-transport connection id.
func (cs *commandStats) stripe(id uint64) *counterBlock {
	return cs.stripes[id&uint64(len(cs.stripes)-1)]
}

// loopBlock makes the block of a new event loop.
func (cs *commandStats) loopBlock() *counterBlock {
	b := newCounterBlock()
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

// commandStats sums the blocks: the commands called (or rejected) at least
// once, in the command table's order, "unknown" last.
func (s *Server) commandStats() []stats.CommandStats {
	blocks := s.cmdStats.blocks()
	var out []stats.CommandStats
	for i := range len(protocol.Commands) + 1 {
		st := stats.CommandStats{Name: unknownCommand}
		if i < len(protocol.Commands) {
			st.Name = protocol.Commands[i].Name
		}
		var nanos uint64
		buckets := make([]uint64, stats.LatencyBoundCount+1)
		for _, b := range blocks {
			cc := &b.cmds[i]
			st.Rejected += cc.rejected.Load()
			nanos += cc.nanos.Load()
			for k := range buckets {
				ok, failed := cc.buckets[cmdOK][k].Load(), cc.buckets[cmdFailed][k].Load()
				st.OK += ok
				st.Failed += failed
				buckets[k] += ok + failed
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
