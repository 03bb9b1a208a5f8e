package cluster

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
	"github.com/rs/zerolog"
)

// handlers records, per node, the forwarded requests its Handler ran.
// A request named in block makes the Handler report it on entered and
// wait until the channel is closed.
type handlers struct {
	mu      sync.Mutex // guards calls
	calls   map[string][]string
	block   map[string]chan struct{} // set before the cluster starts
	entered chan string
}

func newHandlers() *handlers {
	return &handlers{calls: map[string][]string{}, block: map[string]chan struct{}{}, entered: make(chan string, 16)}
}

// option gives each node a Handler that answers "<node>:<request>".
func (h *handlers) option() func(*Config) {
	return func(c *Config) {
		node := c.NodeID
		c.Handler = func(req []byte) []byte {
			h.mu.Lock()
			h.calls[node] = append(h.calls[node], string(req))
			h.mu.Unlock()
			if release := h.block[string(req)]; release != nil {
				h.entered <- string(req)
				<-release
			}
			return []byte(node + ":" + string(req))
		}
	}
}

func (h *handlers) ran(node string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls[node])
}

func followerOf(ms []*member, leader *member) *member {
	for _, m := range ms {
		if m != leader && m.node.Load() != nil {
			return m
		}
	}
	return nil
}

// TestForward forwards from a follower (the leader's Handler runs it
// exactly once) and from the leader (it runs locally), and checks that a
// request whose Handler blocks holds up no other: plain TCP and mutual
// TLS.
func TestForward(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	for _, tc := range []struct {
		name string
		opts []func(*Config)
	}{
		{"plain", nil},
		{"mTLS", []func(*Config){withTLS(t, f)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandlers()
			release := make(chan struct{})
			h.block["slow"] = release
			_, ms := startCluster(t, 3, append(tc.opts, h.option())...)
			leader := waitLeader(t, ms)
			follower := followerOf(ms, leader)

			got, err := follower.node.Load().Forward([]byte("a"), 5*time.Second)
			if err != nil || string(got) != leader.id()+":a" {
				t.Fatalf("Forward from a follower = %q, %v; want %q", got, err, leader.id()+":a")
			}
			got, err = leader.node.Load().Forward([]byte("b"), 5*time.Second)
			if err != nil || string(got) != leader.id()+":b" {
				t.Fatalf("Forward on the leader = %q, %v", got, err)
			}

			slow := make(chan error, 1)
			go func() {
				_, err := follower.node.Load().Forward([]byte("slow"), settle)
				slow <- err
			}()
			<-h.entered
			for i := range 20 {
				req := fmt.Sprintf("fast-%d", i)
				start := time.Now()
				if _, err := follower.node.Load().Forward([]byte(req), 5*time.Second); err != nil {
					t.Fatalf("Forward %s while another is in the Handler: %v", req, err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("Forward %s took %s behind a slow request", req, d)
				}
			}
			close(release)
			if err := <-slow; err != nil {
				t.Fatalf("the slow Forward: %v", err)
			}

			want := []string{"a", "b", "slow"}
			for i := range 20 {
				want = append(want, fmt.Sprintf("fast-%d", i))
			}
			ran := h.ran(leader.id())
			slices.Sort(ran)
			slices.Sort(want)
			if !slices.Equal(ran, want) {
				t.Fatalf("the leader's Handler ran %q, want each of %q once", ran, want)
			}
			for _, m := range ms {
				if m != leader && len(h.ran(m.id())) > 0 {
					t.Fatalf("%s's Handler ran %q", m.id(), h.ran(m.id()))
				}
			}
		})
	}
}

// TestForwardWithoutLeaderIsNotDelivered kills the leader and one
// follower: the survivor first still names the dead leader (the dial
// fails) and then names none (ErrNoLeader); both fail fast and say the
// request was not delivered.
func TestForwardWithoutLeaderIsNotDelivered(t *testing.T) {
	t.Parallel()
	h := newHandlers()
	_, ms := startCluster(t, 3, h.option())
	leader := waitLeader(t, ms)
	survivor := followerOf(ms, leader)
	leader.kill(t)
	followerOf(ms, survivor).kill(t)

	check := func(what string, wantNoLeader bool) {
		t.Helper()
		start := time.Now()
		_, err := survivor.node.Load().Forward([]byte(what), 5*time.Second)
		if !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrNotApplied) || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("Forward %s: %v, want not delivered", what, err)
		}
		if wantNoLeader && !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Forward %s: %v, want ErrNoLeader", what, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Forward %s took %s to fail", what, d)
		}
		t.Logf("Forward %s: %v", what, err)
	}
	check("dead-leader", false)
	testutil.Eventually(t, settle, "the survivor knows no leader", func() bool {
		id, _ := survivor.node.Load().Leader()
		return id == ""
	})
	check("no-leader", true)
	if _, err := survivor.node.Load().ReadIndex(time.Second); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("ReadIndex without a leader: %v, want ErrNoLeader", err)
	}
}

