//go:build linux

package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is the command an operation sent.
type Kind uint8

// The commands the driver sends and the model knows.
const (
	Acquire Kind = iota + 1
	Release
	Extend
	Verify
	Status
)

func (k Kind) String() string {
	switch k {
	case Acquire:
		return "ACQUIRE"
	case Release:
		return "RELEASE"
	case Extend:
		return "EXTEND"
	case Verify:
		return "VERIFY"
	case Status:
		return "STATUS"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// isWrite reports whether the command may change the lock table; a write
// whose reply was lost has an unknown outcome, a read whose reply was lost
// tells nothing and is left out of the history.
func (k Kind) isWrite() bool { return k == Acquire || k == Release || k == Extend }

// Never is the return time of an operation whose outcome is unknown: it may
// take effect at any moment after its call, or never (porcupine's way of
// leaving an operation open).
const Never int64 = math.MaxInt64

// Op is one operation of a history: what a client sent, when, and what came
// back. Times are nanoseconds on the run's monotonic clock, which is the clock
// the server times leases with (same machine), so a lease's deadline can be
// placed on the same line.
type Op struct {
	Client int
	Kind   Kind
	Key    string
	// Limit is the key's semaphore permits (0: a lock); Created says the key
	// was made by CREATE (so STATUS never answers nil for it).
	Limit   int
	Created bool

	Owner    string        // ACQUIRE: the OWNER sent ("" for none)
	TTL      time.Duration // ACQUIRE, EXTEND
	Shared   bool          // ACQUIRE ... SHARED
	Wait     time.Duration // ACQUIRE ... WAIT
	Priority int           // ACQUIRE ... PRIORITY
	// With: the other keys of the MACQUIRE this ACQUIRE is one key of
	// (nil for an ACQUIRE). A MACQUIRE is recorded as an ACQUIRE per key,
	// all with its call, return and outcome: each key's grant happened
	// within that window (all at once, or one by one with WAIT), and a nil
	// or a WAIT given up took nothing that outlived it.
	With  []string
	Token uint64 // RELEASE, EXTEND, VERIFY: the token sent

	Call   int64
	Return int64 // Never when Unknown

	// Unknown: a write whose reply never came or said its outcome is unknown
	// (a timeout, a broken connection, -UNCERTAIN).
	Unknown bool
	// Result: ACQUIRE's token (0: nil); STATUS's last-token (0 with Nil:
	// the lock is unknown to the server).
	Result uint64
	OK     bool // RELEASE, EXTEND, VERIFY: the reply was 1
	Nil    bool // STATUS: nil
	Err    string
}

func (o Op) String() string {
	var args string
	switch o.Kind {
	case Acquire:
		args = fmt.Sprintf(" %s ttl=%v owner=%q", o.Key, o.TTL, o.Owner)
		if o.Shared {
			args += " SHARED"
		}
		if o.Wait > 0 {
			args += fmt.Sprintf(" WAIT %v", o.Wait)
		}
		if len(o.With) > 0 {
			args += fmt.Sprintf(" (MACQUIRE with %s)", strings.Join(o.With, " "))
		}
	case Extend:
		args = fmt.Sprintf(" %s %d ttl=%v", o.Key, o.Token, o.TTL)
	case Release, Verify:
		args = fmt.Sprintf(" %s %d", o.Key, o.Token)
	case Status:
		args = " " + o.Key
	}
	var res string
	switch {
	case o.Unknown:
		res = "unknown"
		if o.Err != "" {
			res += " (" + o.Err + ")"
		}
	case o.Kind == Acquire && o.Result == 0:
		res = "nil"
	case o.Kind == Acquire:
		res = fmt.Sprint(o.Result)
	case o.Kind == Status && o.Nil:
		res = "nil"
	case o.Kind == Status:
		res = fmt.Sprintf("last-token %d", o.Result)
	case o.OK:
		res = "1"
	default:
		res = "0"
	}
	ret := "∞"
	if o.Return != Never {
		ret = fmt.Sprintf("%.3fs", float64(o.Return)/1e9)
	}
	return fmt.Sprintf("c%d [%.3fs, %s] %s%s -> %s", o.Client, float64(o.Call)/1e9, ret, o.Kind, args, res)
}

// granted reports whether o is an ACQUIRE that returned a token.
func (o Op) granted() bool { return o.Kind == Acquire && !o.Unknown && o.Result != 0 }

// History collects the operations of a run; safe for concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex // guards ops
	ops   []Op
}

// NewHistory starts a history whose clock reads 0 now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now reads the history's clock.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// At turns a time on the history's clock into wall time (for reports).
func (h *History) At(t int64) time.Time { return h.start.Add(time.Duration(t)) }

// Add records a finished operation; an unknown outcome gets Return Never,
// a read without an outcome is dropped (it tells nothing).
func (h *History) Add(o Op) {
	if o.Unknown {
		if !o.Kind.isWrite() {
			return
		}
		o.Return = Never
	}
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// Ops returns the operations recorded so far, by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// byKey splits operations by key, keeping their order.
func byKey(ops []Op) map[string][]Op {
	m := make(map[string][]Op)
	for _, o := range ops {
		m[o.Key] = append(m[o.Key], o)
	}
	return m
}
