package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestDiskFullTmpfs fills a real file system, a 1 MiB tmpfs, under the
// store: commits fail with ENOSPC as ErrUnwritable, and once space is freed
// the store resumes by itself and a restart recovers every grant. Mounting
// needs privilege: the test is skipped only when the kernel refuses the
// mount (EPERM), never for a missing tool.
func TestDiskFullTmpfs(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("mounting a tmpfs was refused: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	dir := filepath.Join(mnt, "data")
	s := open(t, dir, nil, sessionOpts{fsync: FsyncAlways})
	toks := &tokenLog{}
	toks.add(s.acquire("before", time.Hour, ""))
	s.commit()

	// Fill what is left, then commit grants until one does not fit.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := filler.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			break
		}
	}
	filler.Close()
	owner := strings.Repeat("o", 200)
	var acked []string
	var failed error
	for i := 0; i < 10000 && failed == nil; i++ {
		key := fmt.Sprintf("k%d", i)
		toks.add(s.acquire(key, time.Hour, owner))
		if failed = s.store.Commit(); failed == nil {
			acked = append(acked, key)
		}
	}
	if !errors.Is(failed, ErrUnwritable) || !errors.Is(s.store.WriteFailure(), syscall.ENOSPC) {
		t.Fatalf("commits on a full tmpfs: %v (WriteFailure %v), want ErrUnwritable from ENOSPC", failed, s.store.WriteFailure())
	}

	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return s.store.WriteFailure() == nil })
	s.commit()
	toks.add(s.acquire("after", time.Hour, ""))
	s.commit()
	before := s.states()
	s.close()

	s = open(t, dir, s.clock, sessionOpts{fsync: FsyncAlways})
	if w := warnings(s.log); len(w) > 0 {
		t.Fatalf("recovery warned: %v", w)
	}
	sameTable(t, before, s.states(), 0)
	for _, k := range append(acked, "before", "after") {
		if _, ok := s.status(k); !ok {
			t.Fatalf("%s, acknowledged, is lost", k)
		}
	}
	if tok := s.acquire("new", time.Hour, ""); tok <= toks.max() {
		t.Fatalf("token %d after the restart, want above %d", tok, toks.max())
	}
}