// TestForwardOutcomeUnknownWhenLeaderDies closes the leader while its
// Handler is running a forwarded request: the caller must hear that the
// outcome is unknown, not that the request was not delivered.
func TestForwardOutcomeUnknownWhenLeaderDies(t *testing.T) {
	t.Parallel()
	h := newHandlers()
	release := make(chan struct{})
	h.block["hang"] = release
	_, ms := startCluster(t, 3, h.option())
	leader := waitLeader(t, ms)
	follower := followerOf(ms, leader)

	result := make(chan error, 1)
	go func() {
		_, err := follower.node.Load().Forward([]byte("hang"), settle)
		result <- err
	}()
	<-h.entered
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		leader.kill(t) // waits for the Handler
	}()
	select {
	case err := <-result:
		if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotDelivered) || errors.Is(err, ErrNotApplied) {
			t.Fatalf("Forward to a leader that died in the Handler: %v, want ErrOutcomeUnknown only", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Forward did not return within 5s of the leader's death")
	}
	close(release)
	<-killed
}

// TestReadIndex reads through ReadIndex and WaitApplied on every node
// right after writes were acknowledged, and checks the writes are there;
// then cuts the leader off and checks it can no longer give a read index
// while the others elect a new leader and write on.
func TestReadIndex(t *testing.T) {
	t.Parallel()
	fnet, ms := startCluster(t, 3)
	acked := apply(t, ms, "w", 10)
	leader := waitLeader(t, ms)
	for _, m := range ms {
		idx, err := m.node.Load().ReadIndex(5 * time.Second)
		if err != nil {
			t.Fatalf("ReadIndex on %s: %v", m.id(), err)
		}
		if err := m.node.Load().WaitApplied(idx, 5*time.Second); err != nil {
			t.Fatalf("WaitApplied(%d) on %s: %v", idx, m.id(), err)
		}
		if h := m.fsm.History(); len(h) < len(acked) {
			t.Fatalf("%s after ReadIndex %d and WaitApplied: %d of %d writes", m.id(), idx, len(h), len(acked))
		}
	}
	if err := ms[0].node.Load().WaitApplied(1<<40, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitApplied of a far index: %v, want ErrTimeout", err)
	}

	// Cut off, the leader still takes itself for the leader for up to its
	// lease timeout, and answers to what it sent before the cut may still
	// arrive and satisfy raft's VerifyLeader (TestReadIndexNeedsFreshAnswers
	// makes that certain); ReadIndex must fail all the same, and keep
	// failing once the others have elected a new leader and committed a
	// write it does not have.
	fnet.isolate(leader.cfg.RaftAddr)
	if idx, err := leader.node.Load().ReadIndex(2 * time.Second); err == nil {
		t.Fatalf("the cut-off leader gave read index %d", idx)
	} else {
		t.Logf("ReadIndex on the cut-off leader: %v", err)
	}
	var rest []*member
	for _, m := range ms {
		if m != leader {
			rest = append(rest, m)
		}
	}
	// Through the new leader the others elect.
	acked = append(acked, apply(t, rest, "after", 1)...)
	if idx, err := leader.node.Load().ReadIndex(time.Second); err == nil {
		t.Fatalf("the deposed leader gave read index %d", idx)
	} else {
		t.Logf("ReadIndex on the deposed leader: %v", err)
	}

	fnet.heal()
	waitLeader(t, ms)
	for _, m := range ms {
		var idx uint64
		testutil.Eventually(t, settle, "a read index on "+m.id(), func() bool {
			var err error
			idx, err = m.node.Load().ReadIndex(time.Second)
			return err == nil
		})
		if err := m.node.Load().WaitApplied(idx, 5*time.Second); err != nil {
			t.Fatalf("WaitApplied(%d) on %s: %v", idx, m.id(), err)
		}
		if h := m.fsm.History(); !slices.Equal(h[:len(acked)], acked) {
			t.Fatalf("%s after the heal: %q, want %q first", m.id(), h, acked)
		}
	}
}

// TestReadIndexNeedsFreshAnswers cuts the leader off and makes its
// VerifyLeader succeed, as raft's does when answers to requests sent
// before the call arrive late: ReadIndex must still fail, for no quorum
// answered anything sent after it began.
func TestReadIndexNeedsFreshAnswers(t *testing.T) {
	t.Parallel()
	fnet, ms := startCluster(t, 3)
	leader := waitLeader(t, ms)
	n := leader.node.Load()
	if _, err := n.ReadIndex(5 * time.Second); err != nil {
		t.Fatalf("ReadIndex before the cut: %v", err)
	}
	fnet.isolate(leader.cfg.RaftAddr)
	n.verify.mu.Lock()
	n.verify.verifyLeader = func() error {
		// A round takes a round trip; stale answers satisfy it.
		<-time.After(5 * time.Millisecond)
		return nil
	}
	n.verify.mu.Unlock()
	idx, err := n.ReadIndex(time.Second)
	if err == nil {
		t.Fatalf("ReadIndex on a cut-off leader whose VerifyLeader succeeds = %d", idx)
	}
	if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReadIndex: %v, want ErrTimeout or ErrNotLeader", err)
	}
}

