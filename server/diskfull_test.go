package server

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/persist"
)

// fullDisk fails the data directory's log writes with ENOSPC while full,
// through persist.Options.Fault.
type fullDisk struct{ full atomic.Bool }

func (d *fullDisk) fault(op string) error {
	if op == "write" && d.full.Load() {
		return syscall.ENOSPC
	}
	return nil
}

func withFault(f func(op string) error) option {
	return func(c *Config) { c.Persist.Fault = f }
}

func withIOLoops(n int) option { return func(c *Config) { c.IOLoops = n } }

// TestDiskFullMisconf: while the data directory cannot be written, the
// server refuses changes with MISCONF, does not acknowledge the one that
// ran as the disk filled, and goes on serving a bystander's VERIFY and
// STATUS; once space returns it accepts changes again with no restart, and a
// restart finds every change, the unacknowledged one included. On both
// transports.
func TestDiskFullMisconf(t *testing.T) {
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d := &fullDisk{}
			p := startPersist(t, dir, withIOLoops(loops), withFault(d.fault), persistFsync(persist.FsyncAlways))
			bystander := p.run.Client()
			held := do(t, bystander, "ACQUIRE", "held", "60000").Int()

			d.full.Store(true)
			// The first change after the disk filled runs (nothing knew),
			// but its commit fails: its reply must not acknowledge it.
			msg := do(t, p.rdb, "ACQUIRE", "ran", "60000").Err("MISCONF")
			if !strings.Contains(msg, "no space left on device") || !strings.Contains(msg, "unknown") {
				t.Fatalf("the reply of a change that ran: %q, want the cause and an unknown outcome", msg)
			}
			// Later changes do not run.
			for _, cmd := range [][]any{
				{"ACQUIRE", "refused", "60000"},
				{"EXTEND", "held", held, "60000"},
				{"RELEASE", "held", held},
				{"CREATE", "made"},
				{"DELETE", "held"},
				{"MACQUIRE", "2", "m1", "m2", "60000"},
				{"MRELEASE", "held", held},
			} {
				msg := do(t, p.rdb, cmd...).Err("MISCONF")
				if !strings.Contains(msg, "changes refused") {
					t.Fatalf("%v: %q, want it refused before it ran", cmd, msg)
				}
			}
			if st := status(t, bystander, "refused"); st != nil {
				t.Fatalf("a refused ACQUIRE ran: %v", st)
			}
			// Reads go on.
			if v := do(t, bystander, "VERIFY", "held", held).Int(); v != 1 {
				t.Fatalf("VERIFY of the bystander's lease = %d on a full disk", v)
			}
			if st := status(t, bystander, "held"); st["state"] != "held" {
				t.Fatalf("STATUS of the bystander's lock on a full disk: %v", st)
			}
			do(t, bystander, "PING").Str("PONG")
			do(t, bystander, "LOCKS", "0").Slice()
			if v := infoField(t, bystander, "persistence", "persist_ok"); v != "0" {
				t.Fatalf("persist_ok:%s on a full disk", v)
			}
			if v := infoField(t, bystander, "persistence", "persist_error"); !strings.Contains(v, "no space left") {
				t.Fatalf("persist_error:%s on a full disk", v)
			}

			d.full.Store(false)
			testutil.Eventually(t, 10*time.Second, "the server to resume writing after space returned", func() bool {
				return infoField(t, bystander, "persistence", "persist_ok") == "1"
			})
			if v := infoField(t, bystander, "persistence", "persist_write_failures"); v == "0" {
				t.Fatal("persist_write_failures:0 after a failure")
			}
			after := do(t, p.rdb, "ACQUIRE", "after", "60000").Int()
			do(t, bystander, "EXTEND", "held", held, "60000").Int()

			p = p.restart(withIOLoops(loops))
			for key, tok := range map[string]int64{"held": held, "after": after} {
				if st := status(t, p.rdb, key); st["state"] != "held" || st["token"] != strconv.FormatInt(tok, 10) {
					t.Fatalf("%s after the restart: %v, want held with token %d", key, st, tok)
				}
			}
			// Unacknowledged, but in the table when the retry wrote it.
			if st := status(t, p.rdb, "ran"); st["state"] != "held" {
				t.Fatalf("the change that ran as the disk filled, after the restart: %v", st)
			}
		})
	}
}

// brokenFsync fails every fsync of the data directory's log with EIO once
// set, through persist.Options.Fault.
type brokenFsync struct{ broken atomic.Bool }

func (b *brokenFsync) fault(op string) error {
	if op == "fsync" && b.broken.Load() {
		return syscall.EIO
	}
	return nil
}

// TestDiskFsyncFailureStops: a failed fsync is not retried (the kernel may
// have dropped what it could not write): the server stops, and the reply
// that waited for the fsync is never sent. On both transports.
func TestDiskFsyncFailureStops(t *testing.T) {
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name, func(t *testing.T) {
			b := &brokenFsync{}
			p := startPersist(t, t.TempDir(), withIOLoops(loops), withFault(b.fault), persistFsync(persist.FsyncAlways))
			do(t, p.rdb, "ACQUIRE", "before", "60000").Int()
			b.broken.Store(true)
			r := do(t, p.rdb, "ACQUIRE", "doomed", "60000")
			if r.err == nil {
				t.Fatalf("ACQUIRE whose fsync failed was answered: %s", r)
			}
			testutil.Eventually(t, 10*time.Second, "the server to stop after a failed fsync", p.srv.isClosed)
			p.srv.mu.Lock()
			failure := p.srv.failure
			p.srv.mu.Unlock()
			if !errors.Is(failure, persist.ErrFailed) {
				t.Fatalf("the server's failure: %v, want persist.ErrFailed", failure)
			}
		})
	}
}
