package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// raft-wal's recovery discards a torn batch (frames past its last commit
// frame, or a last batch whose CRC fails) but leaves its bytes in the
// segment. The next batch is written over them from the log's end; if a
// crash tears that batch too, with its commit frame on disk, and the stale
// frames happen to follow it, recovery reads frames after the commit as the
// proof that the commit was fsynced and does not check its CRC: the torn
// batch is taken as written (TestTornBatchOverStaleFrames in chaos/ shows it
// on raft-wal itself). clearDiscardedTail removes the precondition: after
// raft-wal has recovered, it zeroes every byte past the recovered end of the
// tail segment, so the bytes after any later batch are zeros, and a torn
// batch is always the last thing in its segment, whose CRC recovery checks.

// raft-wal's segment format (segment/format.go, v0.4.1): a file header,
// then frames, each an 8-byte header (type; 3 zero bytes; the payload's
// length, or for a commit frame the CRC of what came after the previous
// commit) and a payload padded to 8 bytes. The file is preallocated, so its
// unwritten part is zeros, which recovery reads as the end.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// clearDiscardedTail zeroes what raft-wal's recovery discarded in the tail
// segment under dir, given the log's last index as raft-wal recovered it,
// and syncs the file. It runs after raftwal.Open and before anything is
// written. It changes nothing unless the segment's committed batches hold
// exactly the entries up to lastIndex: what it cannot account for, it
// leaves alone (reported as an error, which the caller logs and ignores:
// raft-wal without the clearing is what ran before).
func clearDiscardedTail(dir string, lastIndex uint64) (cleared int, err error) {
	path, base, ok, err := walTailSegment(dir)
	if err != nil || !ok {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	head, err := readFrames(f, size)
	if err != nil {
		return 0, err
	}
	want := 0
	if lastIndex >= base {
		want = int(lastIndex - base + 1)
	}
	end, err := walCommittedEnd(head, want)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	last, err := lastNonZeroFrom(f, int64(end), size)
	if err != nil || last < int64(end) {
		return 0, err // nothing past the end: the usual case after a clean stop
	}
	n := int(last + 1 - int64(end))
	if _, err := f.WriteAt(make([]byte, n), int64(end)); err != nil {
		return 0, err
	}
	return n, f.Sync()
}

// readFrames reads the start of the segment f, of size bytes, as far as
// its frames go: a few kilobytes of a 64 MiB segment just begun, so that
// opening the store does not read, and allocate, all of it for them.
func readFrames(f *os.File, size int64) ([]byte, error) {
	n := int64(64 << 10)
	for {
		n = min(n, size)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if n == size || walFramesEnd(buf)+walFrameHeaderLen <= len(buf) {
			return buf, nil
		}
		n *= 4
	}
}

// lastNonZeroFrom returns the offset of f's last byte that is not zero
// among those from off to size, -1 if none, reading a chunk at a time.
func lastNonZeroFrom(f *os.File, off, size int64) (int64, error) {
	last := int64(-1)
	buf := make([]byte, 1<<20)
	for at := off; at < size; {
		chunk := buf[:min(int64(len(buf)), size-at)]
		n, err := f.ReadAt(chunk, at)
		if err != nil && !errors.Is(err, io.EOF) {
			return last, err
		}
		if i := lastNonZero(chunk[:n]); i >= 0 {
			last = at + int64(i)
		}
		if n == 0 {
			break
		}
		at += int64(n)
	}
	return last, nil
}

// lastNonZero is the index of b's last byte that is not zero, -1 if none.
// The segment is preallocated (64 MiB by default) and mostly zeros: blocks
// are compared whole, which is quick.
func lastNonZero(b []byte) int {
	var zeros [4096]byte
	i := len(b)
	for i > 0 {
		from := max(i-len(zeros), 0)
		if !bytes.Equal(b[from:i], zeros[:i-from]) {
			break
		}
		i = from
	}
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return i - 1
}

// walTailSegment finds the tail segment in dir: the newest, by its ID, the
// second number of its name ("%020d-%016x.wal": base index, ID). raft-wal's
// Open deletes the files its metadata no longer lists, which are older.
func walTailSegment(dir string) (path string, base uint64, ok bool, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return "", 0, false, err
	}
	var tailID uint64
	for _, name := range names {
		b, id, found := strings.Cut(strings.TrimSuffix(filepath.Base(name), ".wal"), "-")
		if !found {
			continue
		}
		bi, err1 := strconv.ParseUint(b, 10, 64)
		ii, err2 := strconv.ParseUint(id, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if !ok || ii > tailID {
			path, base, tailID, ok = name, bi, ii, true
		}
	}
	return path, base, ok, nil
}

// walFrames walks data's frames from the file header's end, calling visit
// with each one's offset and type until visit returns false; it returns
// where the walk stopped: at visit's frame, a zero or malformed header
// (where recovery stops reading), or past the end of data.
func walFrames(data []byte, visit func(off int, typ byte) bool) int {
	off := walFileHeaderLen
	for off+walFrameHeaderLen <= len(data) {
		h := data[off : off+walFrameHeaderLen]
		typ := h[0]
		if typ == 0 || typ > walFrameCommit || h[1]|h[2]|h[3] != 0 || !visit(off, typ) {
			return off
		}
		n := 0 // a commit frame's length field is its CRC
		if typ != walFrameCommit {
			n = int(binary.LittleEndian.Uint32(h[4:]))
		}
		off += walFrameHeaderLen + n + (8-n%8)%8
	}
	return off
}

// walFramesEnd returns where a walk of data's frame headers stops.
func walFramesEnd(data []byte) int {
	return walFrames(data, func(int, byte) bool { return true })
}

// walCommittedEnd returns the offset just past the commit frame after which
// the segment data holds want entries: where raft-wal's recovery ended it
// and writes next (the file header's end for want 0 with no commit frame).
// A sealed segment, or one whose frames do not add up to want at a commit
// frame, is an error.
func walCommittedEnd(data []byte, want int) (int, error) {
	entries, commits, end, sealed := 0, 0, -1, false
	walFrames(data, func(off int, typ byte) bool {
		switch typ {
		case walFrameIndex:
			sealed = true
			return false
		case walFrameCommit:
			if entries == want {
				end = off + walFrameHeaderLen
				return false
			}
			commits++
		case walFrameEntry:
			entries++
		}
		return true
	})
	switch {
	case sealed:
		return 0, fmt.Errorf("the tail segment is sealed")
	case end >= 0:
		return end, nil
	case want == 0 && commits == 0:
		// Nothing committed: recovery writes the segment again from its
		// start, the header included.
		return walFileHeaderLen, nil
	}
	return 0, fmt.Errorf("no commit frame after %d entries (the log's last index as recovered): left as it is", want)
}
