package persist

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
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

// TestReserveAhead: the background work reserves tokens before the table
// needs them, so that the table's own reservation (under a shard lock)
// finds its tokens reserved and costs no fsync.
func TestReserveAhead(t *testing.T) {
	s := open(t, t.TempDir(), nil, sessionOpts{noLoad: true})
	s.acquire("k", time.Minute, "")
	ceiling := s.store.Stats().TokenCeiling
	s.store.reserveAhead()
	if got := s.store.Stats().TokenCeiling; got != ceiling {
		t.Fatalf("reserved ahead with tokens far from the ceiling: %d -> %d", ceiling, got)
	}
	s.store.maxToken.Store(ceiling - 10) // as if the table had granted that far
	s.store.reserveAhead()
	if got := s.store.Stats().TokenCeiling; got < ceiling-10+locker.TokenReserveChunk {
		t.Fatalf("ceiling %d after reserving ahead of %d", got, ceiling-10)
	}
	fsyncs := s.store.Stats().Fsyncs
	s.store.ReserveTokens(ceiling + 5) // what the table asks for next
	if s.store.Stats().Fsyncs != fsyncs {
		t.Fatal("a reservation already covered cost an fsync")
	}
}
