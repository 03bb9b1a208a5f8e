package cluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
)

// The kinds of Config.LogStore.
const (
	// LogStoreWAL is hashicorp/raft-wal (segment files and a small meta
	// database), the default for a new data directory: one fsync per
	// write, so a commit costs about half of bolt's. Its recovery can take
	// a torn write for a written one when a discarded torn write's bytes
	// follow it; openLogStore clears those bytes (clearDiscardedTail).
	// See docs/cluster.md.
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb/v2 (a B+tree in one file, bbolt), what
	// Consul, Nomad and Vault have used for years: two fsyncs per write.
	LogStoreBolt = "bolt"
)

// logStore is what a node keeps its Raft log and its term and vote in.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// The names of each kind's files under the node's raft directory.
const (
	boltFile = "raft.db"
	walDir   = "wal"
)

// openLogStore opens (or creates) the log store of cfg's kind in dir,
// refusing a directory that holds the other kind's: the node's log and
// vote are there, and starting over empty would lose them. With no kind
// given it opens the kind dir holds, raft-wal in a new directory.
func openLogStore(dir string, cfg Config) (logStore, error) {
	hasBolt, err := exists(filepath.Join(dir, boltFile))
	if err != nil {
		return nil, err
	}
	hasWAL, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		return nil, err
	}
	kind := cfg.LogStore
	switch {
	case kind != "":
	case hasBolt:
		kind = LogStoreBolt // created before wal was the default
	default:
		kind = LogStoreWAL
	}
	switch {
	case kind == LogStoreBolt && hasWAL:
		return nil, fmt.Errorf("cluster: %s holds a %q log store (%s/), not %q: start with the log store it was created with", dir, LogStoreWAL, walDir, kind)
	case kind == LogStoreWAL && hasBolt:
		return nil, fmt.Errorf("cluster: %s holds a %q log store (%s), not %q: start with the log store it was created with", dir, LogStoreBolt, boltFile, kind)
	}
	if kind == LogStoreWAL {
		wdir := filepath.Join(dir, walDir)
		if err := os.MkdirAll(wdir, 0o700); err != nil {
			return nil, err
		}
		// v0.4.1 at least: v0.4.0 left a segment sealed by a tail
		// truncation without its index, so the node could not start again
		// (hashicorp/raft-wal#31, TestLogStoreSurvivesTailTruncation), and
		// its Close left the meta database open.
		w, err := raftwal.Open(wdir, raftwal.WithLogger(newHclogAdapter(cfg.Logger, "raft-wal")))
		if err != nil {
			return nil, err
		}
		last, err := w.LastIndex()
		if err != nil {
			w.Close()
			return nil, err
		}
		switch n, err := clearDiscardedTail(wdir, last); {
		case err != nil:
			cfg.Logger.Warn().Err(err).Msg("raft-wal: could not clear what its recovery discarded; a torn write after the next crash may be taken for a written one")
		case n > 0:
			cfg.Logger.Info().Int("bytes", n).Msg("raft-wal: cleared the torn write its recovery discarded")
		}
		return w, nil
	}
	return raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