// TestJoinByAddressOfFollower starts a node with Config.Join naming a
// follower (over mutual TLS): the follower passes the request to the
// leader, which adds the node as a voter, and the node gets every write.
func TestJoinByAddressOfFollower(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	fnet, ms := startCluster(t, 2, withTLS(t, f))
	acked := apply(t, ms, "before", 5)
	leader := waitLeader(t, ms)
	via := followerOf(ms, leader)

	n3 := newMember(t, fnet, testutil.NewTestLog(t), "n3", false, withTLS(t, f), func(c *Config) { c.Join = []string{via.cfg.RaftAddr} })
	select {
	case <-n3.node.Load().Joined():
	case <-time.After(settle):
		t.Fatal("n3 did not join")
	}
	ms = append(ms, n3)
	servers, err := leader.node.Load().Servers()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(servers, func(s Server) bool { return s.ID == "n3" }); i < 0 || !servers[i].Voter || servers[i].Addr != n3.cfg.RaftAddr {
		t.Fatalf("servers after the join: %+v", servers)
	}
	// Through whichever node leads now: under load the first leader may
	// have stepped down meanwhile (its 400 ms lease ran out).
	acked = append(acked, apply(t, ms, "after", 5)...)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history = %q, want %q", got, acked)
	}

	// Membership changes from a follower go to the leader.
	voters := func() int {
		servers, err := waitLeader(t, ms).node.Load().Servers()
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, s := range servers {
			if s.Voter {
				count++
			}
		}
		return count
	}
	if err := via.node.Load().RemoveVia("n3"); err != nil {
		t.Fatalf("RemoveVia from a follower: %v", err)
	}
	if got := voters(); got != 2 {
		t.Fatalf("%d voters after RemoveVia, want 2", got)
	}
	if err := via.node.Load().AddVia("n3", n3.cfg.RaftAddr); err != nil {
		t.Fatalf("AddVia from a follower: %v", err)
	}
	if got := voters(); got != 3 {
		t.Fatalf("%d voters after AddVia, want 3", got)
	}
}

// TestStaticPeers starts three nodes with the same Peers list and empty
// stores: they form one cluster without Bootstrap or Join.
func TestStaticPeers(t *testing.T) {
	t.Parallel()
	var peers []Peer
	for i := 1; i <= 3; i++ {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), Addr: freeAddr(t)})
	}
	fnet, log := newFaultNet(), testutil.NewTestLog(t)
	var ms []*member
	for _, p := range peers {
		ms = append(ms, newMember(t, fnet, log, p.ID, false, func(c *Config) {
			c.RaftAddr, c.Peers = p.Addr, peers
		}))
	}
	leader := waitLeader(t, ms)
	acked := apply(t, ms, "static", 5)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history = %q, want %q", got, acked)
	}
	if servers, err := leader.node.Load().Servers(); err != nil || len(servers) != 3 {
		t.Fatalf("servers = %+v, %v", servers, err)
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago (static peers need their addresses before the nodes listen).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestStrangerCannotForwardOrJoin sends forward and join requests over the
// RPC from peers the cluster does not trust (a certificate of the cluster's
// CA that AllowedPeer refuses, one from another CA): none reaches a
// Handler or changes the membership.
func TestStrangerCannotForwardOrJoin(t *testing.T) {
	t.Parallel()
	f, other := tlstest.New(t, t.TempDir()), tlstest.New(t, t.TempDir())
	h := newHandlers()
	nodes := []string{"n1", "n2", "n3"}
	_, ms := startCluster(t, 3, withTLS(t, f), h.option(), func(c *Config) {
		c.AllowedPeer = func(cn string) bool { return slices.Contains(nodes, cn) }
	})
	leader := waitLeader(t, ms)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"name not allowed", f.NodeConfig(t, "n4")},
		{"another CA", other.NodeConfig(t, "n2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.InsecureSkipVerify = true // a stranger need not check whom it talks to
			mux, err := listenMux("127.0.0.1:0", tc.cfg, nil, time.Second, zerologFor(t))
			if err != nil {
				t.Fatal(err)
			}
			defer mux.Close()
			client := newRPCClient(mux)
			defer client.close()
			deadline := time.Now().Add(5 * time.Second)
			if f, err := client.call(leader.cfg.RaftAddr, kindForward, []byte("stranger"), deadline, nil); err == nil {
				t.Fatalf("the stranger's forward was answered: %+v", f)
			}
			join := serverRef{id: "n4", addr: mux.Addr().String()}.encode()
			if f, err := client.call(leader.cfg.RaftAddr, kindJoin, join, deadline, nil); err == nil {
				t.Fatalf("the stranger's join was answered: %+v", f)
			}
		})
	}
	for _, m := range ms {
		if ran := h.ran(m.id()); len(ran) > 0 {
			t.Fatalf("%s's Handler ran %q", m.id(), ran)
		}
	}
	if servers, err := leader.node.Load().Servers(); err != nil || len(servers) != 3 {
		t.Fatalf("servers = %+v, %v", servers, err)
	}
}

