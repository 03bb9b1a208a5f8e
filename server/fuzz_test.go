package server

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
)

// FuzzCommands drives a real server, over three connections, with command
// sequences decoded from the input: lock commands with arguments drawn from
// small pools of keys, numbers, owners and the tokens granted so far, waits
// left pending while other connections release, unblock or hang up, and a
// manual clock moved on so that leases expire. Whatever the sequence, the
// server must not panic, must answer every command (no hang), must map
// every error (no "internal error"), must never grant a token lower than one
// it granted before for the same key (through expiry and deletion), and
// must never show two exclusive holders of one lock.
func FuzzCommands(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 0, 1, 0, 1, 2, 2, 0, 0, 10, 0, 3, 0, 0, 1, 2, 0})
	f.Add([]byte{0, 0, 0, 1, 9, 0, 1, 0, 1, 3, 0, 2, 12, 1, 0, 0, 11, 0, 2, 1, 0})
	f.Add([]byte{7, 0, 0, 4, 2, 1, 0, 0, 0, 3, 2, 3, 0, 1, 2, 8, 1, 0, 10, 2, 7})
	f.Add([]byte{1, 0, 2, 3, 0, 1, 2, 2, 1, 0, 2, 3, 4, 5, 1, 0, 3, 0, 2, 13, 2, 1})
	// The Redis commands: SET NX, scripts, DEL and PEXPIRE among ACQUIREs.
	f.Add([]byte{14, 0, 0, 1, 0, 17, 1, 0, 0, 0, 3, 0, 0, 1, 0, 0, 1, 7, 0, 0, 18, 2, 0, 16, 0, 1, 0, 15, 1, 0, 1})
	f.Add([]byte{14, 1, 1, 0, 1, 1, 17, 0, 10, 1, 1, 2, 1, 0, 0, 0, 17, 2, 11, 0, 0, 1, 3, 1, 17, 1, 13, 1, 1, 1, 0})
	clock := &locker.ManualClock{}
	ts := startServerLogging(f, zerolog.Nop(), withManualClock(clock))
	runs := 0
	// The connections outlive each run: dialling three per run, at a few
	// hundred runs a second, would leave the loopback's ports in TIME_WAIT
	// until dialling fails.
	var conns [3]*fuzzConn
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 512 {
			return // long inputs add time, not coverage
		}
		runs++
		r := &fuzzRun{t: t, ts: ts, clock: clock, in: in, prefix: strconv.Itoa(runs) + ":", maxToken: map[string]uint64{}, granted: map[string]map[uint64]bool{}}
		r.conns = &conns
		for i, c := range r.conns {
			if c == nil {
				r.conns[i] = r.dial()
				continue
			}
			c.rc.t = t
			c.nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails the run
		}
		for len(r.in) > 0 {
			r.step()
		}
		for _, c := range r.conns {
			r.drain(c)
		}
		if n := ts.stats.panics.Load(); n != 0 {
			t.Fatalf("the server recovered from %d panics", n)
		}
	})
}

// fuzzConn is one client connection of a fuzz run.
type fuzzConn struct {
	nc      net.Conn
	rc      *rawConn
	id      int64      // CLIENT ID
	pending [][]string // the waiting commands sent, in order, their replies unread
}

type fuzzRun struct {
	t        *testing.T
	ts       *testServer
	clock    *locker.ManualClock
	in       []byte
	conns    *[3]*fuzzConn              // shared by the runs
	tokens   []string                   // granted tokens, as sent back
	prefix   string                     // of this run's keys
	maxToken map[string]uint64          // the highest token read, per key
	granted  map[string]map[uint64]bool // every token read, per key
}

// next consumes one byte of input, 0 when it has run out.
func (r *fuzzRun) next() int {
	if len(r.in) == 0 {
		return 0
	}
	b := r.in[0]
	r.in = r.in[1:]
	return int(b)
}

func (r *fuzzRun) pick(from []string) string { return from[r.next()%len(from)] }

var (
	fuzzKeys   = []string{"a", "b", "c", "a", "b", "", strings.Repeat("k", 1100)}
	fuzzTTLs   = []string{"1000", "50", "30000", "1", "0", "-5", "86400001", "x", "9223372036854775807"}
	fuzzWaits  = []string{"0", "1", "30", "-1", "x"}
	fuzzOwners = []string{"o1", "o2", "o1", ""}
	fuzzNums   = []string{"0", "1", "2", "3", "-1", "65536", "x"}
)

