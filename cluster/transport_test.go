package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHeartbeatsReachTheMainThread sends a heartbeat-shaped AppendEntries
// (the shape raft.NetworkTransport hands to its fast path) to a transport
// that has a heartbeat handler set: unwrapped, the handler gets it (the
// fast path of #695, which shows the test can tell); wrapped, it must
// arrive through Consumer(), where raft's main goroutine reads.
func TestHeartbeatsReachTheMainThread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		wrap        bool
		wantHandler bool
	}{
		{"NetworkTransport", false, true},
		{"mainThreadTransport", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newTCPTransport(t)
			var to netTransport = recv
			if tc.wrap {
				to = newMainThreadTransport(recv)
			}
			var handled atomic.Int32
			to.SetHeartbeatHandler(func(rpc raft.RPC) {
				handled.Add(1)
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			})
			send := newTCPTransport(t)

			heartbeat := &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte(send.LocalAddr())},
				Term:      1,
			}
			errC := make(chan error, 1)
			go func() {
				errC <- send.AppendEntries("follower", to.LocalAddr(), heartbeat, &raft.AppendEntriesResponse{})
			}()

			consumed := false
			select {
			case rpc := <-to.Consumer():
				consumed = true
				if _, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok {
					t.Fatalf("consumer got %T", rpc.Command)
				}
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case err := <-errC:
				errC <- err // answered by the handler, before any consumer read
			case <-time.After(5 * time.Second):
				t.Fatal("heartbeat neither handled nor consumed within 5s")
			}
			select {
			case err := <-errC:
				if err != nil {
					t.Fatalf("heartbeat: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer to the heartbeat within 5s")
			}
			if got := handled.Load() > 0; got != tc.wantHandler {
				t.Errorf("heartbeat handler called: %v, want %v", got, tc.wantHandler)
			}
			if consumed == tc.wantHandler {
				t.Errorf("heartbeat through Consumer(): %v, want %v", consumed, !tc.wantHandler)
			}
		})
	}
}

func newTCPTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, 5*time.Second, newHclogAdapter(zerologFor(t), "raft-net"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestProgressCountsOnlyTheCurrentTerm(t *testing.T) {
	t.Parallel()
	p := newProgressTracker()
	ok := &raft.AppendEntriesResponse{Success: true}
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2, Entries: []*raft.Log{{Index: 7}, {Index: 8}}}, ok, time.Time{})
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 5}, ok, time.Time{})                                             // an older probe
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2, Entries: []*raft.Log{{Index: 9}}}, &raft.AppendEntriesResponse{}, time.Time{}) // refused
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2}, ok, time.Time{})                                                              // a heartbeat
	if got := p.matchIndex("a", 2); got != 8 {
		t.Errorf("match in term 2 = %d, want 8", got)
	}
	if got := p.matchIndex("a", 3); got != 0 {
		t.Errorf("match in term 3 = %d, want 0 (nothing confirmed in it yet)", got)
	}
	p.raise("a", 3, 4)
	if got := p.matchIndex("a", 3); got != 4 {
		t.Errorf("match in term 3 = %d, want 4", got)
	}
	p.forget("a")
	if got := p.matchIndex("a", 3); got != 0 {
		t.Errorf("match after forget = %d, want 0", got)
	}
}

// TestContactCountsOnlyAnswersInTheRequestsTerm: a peer's answer in the
// request's term (refused or not) confirms leadership as of when the
// request was sent; an answer of a newer term does not, an older request
// answered late does not move the time back, and a new term starts over.
func TestContactCountsOnlyAnswersInTheRequestsTerm(t *testing.T) {
	t.Parallel()
	p := newProgressTracker()
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2}, &raft.AppendEntriesResponse{Term: 2, Success: false}, at(5))
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2}, &raft.AppendEntriesResponse{Term: 2, Success: true}, at(3))
	p.observeAppend("a", &raft.AppendEntriesRequest{Term: 2}, &raft.AppendEntriesResponse{Term: 3}, at(9))
	for _, tc := range []struct {
		term  uint64
		since int
		want  bool
	}{
		{2, 5, true}, {2, 4, true}, {2, 6, false}, {3, 0, false},
	} {
		if got := p.heardSince("a", tc.term, at(tc.since)); got != tc.want {
			t.Errorf("heardSince(term %d, %ds) = %v, want %v", tc.term, tc.since, got, tc.want)
		}
	}
	p.heard("a", 3, at(1))
	if p.heardSince("a", 2, at(0)) || !p.heardSince("a", 3, at(1)) {
		t.Error("a new term does not replace the old term's contact")
	}
}
