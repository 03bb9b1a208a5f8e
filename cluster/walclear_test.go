package cluster

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// tearWAL writes after the log's end in the tail segment under dir what a
// crash in the middle of a batch can leave: entry frames of the given
// payload sizes and the batch's commit frame, with the CRC of the whole
// batch, and the first payload's first 8 bytes zeroed (a sector that did
// not reach the disk). end is where the log ends, as recovery left it.
func tearWAL(t *testing.T, dir string, end int, sizes ...int) {
	t.Helper()
	path, _, ok, err := walTailSegment(dir)
	if err != nil || !ok {
		t.Fatalf("tail segment: %v %v", ok, err)
	}
	var batch []byte
	for _, n := range sizes {
		h := make([]byte, walFrameHeaderLen)
		h[0] = walFrameEntry
		binary.LittleEndian.PutUint32(h[4:], uint32(n))
		batch = append(append(batch, h...), bytes.Repeat([]byte{0xab}, n+(8-n%8)%8)...)
	}
	commit := make([]byte, walFrameHeaderLen)
	commit[0] = walFrameCommit
	binary.LittleEndian.PutUint32(commit[4:], crc32.Checksum(batch, crc32.MakeTable(crc32.Castagnoli)))
	batch = append(batch, commit...)
	clear(batch[walFrameHeaderLen : walFrameHeaderLen+8])
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(batch, int64(end)); err != nil {
		t.Fatal(err)
	}
}

// walEnd is where the log in dir's tail segment ends for lastIndex.
func walEnd(t *testing.T, dir string, lastIndex uint64) int {
	t.Helper()
	path, base, _, err := walTailSegment(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end, err := walCommittedEnd(data, int(lastIndex-base+1))
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// TestWALClearsWhatRecoveryDiscards is chaos's TestTornBatchOverStaleFrames
// through openLogStore: a torn batch, discarded, then a torn batch whose
// commit frame the first one's stale frames follow. raft-wal alone takes the
// second for a written batch; with what recovery discarded cleared, its CRC
// is checked and it is discarded too. Then random torn batches over a log
// that grows between them: every open finds exactly the entries written
// whole.
func TestWALClearsWhatRecoveryDiscards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wdir := filepath.Join(dir, walDir)
	cfg := Config{LogStore: LogStoreWAL, Logger: zerolog.New(testutil.NewTestLog(t))}
	var last uint64
	reopen := func() logStore {
		t.Helper()
		s, err := openLogStore(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		if got != last {
			s.Close()
			t.Fatalf("after a torn batch, LastIndex %d, want %d: a torn batch was taken for a written one", got, last)
		}
		return s
	}
	write := func(s logStore, n int) {
		t.Helper()
		var logs []*raft.Log
		for range n {
			last++
			logs = append(logs, &raft.Log{Index: last, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(last)}, 1+int(last%50))})
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	s := reopen()
	last = 0
	write(s, 2)
	s.Close()

	tearWAL(t, wdir, walEnd(t, wdir, last), 40, 40) // frames of 48 bytes each
	reopen().Close()
	tearWAL(t, wdir, walEnd(t, wdir, last), 32) // 40 bytes and the commit's 8: the first tear's second frame would follow
	reopen().Close()

	rng := rand.New(rand.NewPCG(1, 2))
	for range 25 {
		s := reopen()
		write(s, 1+rng.IntN(4))
		s.Close()
		sizes := make([]int, 1+rng.IntN(4))
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(120)
		}
		tearWAL(t, wdir, walEnd(t, wdir, last), sizes...)
	}
	s = reopen()
	defer s.Close()
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := bytes.Repeat([]byte{byte(i)}, 1+int(i%50)); !bytes.Equal(l.Data, want) {
			t.Fatalf("entry %d: %q, want %q", i, l.Data, want)
		}
	}
}

// TestWALCommittedEnd: where the clearing starts, and what it leaves alone.
func TestWALCommittedEnd(t *testing.T) {
	t.Parallel()
	frame := func(typ byte, n int) []byte {
		h := make([]byte, walFrameHeaderLen+n+(8-n%8)%8)
		h[0] = typ
		binary.LittleEndian.PutUint32(h[4:], uint32(n))
		for i := walFrameHeaderLen; i < len(h); i++ {
			h[i] = 0xcd
		}
		return h
	}
	commit := func() []byte { c := make([]byte, walFrameHeaderLen); c[0] = walFrameCommit; c[4] = 0x7f; return c }
	header := bytes.Repeat([]byte{1}, walFileHeaderLen)
	seg := func(parts ...[]byte) []byte {
		return append(bytes.Clone(header), append(bytes.Join(parts, nil), make([]byte, 64)...)...)
	}
	one := len(header) + 16 + 8
	two := one + 32 + 16 + 8
	for _, tc := range []struct {
		name string
		data []byte
		want int
		end  int // -1: an error, nothing cleared
	}{
		{"empty", seg(), 0, walFileHeaderLen},
		{"one batch", seg(frame(walFrameEntry, 5), commit()), 1, one},
		{"second batch recovered", seg(frame(walFrameEntry, 5), commit(), frame(walFrameEntry, 20), frame(walFrameEntry, 1), commit()), 3, two},
		{"second batch discarded", seg(frame(walFrameEntry, 5), commit(), frame(walFrameEntry, 20), frame(walFrameEntry, 1), commit()), 1, one},
		{"frames after the last commit", seg(frame(walFrameEntry, 5), commit(), frame(walFrameEntry, 9)), 1, one},
		{"nothing committed", seg(frame(walFrameEntry, 5)), 0, walFileHeaderLen},
		{"fewer entries than the log", seg(frame(walFrameEntry, 5), commit()), 2, -1},
		{"no commit at the count", seg(frame(walFrameEntry, 5), frame(walFrameEntry, 5), commit()), 1, -1},
		{"sealed", seg(frame(walFrameEntry, 5), frame(walFrameIndex, 8), commit()), 1, -1},
	} {
		end, err := walCommittedEnd(tc.data, tc.want)
		switch {
		case tc.end < 0 && err == nil:
			t.Errorf("%s: end %d, want an error", tc.name, end)
		case tc.end >= 0 && (err != nil || end != tc.end):
			t.Errorf("%s: end %d, %v; want %d", tc.name, end, err, tc.end)
		}
	}
}
