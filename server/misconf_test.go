package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/persist"
)

// TestMisconfPipelineAndWait: as the disk fills, a pipeline with a change in
// it gets one MISCONF per command, in order; and a WAIT parked before the
// failure, granted after it, gets MISCONF rather than a token that is not on
// disk. On both transports.
func TestMisconfPipelineAndWait(t *testing.T) {
	t.Parallel() // its cases wait for a lease to run out, each on a server of its own
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name+"/pipeline", func(t *testing.T) {
			t.Parallel()
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
			t.Parallel()
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
