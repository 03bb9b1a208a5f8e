package cmdstats

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/protocol"
)

// Unknown is the name commands not in the table count under.
const Unknown = "unknown"

// Outcome is how a command ended, for its counters.
type Outcome uint8

const (
	OK       Outcome = iota // ran, and was not answered with an error
	Failed                  // ran, and was answered with an error
	Rejected                // refused before it ran: unknown, arity, AUTH, ACL, a subscribed connection
)

// counters is one command's counters in one block. Calls are counted by
// outcome and latency bucket together, each figure in a counter of its own,
// so that every figure exported only grows however a read interleaves with
// the adds (calls minus failed, read apart, could go down).
type counters struct {
	rejected, nanos atomic.Uint64
	buckets         [Failed + 1][stats.LatencyBoundCount + 1]atomic.Uint64 // by outcome (OK, Failed), then latency
}

// Block is a set of counters that a few writers add to (see the package
// doc), summed by the readers.
type Block struct {
	// NetIn and NetOut are the bytes read from and written to client
	// sockets, added to per system call.
	NetIn, NetOut atomic.Uint64
	cmds          []counters // by index in protocol.Commands, then Unknown's
}

// NewBlock returns an empty block, for a test or a benchmark; a server's
// come from its Stats.
func NewBlock() *Block {
	return &Block{cmds: make([]counters, len(protocol.Commands)+1)}
}

// tallySize is the most distinct (command, outcome, bucket) entries a
// Tally adds up before it must be flushed.
const tallySize = 8

// Tally is a connection's commands not yet added to its block: owned by
// whoever runs its commands, so no field is atomic. The zero Tally is
// empty.
type Tally struct {
	n     int
	keys  [tallySize]uint32 // command index+1 (0 for unknown) << 16 | outcome << 8 | bucket
	calls [tallySize]uint32
	nanos [tallySize]uint64
}

// Record counts one command: i is its index in protocol.Commands, -1 for
// one not there; d is the ns it took, unused for a rejected command. It
// flushes to b when the tally is full.
func (t *Tally) Record(b *Block, i int, out Outcome, d int64) {
	bucket := 0
	if out != Rejected {
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
		t.Flush(b)
	}
	t.keys[t.n], t.calls[t.n], t.nanos[t.n] = key, 1, uint64(max(d, 0))
	t.n++
}

// Flush adds the tally to b and empties it.
func (t *Tally) Flush(b *Block) {
	for j := range t.n {
		key := t.keys[j]
		i := int(key>>16) - 1
		if i < 0 {
			i = len(b.cmds) - 1
		}
		cc := &b.cmds[i]
		out, n := Outcome(key>>8), uint64(t.calls[j])
		if out == Rejected {
			cc.rejected.Add(n)
			continue
		}
		cc.buckets[out][key&0xff].Add(n)
		cc.nanos.Add(t.nanos[j])
	}
	t.n = 0
}

// Stats is a server's blocks.
type Stats struct {
	stripes []*Block // the goroutine transport's, by connection id; a power of two of them
	// IdleCloses counts the connections the idle timeout closed (rare: no
	// block needed).
	IdleCloses atomic.Uint64

	mu    sync.Mutex // guards loops
	loops []*Block   // the event loops', kept after a loop ends, so sums never go down
}

// New returns a server's empty Stats.
func New() *Stats {
	n := 4
	for n < 2*runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	cs := &Stats{stripes: make([]*Block, n)}
	for i := range cs.stripes {
		cs.stripes[i] = NewBlock()
	}
	return cs
}

// Stripe is the block of the goroutine-transport connection id.
func (cs *Stats) Stripe(id uint64) *Block {
	return cs.stripes[id&uint64(len(cs.stripes)-1)]
}

// LoopBlock makes the block of a new event loop.
func (cs *Stats) LoopBlock() *Block {
	b := NewBlock()
	cs.mu.Lock()
	cs.loops = append(cs.loops, b)
	cs.mu.Unlock()
	return b
}

// blocks returns every block, to sum.
func (cs *Stats) blocks() []*Block {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append(append([]*Block(nil), cs.stripes...), cs.loops...)
}

// Commands sums the blocks: the commands called (or rejected) at least
// once, in the command table's order, Unknown last.
func (cs *Stats) Commands() []stats.CommandStats {
	blocks := cs.blocks()
	var out []stats.CommandStats
	for i := range len(protocol.Commands) + 1 {
		st := stats.CommandStats{Name: Unknown}
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
				ok, failed := cc.buckets[OK][k].Load(), cc.buckets[Failed][k].Load()
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

// NetBytes sums the bytes read from and written to client sockets.
func (cs *Stats) NetBytes() (in, out uint64) {
	for _, b := range cs.blocks() {
		in += b.NetIn.Load()
		out += b.NetOut.Load()
	}
	return in, out
}
