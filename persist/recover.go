package persist

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
)

// CorruptError reports damage in a data file that is not a torn last write:
// the server refuses to start on it unless told to repair.
type CorruptError struct {
	File   string
	Offset int64
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("persist: %s is corrupt at offset %d: %v (start with --repair to drop everything from there on)", e.File, e.Offset, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

const (
	logPrefix  = "log-"
	snapPrefix = "snap-"
	fileSuffix = ".lh"
	blockSize  = 32 << 10 // the record format's block
)

func logName(n uint64) string  { return fmt.Sprintf("%s%016d%s", logPrefix, n, fileSuffix) }
func snapName(n uint64) string { return fmt.Sprintf("%s%016d%s", snapPrefix, n, fileSuffix) }

// dataFiles lists the numbered logs and snapshots in dir, in order.
func dataFiles(dir string) (logs, snaps []uint64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, de := range ents {
		name := de.Name()
		for _, kind := range []struct {
			prefix string
			into   *[]uint64
		}{{logPrefix, &logs}, {snapPrefix, &snaps}} {
			num, ok := strings.CutPrefix(name, kind.prefix)
			if !ok || !strings.HasSuffix(num, fileSuffix) {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSuffix(num, fileSuffix), 10, 64)
			if err == nil {
				*kind.into = append(*kind.into, n)
			}
		}
	}
	slices.Sort(logs)
	slices.Sort(snaps)
	return logs, snaps, nil
}

// recovery is what reading the directory found.
type recovery struct {
	model     *model
	nextLog   uint64   // the number the new log takes
	stale     []string // files a newer snapshot makes useless
	warnings  []string
	logBytes  int64  // the size of the logs replayed
	snapBytes int64  // the size of the snapshot loaded
	snapshot  string // the snapshot loaded, a file name; "" for none
	logs      int    // the logs replayed
}

// Recovery is what a Store found in its data directory at Open and
// restored into the table at Load, for the server's start-up log. The
// recovery itself logs only its warnings.
type Recovery struct {
	Snapshot      string // the snapshot loaded, a file name; "" for none
	SnapshotBytes int64
	Logs          int   // log files replayed after the snapshot
	LogBytes      int64 // the good bytes of those logs
	Warnings      int   // torn writes cut off and repairs made, each logged
	Locks         int   // locks restored into the table
	Leases        int   // live leases restored
	Delayed       int   // expired leases restored into their lock-delay
	// HighestToken is the highest token granted on a lock the directory
	// still knows, 0 for none; TokenCeiling the highest reservation, above
	// every token ever issued.
	HighestToken, TokenCeiling uint64
	Took                       time.Duration // Open and Load together
}

// recoverDir rebuilds the model from dir's newest snapshot and the logs after
// it. A torn last record of the newest log is cut off with a warning; any
// other damage is a *CorruptError, unless repair, which cuts the damaged file
// at the damage and drops every later log, with a warning.
func recoverDir(dir string, repair bool, delay time.Duration) (*recovery, error) {
	logs, snaps, err := dataFiles(dir)
	if err != nil {
		return nil, err
	}
	rec := &recovery{model: newModel(delay)}
	ceiling, err := readCeiling(dir)
	if err != nil {
		// Without it, the logs' reservations and the boot-epoch token still
		// bound the sequence; with it damaged, refuse as for any damage.
		if !repair {
			return nil, err
		}
		rec.warnings = append(rec.warnings, err.Error()+"; repaired: ignored")
	}
	rec.model.ceiling = ceiling
	tmps, _ := filepath.Glob(filepath.Join(dir, snapPrefix+"*"+fileSuffix+".tmp"))
	rec.stale = append(rec.stale, tmps...) // snapshots a crash left unfinished
	first := uint64(0)                     // logs from first on are replayed
	if len(snaps) > 0 {
		first = snaps[len(snaps)-1]
		path := filepath.Join(dir, snapName(first))
		rec.snapshot = snapName(first)
		if fi, err := os.Stat(path); err == nil {
			rec.snapBytes = fi.Size()
		}
		if _, err := readFile(path, rec.model, true); err != nil {
			// A snapshot is renamed into place only once complete and
			// synced: damage in it is never a torn write.
			err = corrupt(path, err)
			if !repair {
				return nil, err
			}
			rec.warnings = append(rec.warnings, err.Error()+"; repaired: the locks after the damage are lost")
		}
		for _, n := range snaps[:len(snaps)-1] {
			rec.stale = append(rec.stale, filepath.Join(dir, snapName(n)))
		}
	}
	var replay []uint64
	for _, n := range logs {
		if n < first {
			rec.stale = append(rec.stale, filepath.Join(dir, logName(n)))
		} else {
			replay = append(replay, n)
		}
	}
	// The new log follows the last one kept: a repair's dropped logs are
	// deleted before it is made, so their numbers are free again.
	rec.nextLog = max(first, 1)
	// The logs to replay run on from the snapshot's number (compaction
	// starts that log before it writes the snapshot), or from 1 without a
	// snapshot, with no gap.
	want := max(first, 1)
	if len(replay) == 0 && first > 0 || len(replay) > 0 && replay[0] != want {
		err := &CorruptError{File: filepath.Join(dir, logName(want)), Err: errors.New("log file missing")}
		if !repair {
			return nil, err
		}
		rec.warnings = append(rec.warnings, err.Error()+"; repaired: what it held is lost")
		if len(replay) > 0 {
			want = replay[0]
		}
	}
	for k, n := range replay {
		path := filepath.Join(dir, logName(n))
		if n != want+uint64(k) {
			err := &CorruptError{File: filepath.Join(dir, logName(replay[k-1]+1)), Err: errors.New("log file missing")}
			if !repair {
				return nil, err
			}
			rec.warnings = append(rec.warnings, err.Error()+"; repaired: later logs dropped")
			rec.stale = append(rec.stale, pathsOf(dir, replay[k:])...)
			break
		}
		good, err := readFile(path, rec.model, false)
		rec.logBytes += good
		rec.logs++
		rec.nextLog = n + 1
		if err == nil {
			continue
		}
		last := k == len(replay)-1
		var cerr *CorruptError
		switch {
		case !errors.As(err, &cerr):
			return nil, err // an I/O error, not damage
		case last && invalidRecord(cerr.Err) && !validDataAfter(path, good):
			// A checksum or framing failure with nothing good behind it is
			// the end of a write the crash cut short. (A record that checks
			// out but does not decode is never that.)
			rec.warnings = append(rec.warnings, fmt.Sprintf("%s: torn last write at offset %d dropped (%v)", path, good, cerr.Err))
		case !repair:
			return nil, cerr
		default:
			rec.warnings = append(rec.warnings, cerr.Error()+"; repaired: cut there, later logs dropped")
			rec.stale = append(rec.stale, pathsOf(dir, replay[k+1:])...)
		}
		if err := truncateSynced(path, good); err != nil {
			return nil, err
		}
		break
	}
	return rec, nil
}

func pathsOf(dir string, logs []uint64) []string {
	var out []string
	for _, n := range logs {
		out = append(out, filepath.Join(dir, logName(n)))
	}
	return out
}

// readFile applies every entry of a log or snapshot file to m and returns the
// offset up to which the file was good. Damage is a *CorruptError. A record
// is applied only once all of it decodes, so that a file cut at a record's
// start has applied exactly what is left of it. A snapshot must begin with
// its header and end with its count of locks.
func readFile(path string, m *model, snapshot bool) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := record.NewReader(f, 0)
	var buf []byte
	var entries []entry
	var locks uint64
	ended := false
	for {
		off := r.Offset()
		rec, err := r.Next()
		if err == io.EOF {
			if snapshot && !ended {
				return off, &CorruptError{File: path, Offset: off, Err: errors.New("snapshot ends before its last entry")}
			}
			return off, nil
		}
		if err == nil {
			buf, err = readAll(rec, buf[:0])
		}
		if err != nil {
			if invalidRecord(err) {
				return off, &CorruptError{File: path, Offset: off, Err: err}
			}
			return off, err
		}
		entries = entries[:0]
		d := newDecoder(buf)
		for d.More() {
			e, err := d.next()
			if err != nil {
				return off, &CorruptError{File: path, Offset: off, Err: err}
			}
			entries = append(entries, e)
		}
		if snapshot {
			if err := checkSnapshotRecord(entries, off == 0, &ended, &locks); err != nil {
				return off, &CorruptError{File: path, Offset: off, Err: err}
			}
		}
		for n := range entries {
			m.apply(&entries[n])
		}
	}
}

// checkSnapshotRecord checks a snapshot's framing: a header first, the
// count of locks last, nothing after it.
func checkSnapshotRecord(entries []entry, first bool, ended *bool, locks *uint64) error {
	for n, e := range entries {
		switch {
		case *ended:
			return errors.New("entries after the snapshot's end")
		case first && n == 0 && e.kind != kindHeader:
			return errors.New("snapshot does not begin with its header")
		case e.kind == kindLock:
			*locks++
		case e.kind == kindEnd:
			if e.token != *locks {
				return fmt.Errorf("snapshot has %d locks, its end says %d", *locks, e.token)
			}
			*ended = true
		}
	}
	return nil
}

func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// validDataAfter reports whether any block of the file after offset starts
// with a record that reads whole: then the damage at offset is not the torn
// end of the last write but corruption with good data behind it.
func validDataAfter(path string, offset int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	for b := (offset/blockSize + 1) * blockSize; b < fi.Size(); b += blockSize {
		r := record.NewReader(io.NewSectionReader(f, b, fi.Size()-b), 0)
		if rec, err := r.Next(); err == nil {
			if _, err := io.Copy(io.Discard, rec); err == nil {
				return true
			}
		}
	}
	return false
}

func corrupt(path string, err error) error {
	var cerr *CorruptError
	if errors.As(err, &cerr) {
		return cerr
	}
	return &CorruptError{File: path, Err: err}
}

// invalidRecord reports whether err is the record format's word for damage.
// (record.IsInvalidRecord compares with ==, and the reader wraps some.)
func invalidRecord(err error) bool {
	return errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk) ||
		errors.Is(err, record.ErrUnexpectedEOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// truncateSynced cuts a file at size and makes the cut durable before the
// new log is started: after a power cut the old log must not come back
// torn while it is no longer the newest.
func truncateSynced(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// HasData reports whether dir holds a single node's data: a log, a
// snapshot or the token ceiling. A missing dir holds none.
func HasData(dir string) (bool, error) {
	logs, snaps, err := dataFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(logs)+len(snaps) > 0 {
		return true, nil
	}
	_, err = os.Stat(filepath.Join(dir, ceilingFile))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