// key is a key of this run: runs share the server, and a lease left by an
// earlier run would answer an OWNER retry of this one.
func (r *fuzzRun) key() string {
	if k := r.pick(fuzzKeys); k != "" {
		return r.prefix + k
	}
	return ""
}

// token is a granted token, or a bad one.
func (r *fuzzRun) token() string {
	n := r.next()
	if n%4 == 3 || len(r.tokens) == 0 {
		return r.pick([]string{"0", "1", "-1", "18446744073709551615", "18446744073709551616", "t"})
	}
	return r.tokens[n%len(r.tokens)]
}

// options appends a random selection of ACQUIRE's options.
func (r *fuzzRun) options(args []string) (_ []string, waits bool) {
	flags := r.next()
	if flags&1 != 0 {
		args = append(args, "OWNER", r.pick(fuzzOwners))
	}
	if flags&2 != 0 {
		w := r.pick(fuzzWaits)
		args = append(args, "WAIT", w)
		waits = w != "0"
	}
	if flags&4 != 0 {
		args = append(args, "SHARED")
	}
	if flags&8 != 0 {
		args = append(args, "EPHEMERAL")
	}
	if flags&16 != 0 {
		args = append(args, "PRIORITY", r.pick(fuzzNums))
	}
	return args, waits
}

func (r *fuzzRun) step() {
	op, c := r.next()%19, r.conns[r.next()%len(r.conns)]
	var args []string
	async := false
	switch op {
	case 0, 1: // ACQUIRE, the most common
		args = []string{"ACQUIRE", r.key()}
		if r.next()%4 != 0 {
			args = append(args, r.pick(fuzzTTLs))
		}
		args, async = r.options(args)
	case 2:
		n := 1 + r.next()%3
		args = []string{"MACQUIRE", r.pick(fuzzTTLs), strconv.Itoa(n)}
		for range n {
			args = append(args, r.key())
		}
		args, async = r.options(args)
	case 3:
		args = []string{"RELEASE", r.key(), r.token()}
	case 4:
		args = []string{"MRELEASE", r.key(), r.token(), r.key(), r.token()}
	case 5:
		args = []string{"EXTEND", r.key(), r.token(), r.pick(fuzzTTLs)}
	case 6:
		args = []string{"VERIFY", r.key(), r.token()}
	case 7:
		args = []string{"STATUS", r.key()}
	case 8:
		args = []string{"CREATE", r.key()}
		for _, opt := range []string{"TTL", "LOCKDELAY", "LIMIT"} {
			if r.next()%2 == 1 {
				args = append(args, opt, r.pick(append(fuzzNums, fuzzTTLs...)))
			}
		}
	case 9:
		args = []string{"DELETE", r.key()}
	case 10:
		args = []string{"LOCKS", r.pick([]string{"0", "1", "x"}), "MATCH", r.pick([]string{"*", r.prefix + "a*", "[", "\\"}), "COUNT", r.pick(fuzzNums)}
	case 11: // time passes: leases and lock-delays run out
		d, _ := time.ParseDuration(r.pick([]string{"1ms", "60ms", "1100ms", "31s"}))
		r.t.Logf("clock + %s", d)
		r.clock.Advance(d)
		r.ts.Table().ExpireDue()
		return
	case 12: // a connection hangs up (its EPHEMERAL leases and its wait end)
		r.t.Logf("conn %d hangs up", c.id)
		c.nc.(*net.TCPConn).SetLinger(0) // a reset: no TIME_WAIT left behind
		c.nc.Close()
		*c = *r.dial()
		return
	case 14: // the Redis lock libraries' commands (commands_redis.go)
		args = []string{"SET", r.key(), r.pick(fuzzOwners), "NX"}
		switch r.next() % 4 {
		case 0:
			args = append(args, "PX", r.pick(fuzzTTLs))
		case 1:
			args = append(args, "EX", r.pick(fuzzNums))
		case 2:
			args = append(args, "PXAT", r.pick(fuzzTTLs))
		}
	case 15:
		args = []string{r.pick([]string{"DEL", "UNLINK"}), r.key(), r.key()}
	case 16:
		args = []string{r.pick([]string{"PEXPIRE", "EXPIRE", "PEXPIREAT"}), r.key(), r.pick(fuzzTTLs)}
	case 17:
		s := protocol.KnownScripts[r.next()%len(protocol.KnownScripts)]
		n := 1 + r.next()%2
		args = []string{"EVALSHA", s.SHA1, strconv.Itoa(n)}
		for range n {
			args = append(args, r.key())
		}
		for range r.next() % 5 {
			args = append(args, r.pick(append(fuzzOwners, fuzzTTLs...)))
		}
	case 18:
		args = []string{r.pick([]string{"GET", "PTTL", "TTL", "EXISTS", "EVALSHA_RO"}), r.key()}
		if args[0] == "EVALSHA_RO" {
			args = append(args[:1], "6484da7d58920897fdc22b7f9afd1a3d47524ea8", "1", r.key(), r.pick(fuzzOwners))
		}
	case 13:
		target := r.conns[r.next()%len(r.conns)]
		args = []string{"CLIENT", "UNBLOCK", strconv.FormatInt(target.id, 10)}
		if r.next()%2 == 1 {
			args = append(args, "ERROR")
		}
	}
	r.drain(c)
	r.send(c, args)
	if async {
		c.pending = append(c.pending, args)
		return
	}
	r.check(args, c.rc.reply())
}

