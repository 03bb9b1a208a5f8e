//go:build linux

package chaos

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// The log store faults work on a node's files while it is down (torn-tail)
// or on the file system under its data directory (disk-full).
//
// The torn tail models a crash (power loss, not just kill -9: the page cache
// survives a killed process) in the middle of a write the node had not yet
// made durable. Every write a node acknowledged was fsynced first, and a
// correct disk keeps it; what a crash can leave torn is the write in flight,
// which nobody was told about. So the fault never touches a byte the node
// had fsynced: it adds, after the last complete write, a torn copy of the
// next one. Tearing a write the node had fsynced (and may have acknowledged)
// is a disk that lied, outside what Raft promises to survive.

// castagnoli is raft-wal's checksum: CRC-32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// raft-wal's segment format (hashicorp/raft-wal segment/format.go): a 32-byte
// file header, then 8-byte-aligned frames, each an 8-byte header (type,
// 3 zero bytes, length; for a commit frame the CRC-32C of the batch since
// the previous commit frame in place of the length). A write is one batch:
// entry frames and a commit frame, then fsync.
const (
	walFileHeader  = 32
	walFrameHeader = 8
	walFrameEntry  = 1
	walFrameIndex  = 2
	walFrameCommit = 3
)

// TearTail tears the tail of the Raft log in a stopped node's data
// directory, as a crash in the middle of its next write would leave it, and
// says what it did. The data directory holds raft/wal/ (raft-wal) or
// raft/raft.db (raft-boltdb).
func TearTail(dataDir string, rng *rand.Rand) (string, error) {
	raft := filepath.Join(dataDir, "raft")
	if fi, err := os.Stat(filepath.Join(raft, "wal")); err == nil && fi.IsDir() {
		return tearWAL(filepath.Join(raft, "wal"), rng)
	}
	if _, err := os.Stat(filepath.Join(raft, "raft.db")); err == nil {
		return tearBolt(filepath.Join(raft, "raft.db"))
	}
	return "", fmt.Errorf("chaos: no raft log store in %s", raft)
}

// tearWAL writes a torn batch after the last commit frame of the newest
// segment: one to four entry frames of random bytes and the commit frame
// with their right CRC, either cut short at a random 8-byte boundary (the
// rest never reached the disk) or whole with a random 8-byte-aligned range
// of it zeroed, the commit frame kept (the disk wrote back that range last).
// 8-byte granularity keeps frame headers whole, as raft-wal assumes a disk's
// sectors do; the batch's bytes are torn at any finer place a real write
// could be.
func tearWAL(dir string, rng *rand.Rand) (string, error) {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		return "", fmt.Errorf("chaos: no raft-wal segment in %s (%v)", dir, err)
	}
	// The newest segment has the highest ID.
	sort.Slice(segs, func(i, j int) bool {
		return segID(segs[i]) < segID(segs[j])
	})
	path := segs[len(segs)-1]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	end, commits, sealed := walScan(data)
	if sealed {
		return "", fmt.Errorf("chaos: %s is sealed: no tail to tear", filepath.Base(path))
	}
	crcFrom := 0 // the first batch's CRC covers the file header
	if commits > 0 {
		crcFrom = end
	} else {
		end = walFileHeader
	}

	var batch []byte
	for i, n := 0, 1+rng.Intn(4); i < n; i++ {
		size := 16 + rng.Intn(600)
		h := make([]byte, walFrameHeader)
		h[0] = walFrameEntry
		binary.LittleEndian.PutUint32(h[4:], uint32(size))
		batch = append(batch, h...)
		for j := 0; j < size; j++ {
			batch = append(batch, byte(1+rng.Intn(255)))
		}
		batch = append(batch, make([]byte, (8-size%8)%8)...)
	}
	crc := crc32.Checksum(append(append([]byte{}, data[crcFrom:end]...), batch...), castagnoli)
	commit := make([]byte, walFrameHeader)
	commit[0] = walFrameCommit
	binary.LittleEndian.PutUint32(commit[4:], crc)
	full := append(batch, commit...)

	what := ""
	if rng.Intn(2) == 0 {
		cut := 8 * (1 + rng.Intn(len(full)/8-1)) // 8 to len-8: never the whole batch
		what = fmt.Sprintf("the first %d of its %d bytes", cut, len(full))
		full = full[:cut]
	} else {
		// A range with a byte that is not zero: every frame header and
		// payload byte is; padding is not.
		for {
			a := 8 * rng.Intn(len(batch)/8)
			b := a + 8*(1+rng.Intn((len(batch)-a)/8))
			if bytes.Count(full[a:b], []byte{0}) < b-a {
				clear(full[a:b])
				what = fmt.Sprintf("all %d bytes but %d..%d, zeroed (commit frame kept)", len(full), a, b)
				break
			}
		}
	}
	if _, err := f.WriteAt(full, int64(end)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: after %d commit(s), at offset %d, a batch of %s", filepath.Base(path), commits, end, what), f.Sync()
}

// segID is a segment's ID, from its name (BASEINDEX-ID.wal, ID in hex).
func segID(path string) uint64 {
	_, id, _ := strings.Cut(strings.TrimSuffix(filepath.Base(path), ".wal"), "-")
	n, _ := strconv.ParseUint(id, 16, 64)
	return n
}

