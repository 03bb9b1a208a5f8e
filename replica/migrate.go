package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/persist"
	"github.com/rs/zerolog"
)

// A single node's data directory becomes the first member of a cluster
// (serve --cluster --bootstrap on it): its locks, leases and token sequence
// are read as the single node would restore them, made into the state
// machine's snapshot, and the new Raft group starts from that snapshot, so
// every member that joins later receives them. No lock is lost and no token
// goes down: the group's token floor starts above every token the directory
// knows of. The single node's files are then moved aside, into ImportedDir,
// so they are imported once.

// ImportedDir is where a migrated single node's files are kept, under the
// data directory.
const ImportedDir = "single-node-imported"

// prepareMigration sets cc.Seed if its data directory holds a single
// node's data, and reports whether it does: the caller moves the files
// aside once the node is open. A single node's directory is taken only
// with Bootstrap: joining a group would drop its locks, which is what the
// refusal says.
func prepareMigration(cc *cluster.Config, lockerCfg locker.Config, log zerolog.Logger) (bool, error) {
	has, err := persist.HasData(cc.DataDir)
	if err != nil || !has {
		return false, err
	}
	if !cc.Bootstrap {
		return false, fmt.Errorf("replica: %s holds a single node's locks: start this node with --bootstrap to make them the first state of a new cluster, or give it another data directory", cc.DataDir)
	}
	cc.Seed = func() ([]byte, error) {
		seed, rec, err := singleNodeSeed(cc.DataDir, lockerCfg, locker.BootEpochToken(time.Now()), log)
		if err == nil {
			log.Info().Str("dir", cc.DataDir).Int("locks", rec.Locks).Int("leases", rec.Leases).
				Uint64("highest_token", rec.HighestToken).Msg("a new cluster starts from this single node's locks, leases and token sequence")
		}
		return seed, err
	}
	return true, nil
}

// singleNodeSeed reads the single node's data directory dir with the lock
// table settings of cfg and returns the state machine's snapshot of it, and
// what was found. boot is the boot-epoch token, the least first token.
func singleNodeSeed(dir string, cfg locker.Config, boot uint64, log zerolog.Logger) ([]byte, persist.Recovery, error) {
	store, err := persist.Open(persist.Options{
		Dir:       dir,
		Fsync:     persist.FsyncNo,
		Shards:    cfg.Shards,
		Clock:     cfg.Clock,
		LockDelay: cfg.LockDelay,
		Log:       log,
	})
	if err != nil {
		return nil, persist.Recovery{}, err
	}
	defer store.Close()
	single := cfg
	single.Replicated, single.Events = false, nil
	single.Journal = store
	single.FirstToken = store.FirstToken(boot)
	t, err := locker.New(single)
	if err != nil {
		return nil, persist.Recovery{}, err
	}
	defer t.Close()
	if err := store.Load(t); err != nil {
		return nil, persist.Recovery{}, err
	}
	replicated := cfg
	replicated.Events, replicated.Journal, replicated.FirstToken = nil, nil, 1
	fsm, err := lockfsm.New(replicated)
	if err != nil {
		return nil, persist.Recovery{}, err
	}
	defer fsm.Table().Close()
	var restoreErr error
	t.Dump(func(st *locker.LockState) {
		if restoreErr == nil {
			restoreErr = fsm.Table().Restore(st)
		}
	})
	if restoreErr != nil {
		return nil, persist.Recovery{}, fmt.Errorf("replica: importing the single node's locks: %w", restoreErr)
	}
	// The next token is above every token the single node granted.
	fsm.Table().RaiseTokenFloor(single.FirstToken - 1)
	snap, err := fsm.Snapshot()
	if err != nil {
		return nil, persist.Recovery{}, err
	}
	var sink bufferSink
	if err := snap.Persist(&sink); err != nil {
		return nil, persist.Recovery{}, err
	}
	return sink.Bytes(), store.Recovery(), nil
}

// moveSingleNodeFiles moves the single node's files in dir (everything but
// the cluster's own raft directory) into dir/ImportedDir-<time>.
func moveSingleNodeFiles(dir string, now time.Time) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	to := filepath.Join(dir, ImportedDir+"-"+now.UTC().Format("20060102T150405Z"))
	if err := os.Mkdir(to, 0o700); err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() == "raft" || e.Name() == filepath.Base(to) || (len(e.Name()) >= len(ImportedDir) && e.Name()[:len(ImportedDir)] == ImportedDir) {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return "", err
		}
	}
	return to, nil
}

// bufferSink is a raft.SnapshotSink into memory.
type bufferSink struct{ bytes.Buffer }

func (*bufferSink) ID() string    { return "single-node-import" }
func (*bufferSink) Cancel() error { return nil }
func (*bufferSink) Close() error  { return nil }
