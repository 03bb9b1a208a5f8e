package persist

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The token ceiling is also kept in a small file of its own, replaced
// atomically at every reservation, so that no damage to the logs, and no
// --repair that drops them, can let tokens go backwards.
const ceilingFile = "TOKENS"

// writeCeiling replaces the TOKENS file with ceiling, durably.
func writeCeiling(dir string, ceiling uint64) error {
	n := strconv.FormatUint(ceiling, 10)
	body := fmt.Sprintf("%s %08x\n", n, crc32.ChecksumIEEE([]byte(n)))
	tmp := filepath.Join(dir, ceilingFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ceilingFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// readCeiling reads the TOKENS file: 0 when there is none.
func readCeiling(dir string) (uint64, error) {
	path := filepath.Join(dir, ceilingFile)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, sum, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), " ")
	v, perr := strconv.ParseUint(n, 10, 64)
	if !ok || perr != nil || fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(n))) != sum {
		return 0, &CorruptError{File: path, Err: fmt.Errorf("not a token ceiling: %q", b)}
	}
	return v, nil
}
