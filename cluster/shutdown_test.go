package cluster

import (
	"errors"
	"io"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// gatedFSM holds its first Apply until gate is closed, so that the entries
// committed after it wait in raft's queue to the FSM goroutine.
type gatedFSM struct {
	historyFSM
	entered chan struct{} // receives once, when the first Apply starts
	gate    chan struct{}
	first   bool
}

func (f *gatedFSM) Apply(l *raft.Log) any {
	if !f.first && string(l.Data) != "ungated" {
		f.first = true
		f.entered <- struct{}{}
		<-f.gate
	}
	return f.historyFSM.Apply(l)
}

func (f *gatedFSM) Snapshot() (raft.FSMSnapshot, error) { return f.historyFSM.Snapshot() }
func (f *gatedFSM) Restore(rc io.ReadCloser) error      { return f.historyFSM.Restore(rc) }

// TestApplyEndsWhenShutdownDropsItsEntry: hashicorp/raft's FSM goroutine, on
// Shutdown, may return with committed batches still queued for it, and
// never answers their futures (hashicorp/raft#498). Apply must still
// return, with ErrOutcomeUnknown, or a server closing while its clients
// propose waits for ever for the handlers that called it (CI hung so, in
// the server's TestClusterForwardsManyClients). Each round queues three
// batches behind an Apply the FSM holds, closes the node, then lets the
// FSM go: raft's FSM goroutine picks between its queue and shutdown at
// random, so a round misses the case with chance 1/8 and four rounds with
// 1/4096.
func TestApplyEndsWhenShutdownDropsItsEntry(t *testing.T) {
	t.Parallel()
	for round := range 4 {
		fsm := &gatedFSM{entered: make(chan struct{}, 1), gate: make(chan struct{})}
		cfg := DefaultConfig()
		cfg.NodeID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", t.TempDir(), true
		cfg.Logger = zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel)
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = testHeartbeat, testHeartbeat
		cfg.LeaderLeaseTimeout, cfg.CommitTimeout = testLease, testCommit
		cfg.FSM = fsm
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, settle, "a leader", n.IsLeader)
		if round == 0 {
			f := n.raft.Apply([]byte("ungated"), 0)
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if shutdownChOf(reflect.TypeOf(f)) == nil {
				t.Fatal("raft's ApplyFuture has no ShutdownCh field that endOnShutdown can set: see hashicorp/raft#498 and endOnShutdown")
			}
		}

		applied := make(chan error, 4)
		propose := func(cmd string) {
			go func() {
				_, err := n.Apply([]byte(cmd), 0)
				applied <- err
			}()
		}
		commitIndex := func() uint64 {
			i, _ := strconv.ParseUint(n.raft.Stats()["commit_index"], 10, 64)
			return i
		}
		propose("held")
		<-fsm.entered
		for i := range 3 {
			before := commitIndex()
			propose("queued-" + strconv.Itoa(i))
			testutil.Eventually(t, settle, "the entry committed", func() bool { return commitIndex() > before })
		}
		closed := make(chan error, 1)
		go func() { closed <- n.Close() }()
		testutil.Eventually(t, settle, "raft shut down", func() bool { return n.raft.State() == raft.Shutdown })
		close(fsm.gate)

		deadline := time.After(settle)
		for range 4 {
			select {
			case err := <-applied:
				if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
					t.Errorf("round %d: Apply = %v, want success or ErrOutcomeUnknown", round, err)
				}
			case <-deadline:
				t.Fatalf("round %d: an Apply did not return within %s of Close", round, settle)
			}
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("round %d: Close = %v", round, err)
			}
		case <-deadline:
			t.Fatalf("round %d: Close did not return within %s", round, settle)
		}
	}
}
