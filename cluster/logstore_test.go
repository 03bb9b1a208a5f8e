package cluster

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// TestLogStoreSurvivesTailTruncation: raft clears a log suffix that a new
// leader does not have (raft's DeleteRange of the tail), then the node
// restarts. The store must open again with every entry before the cut and
// take new entries after it. raft-wal v0.4.0 sealed the tail segment
// without its index and panicked on the next open ("sealed segment has no
// index block", hashicorp/raft-wal#31): the chaos run found a node that
// could not come back.
func TestLogStoreSurvivesTailTruncation(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{LogStore: kind, Logger: zerolog.New(testutil.NewTestLog(t))}
			open := func() logStore {
				s, err := openLogStore(dir, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			store := func(s logStore, from, to uint64, term uint64) {
				var logs []*raft.Log
				for i := from; i <= to; i++ {
					logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprint(i))})
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
			}
			s := open()
			store(s, 1, 10, 1)
			if err := s.DeleteRange(8, 10); err != nil {
				t.Fatal(err)
			}
			store(s, 8, 9, 2)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			defer s.Close()
			for i := uint64(1); i <= 9; i++ {
				var l raft.Log
				if err := s.GetLog(i, &l); err != nil {
					t.Fatalf("after a restart, entry %d: %v", i, err)
				}
				if want := uint64(1) + uint64(i/8); l.Term != want || string(l.Data) != fmt.Sprint(i) {
					t.Fatalf("entry %d: term %d data %q, want term %d data %q", i, l.Term, l.Data, want, fmt.Sprint(i))
				}
			}
			if last, err := s.LastIndex(); err != nil || last != 9 {
				t.Fatalf("LastIndex %d, %v; want 9", last, err)
			}
		})
	}
}

// TestLogStoreDefault: with no kind named, a new data directory gets
// raft-wal and one made with bolt keeps bolt.
func TestLogStoreDefault(t *testing.T) {
	t.Parallel()
	cfg := Config{Logger: zerolog.New(testutil.NewTestLog(t))}
	for _, tc := range []struct {
		made, want string // made: the kind the directory was created with, "" for none
	}{{"", walDir}, {LogStoreBolt, boltFile}, {LogStoreWAL, walDir}} {
		dir := t.TempDir()
		if tc.made != "" {
			s, err := openLogStore(dir, Config{LogStore: tc.made, Logger: cfg.Logger})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		s, err := openLogStore(dir, cfg)
		if err != nil {
			t.Fatalf("made with %q: %v", tc.made, err)
		}
		s.Close()
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != tc.want {
			t.Errorf("made with %q, opened with the default: %v, want only %s", tc.made, entries, tc.want)
		}
	}
}
