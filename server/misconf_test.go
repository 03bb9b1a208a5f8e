package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/protocol"
)

// TestMisconfRefuseReplies: refuseReplies replaces each reply, however
// nested, by the error, and keeps lock event messages.
func TestMisconfRefuseReplies(t *testing.T) {
	e := protocol.MisconfUnknownError("no space left on device")
	E := string(e.Frame())
	msg := "*3\r\n$7\r\nmessage\r\n$8\r\n__lock__\r\n$3\r\nabc\r\n"
	pmsg := "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$8\r\n__lock__\r\n$3\r\nabc\r\n"
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"none", "", "", true},
		{"one of each kind", ":12\r\n+OK\r\n-ERR x\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n", strings.Repeat(E, 6), true},
		{"nested arrays", "*2\r\n*2\r\n:1\r\n$0\r\n\r\n$2\r\nhi\r\n:5\r\n", E + E, true},
		{"messages kept", ":1\r\n" + msg + pmsg + ":2\r\n", E + msg + pmsg + E, true},
		{"a subscribe confirmation is a reply", "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n", E, true},
		{"cut short", ":1\r\n$5\r\nab", "", false},
		{"not RESP", "hello\r\n", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := refuseReplies([]byte(c.in), e)
			if ok != c.ok || ok && string(got) != c.want {
				t.Fatalf("refuseReplies(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestMisconfPipelineAndWait: as the disk fills, a pipeline with a change in
// it gets one MISCONF per command, in order; and a WAIT parked before the
// failure, granted after it, gets MISCONF rather than a token that is not on
// disk. On both transports.
func TestMisconfPipelineAndWait(t *testing.T) {
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name+"/pipeline", func(t *testing.T) {
			d := &fullDisk{}
			p := startPersist(t, t.TempDir(), withIOLoops(loops), withFault(d.fault))
			t.Cleanup(func() { d.full.Store(false) }) // before the shutdown's last write
			held := do(t, p.rdb, "ACQUIRE", "held", "60000").Int()
			d.full.Store(true)
			raw := (&testServer{t: t, run: p.run}).dial()
			defer raw.Close()
			tok := strconv.FormatInt(held, 10)
			raw.send("PING\r\nACQUIRE a 60000\r\nVERIFY held " + tok + "\r\nACQUIRE b 60000\r\n")
			for i := range 4 {
				if l := raw.line(); !strings.HasPrefix(l, "-MISCONF ") {
					t.Fatalf("reply %d of the pipeline: %q, want MISCONF", i, l)
				}
			}
			raw.send("VERIFY held " + tok + "\r\n")
			if l := raw.line(); l != ":1" {
				t.Fatalf("VERIFY after the pipeline: %q", l)
			}
		})
		t.Run(name+"/wait", func(t *testing.T) {
			d := &fullDisk{}
			p := startPersist(t, t.TempDir(), withIOLoops(loops), withFault(d.fault), persistFsync(persist.FsyncEverySec))
			t.Cleanup(func() { d.full.Store(false) }) // before the shutdown's last write
			do(t, p.rdb, "ACQUIRE", "w", "1000").Int()
			waiter := p.run.Client()
			got := make(chan reply, 1)
			go func() {
				c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				v, err := waiter.Do(c, "ACQUIRE", "w", "60000", "WAIT", "10000").Result()
				got <- reply{t: t, val: v, err: err}
			}()
			testutil.Eventually(t, 10*time.Second, "the WAIT to park", func() bool {
				return infoField(t, p.rdb, "clients", "blocked_clients") == "1"
			})
			d.full.Store(true) // the lease expires into a grant that cannot be written
			select {
			case r := <-got:
				if msg := r.Err("MISCONF"); !strings.Contains(msg, "unknown") {
					t.Fatalf("the grant's reply: %q", msg)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("no reply to the WAIT")
			}
		})
	}
}