// drain reads the replies of c's waits still pending.
func (r *fuzzRun) drain(c *fuzzConn) {
	for _, args := range c.pending {
		r.checkLate(args, c.rc.reply())
	}
	c.pending = c.pending[:0]
}

func (r *fuzzRun) dial() *fuzzConn {
	nc, err := net.DialTimeout("tcp", r.ts.addr, 5*time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails the run
	c := &fuzzConn{nc: nc, rc: &rawConn{t: r.t, Conn: nc, r: bufio.NewReader(nc)}}
	c.id = clientID(r.t, c.rc)
	return c
}

func (r *fuzzRun) send(c *fuzzConn, args []string) { c.rc.send(resp(args...)) }

// check holds a reply to the run's invariants and records granted tokens.
// A token granted by this command must be at least every token read
// before, since those were granted before it.
func (r *fuzzRun) check(args []string, reply any) { r.checkReply(args, reply, false) }

// checkLate is check for the reply of a wait read only now: it may have
// been granted before tokens read earlier, so it is not held to them.
func (r *fuzzRun) checkLate(args []string, reply any) { r.checkReply(args, reply, true) }

func (r *fuzzRun) checkReply(args []string, reply any, late bool) {
	r.t.Helper()
	r.t.Logf("%q -> %#v (late %v)", args, reply, late) // the story, when it fails
	if e, ok := reply.(respError); ok && strings.Contains(string(e), "internal error") {
		r.t.Fatalf("%q: %s", args, e)
	}
	var keys []string
	var tokens []any
	switch strings.ToUpper(args[0]) {
	case "ACQUIRE":
		keys, tokens = args[1:2], []any{reply}
	case "MACQUIRE":
		n, _ := strconv.Atoi(args[2])
		keys = args[3 : 3+n]
		tokens, _ = reply.([]any)
	default:
		return
	}
	for i, tok := range tokens {
		v, ok := tok.(int64)
		if !ok || i >= len(keys) {
			continue
		}
		key, token := keys[i], uint64(v)
		// An OWNER retry gets its live lease back with the same token; any
		// other grant is a new lease, with a token above every one before.
		renewal := r.granted[key][token]
		if token < r.maxToken[key] && !late && !renewal {
			r.t.Fatalf("%q granted a new lease with token %d on %q after %d", args, token, key, r.maxToken[key])
		}
		r.maxToken[key] = max(r.maxToken[key], token)
		if r.granted[key] == nil {
			r.granted[key] = map[uint64]bool{}
		}
		r.granted[key][token] = true
		r.tokens = append(r.tokens, strconv.FormatUint(token, 10))
		if st, ok := r.ts.Table().Status([]byte(key)); ok && st.Limit == 0 {
			exclusive := 0
			for _, h := range st.Holders {
				if !h.Shared {
					exclusive++
				}
			}
			if exclusive > 0 && len(st.Holders) > 1 {
				r.t.Fatalf("%q: %q has an exclusive lease among %d holders: %+v", args, key, len(st.Holders), st.Holders)
			}
		}
	}
}
