package persist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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
	model    *model
	nextLog  uint64   // the number the new log takes
	stale    []string // files a newer snapshot makes useless
	warnings []string
	logBytes int64 // the size of the logs replayed
}

// recoverDir rebuilds the model from dir's newest snapshot and the logs after
// it. A torn last record of the newest log is cut off with a warning; any
// other damage is a *CorruptError, unless repair, which cuts the damaged file
// at the damage and drops every later log, with a warning.
func recoverDir(dir string, repair bool) (*recovery, error) {
	logs, snaps, err := dataFiles(dir)
	if err != nil {
		return nil, err
	}
	rec := &recovery{model: newModel()}
	first := uint64(0) // logs from first on are replayed
	if len(snaps) > 0 {
		first = snaps[len(snaps)-1]
		path := filepath.Join(dir, snapName(first))
		if _, err := readFile(path, rec.model); err != nil {
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
	rec.nextLog = first + 1
	if len(logs) > 0 {
		rec.nextLog = max(rec.nextLog, logs[len(logs)-1]+1)
	}
	for k, n := range replay {
		path := filepath.Join(dir, logName(n))
		if k > 0 && n != replay[k-1]+1 {
			err := &CorruptError{File: filepath.Join(dir, logName(replay[k-1]+1)), Err: errors.New("log file missing")}
			if !repair {
				return nil, err
			}
			rec.warnings = append(rec.warnings, err.Error()+"; repaired: later logs dropped")
			rec.stale = append(rec.stale, pathsOf(dir, replay[k:])...)
			break
		}
		good, err := readFile(path, rec.model)
		rec.logBytes += good
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
		if err := os.Truncate(path, good); err != nil {
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
// offset up to which the file was good. Damage is a *CorruptError.
func readFile(path string, m *model) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := record.NewReader(f, 0)
	var buf []byte
	for {
		off := r.Offset()
		rec, err := r.Next()
		if err == io.EOF {
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
		d := decoder{b: buf}
		for d.more() {
			e, err := d.next()
			if err != nil {
				return off, &CorruptError{File: path, Offset: off, Err: err}
			}
			m.apply(&e)
		}
	}
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
