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
	// LogStoreBolt is raft-boltdb/v2 (a B+tree in one file, bbolt), what
	// Consul, Nomad and Vault have used for years: two fsyncs per write.
	LogStoreBolt = "bolt"
	// LogStoreWAL is hashicorp/raft-wal (segment files and a small meta
	// database): one fsync per write, so a commit costs about half; its
	// authors still call it experimental, and its recovery can take a torn
	// write for a written one when a discarded torn write's bytes follow
	// it, which is why it is not the default. See docs/cluster.md.
	LogStoreWAL = "wal"
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
// vote are there, and starting over empty would lose them.
func openLogStore(dir string, cfg Config) (logStore, error) {
	kind := cfg.LogStore
	if kind == "" {
		kind = LogStoreBolt
	}
	hasBolt, err := exists(filepath.Join(dir, boltFile))
	if err != nil {
		return nil, err
	}
	hasWAL, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		return nil, err
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
		return raftwal.Open(wdir, raftwal.WithLogger(newHclogAdapter(cfg.Logger, "raft-wal")))
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