// walScan finds where raft-wal's writer would append next, as its recovery
// does (segment/writer.go, recoverTail): it reads frames until zeros, a
// frame it cannot read, or the end; with entry frames after the last commit
// frame, that commit frame is the end; else the last commit frame is the end
// if its CRC checks, and the one before it if not. It returns that offset
// (0: no commit frame), how many commit frames came before it, and whether
// an index frame (a sealed segment) was seen. Bytes past the end (a torn
// batch that recovery discarded) stay in the file, as they do after a real
// crash.
func walScan(data []byte) (end, commits int, sealed bool) {
	var prev, final int // ends of the last two commit frames, 0 for none
	finalOK, entriesAfter := false, false
	for off := walFileHeader; off+walFrameHeader <= len(data); {
		h := data[off : off+walFrameHeader]
		if h[0] == 0 || h[0] > walFrameCommit {
			break
		}
		n := int(binary.LittleEndian.Uint32(h[4:]))
		switch h[0] {
		case walFrameCommit:
			// The CRC covers what came after the previous commit frame (the
			// file header too, for the first).
			finalOK = n == int(crc32.Checksum(data[final:off], castagnoli))
			prev, final, entriesAfter = final, off+walFrameHeader, false
			commits++
			off += walFrameHeader
			continue
		case walFrameIndex:
			sealed = true
		case walFrameEntry:
			entriesAfter = true
		}
		off += walFrameHeader + n + (8-n%8)%8
	}
	switch {
	case final == 0:
		return 0, 0, sealed
	case entriesAfter || finalOK:
		return final, commits, sealed
	default: // the last commit's CRC fails: back to the one before
		return prev, commits - 1, sealed
	}
}

// tearBolt tears the meta page of bbolt's next transaction. bbolt writes a
// transaction's pages where no committed page points, fsyncs, then writes
// one meta page (the older of two, which it alternates), and fsyncs: a
// crash can leave only that meta page torn. The torn page is the newer
// one's with the next txid written and the rest (its checksum) not: it
// claims to be the newest and fails its checksum, so bbolt must open the
// database with the other meta page, the last committed transaction.
func tearBolt(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// Page header: 16 bytes; then the meta: magic, version, page size,
	// flags (4 each), root bucket (16), freelist, pgid, txid, checksum (8
	// each). The checksum is FNV-64a of the 56 bytes before it.
	const hdr, txidAt, sumAt = 16, 48, 56
	var metas [2][]byte
	buf := make([]byte, hdr+64)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return "", err
	}
	pageSize := int64(binary.LittleEndian.Uint32(buf[hdr+8:]))
	if pageSize == 0 || pageSize&(pageSize-1) != 0 {
		pageSize = int64(os.Getpagesize())
	}
	for i := range metas {
		metas[i] = make([]byte, hdr+64)
		if _, err := f.ReadAt(metas[i], int64(i)*pageSize); err != nil {
			return "", err
		}
	}
	txid := func(m []byte) uint64 { return binary.LittleEndian.Uint64(m[hdr+txidAt:]) }
	valid := func(m []byte) bool {
		h := fnv.New64a()
		h.Write(m[hdr : hdr+sumAt])
		return binary.LittleEndian.Uint64(m[hdr+sumAt:]) == h.Sum64()
	}
	if !valid(metas[0]) || !valid(metas[1]) {
		return "", errors.New("chaos: a bbolt meta page is already torn")
	}
	newer := 0
	if txid(metas[1]) > txid(metas[0]) {
		newer = 1
	}
	older := 1 - newer
	next := txid(metas[newer]) + 1
	torn := append([]byte{}, metas[newer]...)
	binary.LittleEndian.PutUint64(torn[hdr+txidAt:], next)
	copy(torn[hdr+sumAt:], metas[older][hdr+sumAt:hdr+sumAt+8])
	if valid(torn) {
		return "", errors.New("chaos: the torn meta page checks: try again")
	}
	if _, err := f.WriteAt(torn, int64(older)*pageSize); err != nil {
		return "", err
	}
	return fmt.Sprintf("raft.db: meta page %d torn (txid %d written, not its checksum; meta page %d has txid %d)", older, next, newer, next-1), f.Sync()
}

// A small disk: each node's data directory on a tmpfs of its own, which
// DiskFull fills and Free empties.

const fillFile = "chaos-fill"

// MountSmallDisk mounts a tmpfs of size bytes on dir (root only).
func MountSmallDisk(dir string, size int64) error {
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "chaos-"+filepath.Base(dir), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: mount tmpfs on %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// UnmountSmallDisk copies what dir holds to dir+".kept" (the run's findings
// stay readable) and unmounts it.
func UnmountSmallDisk(dir string) error {
	_ = os.Remove(filepath.Join(dir, fillFile))
	kept := dir + ".kept"
	if err := os.MkdirAll(kept, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", dir+"/.", kept).CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: keeping %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: umount %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// FillDisk fills the file system under dir until a write fails with ENOSPC,
// and returns how many bytes it took.
func FillDisk(dir string) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, fillFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// FreeDisk undoes FillDisk.
func FreeDisk(dir string) error { return os.Remove(filepath.Join(dir, fillFile)) }