// TestOversizedFrameClosesStream announces a frame one byte over the limit
// on an RPC stream: the node closes the stream without reading it. A
// request over the limit is refused before anything is sent.
func TestOversizedFrameClosesStream(t *testing.T) {
	t.Parallel()
	_, ms := startCluster(t, 1)
	n := waitLeader(t, ms).node.Load()
	c, err := n.mux.dial(n.Addr(), streamRPC, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	hdr = append(hdr, kindForward, 0, 0, 0, 0, 0, 0, 0, 1)
	if _, err := c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(settle))
	if k, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the stream stayed open and answered %d bytes", k)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the stream is still open")
	}

	client := newRPCClient(n.mux)
	defer client.close()
	_, err = client.call(n.Addr(), kindForward, make([]byte, maxFrame), time.Now().Add(time.Second), nil)
	if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("a request over the limit: %v, want ErrFrameTooLarge, not delivered", err)
	}
}

// BenchmarkForward sends forwarded requests from 64 goroutines to one
// node's Handler (an echo) over loopback, with connections multiplexed
// (many requests in flight on each, the design) or used one request at a
// time from a pool, as many connections as callers at most.
func BenchmarkForward(b *testing.B) {
	for _, tc := range []struct {
		name        string
		conns       int
		exclusively bool
	}{
		{"multiplexed/conns=1", 1, false},
		{"multiplexed/conns=2", 2, false},
		{"multiplexed/conns=8", 8, false},
		{"one-in-flight/conns=8", 8, true},
		{"one-in-flight/conns=64", 64, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.NodeID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", b.TempDir(), true
			cfg.FSM = &historyFSM{}
			cfg.Handler = func(req []byte) []byte { return req }
			n, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			mux, err := listenMux("127.0.0.1:0", nil, nil, time.Second, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			defer mux.Close()
			client := newRPCClient(mux)
			client.perPeer = tc.conns
			defer client.close()
			addr := n.Addr()
			idle := make(chan *rpcConn, tc.conns)
			if tc.exclusively {
				for range tc.conns {
					rc, err := client.conn(addr, time.Now().Add(time.Second))
					if err != nil {
						b.Fatal(err)
					}
					idle <- rc
				}
			}
			req := make([]byte, 64)
			b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					deadline := time.Now().Add(5 * time.Second)
					var err error
					if tc.exclusively {
						rc := <-idle
						_, err = client.roundTrip(rc, addr, kindForward, req, deadline, nil)
						idle <- rc
					} else {
						_, err = client.call(addr, kindForward, req, deadline, nil)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestCallerWaitsForAnotherDialOnlyUntilItsDeadline dials, over TLS, a
// port that accepts and never answers, so the dial hangs in the handshake:
// a second caller for the same connection gives up at its own deadline
// (not delivered) instead of waiting for the first caller's dial.
func TestCallerWaitsForAnotherDialOnlyUntilItsDeadline(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	mux, err := listenMux("127.0.0.1:0", f.NodeConfig(t, "n1"), nil, time.Second, zerologFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	client := newRPCClient(mux)
	client.perPeer = 1
	defer client.close()

	first := make(chan error, 1)
	go func() {
		_, err := client.call(silent.Addr().String(), kindForward, nil, time.Now().Add(1500*time.Millisecond), nil)
		first <- err
	}()
	testutil.Eventually(t, settle, "the first dial under way", func() bool {
		client.mu.Lock()
		defer client.mu.Unlock()
		slots := client.peers[silent.Addr().String()]
		if slots == nil {
			return false
		}
		slots[0].mu.Lock()
		defer slots[0].mu.Unlock()
		return slots[0].dialing != nil
	})
	start := time.Now()
	_, err = client.call(silent.Addr().String(), kindForward, nil, time.Now().Add(200*time.Millisecond), nil)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the second caller waited %s, past its 200ms deadline", d)
	}
	if !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("the second caller: %v, want not delivered", err)
	}
	if err := <-first; !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("the first caller: %v, want not delivered", err)
	}
}
