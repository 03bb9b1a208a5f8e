package persist

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCeilingFileOutlivesTheLogs: the TOKENS file keeps the sequence above
// every reservation even when the logs that recorded them are gone (a
// --repair that drops them, an operator who deletes them).
func TestCeilingFileOutlivesTheLogs(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	tok := s.acquire("k", time.Minute, "")
	s.store.ReserveTokens(tok + 5<<20)
	s.close()
	logs, _, err := dataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range logs {
		if err := os.Remove(filepath.Join(dir, logName(n))); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir, nil, sessionOpts{})
	if first := s.store.FirstToken(boot); first <= tok+5<<20 {
		t.Fatalf("FirstToken %d, want above the reservation %d", first, tok+5<<20)
	}
	if got := s.acquire("k", time.Minute, ""); got <= tok+5<<20 {
		t.Fatalf("token %d after the logs were lost, want above %d", got, tok+5<<20)
	}
}

func TestCeilingFileDamage(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("k", time.Minute, "")
	s.close()
	if err := os.WriteFile(filepath.Join(dir, ceilingFile), []byte("12345 00000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := tryOpen(t, dir, nil, sessionOpts{})
	var cerr *CorruptError
	if !errors.As(err, &cerr) || cerr.File != filepath.Join(dir, ceilingFile) {
		t.Fatalf("Open with a damaged TOKENS file: %v", err)
	}
	if _, err := tryOpen(t, dir, nil, sessionOpts{repair: true}); err != nil {
		t.Fatalf("Open with Repair: %v", err)
	}
}
