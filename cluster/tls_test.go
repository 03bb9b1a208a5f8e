package cluster

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
)

// withTLS gives each node a certificate from f's CA named after its ID.
func withTLS(t testing.TB, f *tlstest.Files) func(*Config) {
	return func(c *Config) { c.TLS = f.NodeConfig(t, c.NodeID) }
}

// peerTransport is a raft transport outside any cluster, to send RPCs to
// the cluster's nodes as a stranger would, through a stream layer like a
// node's (so with the marker byte): over TLS with tlsCfg, or plain TCP if
// it is nil.
func peerTransport(t testing.TB, tlsCfg *tls.Config) *raft.NetworkTransport {
	t.Helper()
	stream, err := listenMux("127.0.0.1:0", tlsCfg, nil, 2*time.Second, zerologFor(t))
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 1, Timeout: 2 * time.Second,
		Logger: newHclogAdapter(zerologFor(t), "stranger"),
	})
	t.Cleanup(func() { trans.Close() })
	return trans
}

func TestTLSClusterReplicatesAndFailsOver(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	_, ms := startCluster(t, 3, withTLS(t, f))

	// The Raft port speaks TLS and presents the node's own certificate.
	for _, m := range ms {
		c, err := tls.Dial("tcp", m.cfg.RaftAddr, f.NodeConfig(t, "probe"))
		if err != nil {
			t.Fatalf("TLS to %s's Raft port: %v", m.id(), err)
		}
		if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != m.id() {
			t.Errorf("%s's Raft port presents %q", m.id(), cn)
		}
		c.Close()
	}

	acked := apply(t, ms, "before", 20)
	waitSameHistory(t, ms, len(acked))
	old := waitLeader(t, ms)
	old.kill(t)
	leader := waitLeader(t, ms)
	if leader == old {
		t.Fatal("the killed node is still leader")
	}
	acked = append(acked, apply(t, ms, "after", 20)...)
	old.start(t)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history after failover and restart = %q, want %q", got, acked)
	}
}

// TestTLSRefusesStrangers sends, from outside the cluster, the RPC that
// would depose its leader (AppendEntries of a much higher term) and checks
// that only a peer the cluster trusts gets through: no certificate, one
// from another CA, or one from the cluster's CA whose name AllowedPeer
// refuses, are cut off in the handshake, and the leader keeps its term and
// commits. The trusted peer sends a harmless RequestVote instead, to show
// the same transport does reach the node.
func TestTLSRefusesStrangers(t *testing.T) {
	t.Parallel()
	f, other := tlstest.New(t, t.TempDir()), tlstest.New(t, t.TempDir())
	nodes := []string{"n1", "n2", "n3"}
	_, ms := startCluster(t, 3, withTLS(t, f), func(c *Config) {
		c.AllowedPeer = func(cn string) bool { return slices.Contains(nodes, cn) }
		// Each stranger's visit checks that the leader still leads in its
		// term: leases of 1 s, not 400 ms, so that a loaded machine does
		// not make it step down meanwhile (CI did, in every case after
		// the first, its term unchanged).
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	})
	leader := waitLeader(t, ms)
	term := leader.node.Load().Term()
	target := raft.ServerAddress(leader.cfg.RaftAddr)

	trusted := peerTransport(t, f.NodeConfig(t, "n3"))
	var vote raft.RequestVoteResponse
	if err := trusted.RequestVote("", target, &raft.RequestVoteRequest{
		RPCHeader: header(trusted, "n3"), Term: 0,
	}, &vote); err != nil {
		t.Fatalf("a peer with a node's certificate cannot reach the leader: %v", err)
	}

	for _, tc := range []struct {
		name string
		cfg  *tls.Config // nil: plain TCP
	}{
		{"plain TCP", nil},
		{"TLS without a certificate", &tls.Config{}},
		{"certificate from another CA", other.NodeConfig(t, "n2")},
		{"CA's node certificate with a name not allowed", f.NodeConfig(t, "n4")},
		{"CA's RESP client certificate", withCAs(f.ClientConfig(t, "alice"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg != nil {
				// A stranger need not check whom it talks to.
				tc.cfg.InsecureSkipVerify = true
			}
			stranger := peerTransport(t, tc.cfg)
			var resp raft.AppendEntriesResponse
			err := stranger.AppendEntries("n1", target, &raft.AppendEntriesRequest{
				RPCHeader: header(stranger, "n1"),
				Term:      term + 100,
			}, &resp)
			if err == nil {
				t.Fatalf("the stranger's AppendEntries got an answer: %+v", resp)
			}
			if got := leader.node.Load().Term(); got != term || !leader.node.Load().IsLeader() {
				t.Fatalf("after the stranger's AppendEntries: term %d (was %d), leader %v", got, term, leader.node.Load().IsLeader())
			}
			apply(t, ms, strings.ReplaceAll(tc.name, " ", "-"), 1)
		})
	}
}

// header is the RPC header of a sender calling itself id.
func header(from *raft.NetworkTransport, id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(from.LocalAddr())}
}

// withCAs lets a RESP client's config (RootCAs only) dial as a node would.
func withCAs(c *tls.Config) *tls.Config {
	c.ClientCAs, c.ServerName = c.RootCAs, ""
	return c
}

// TestTLSNodeFromAnotherCACannotJoin adds, as an operator might by
// mistake, a node whose certificate another CA signed: the leader cannot
// replicate to it, so Join fails without making it a voter, it receives
// nothing, and the cluster keeps committing.
func TestTLSNodeFromAnotherCACannotJoin(t *testing.T) {
	t.Parallel()
	f, other := tlstest.New(t, t.TempDir()), tlstest.New(t, t.TempDir())
	fnet, ms := startCluster(t, 3, withTLS(t, f), func(c *Config) { c.CatchUpTimeout = 3 * time.Second })
	acked := apply(t, ms, "before", 5)

	rogue := newMember(t, fnet, testutil.NewTestLog(t), "n4", false, withTLS(t, other))
	err := joinThroughLeader(t, ms, rogue.id(), rogue.cfg.RaftAddr)
	leader := waitLeader(t, ms)
	if !errors.Is(err, ErrCatchUpTimeout) {
		t.Fatalf("Join of a node from another CA: %v, want ErrCatchUpTimeout", err)
	}
	servers, err := leader.node.Load().Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == rogue.id() && s.Voter {
			t.Fatalf("the rogue node became a voter: %+v", servers)
		}
	}
	if err := leader.node.Load().RemoveServer(rogue.id()); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, apply(t, ms, "after", 5)...)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history = %q, want %q", got, acked)
	}
	if h := rogue.fsm.History(); len(h) != 0 {
		t.Fatalf("the rogue node received %q", h)
	}
	if rogue.node.Load().AppliedIndex() != 0 {
		t.Fatalf("the rogue node applied up to %d", rogue.node.Load().AppliedIndex())
	}
}

// TestTLSSilentConnectionIsCut opens a TCP connection to a node's Raft
// port and sends nothing: the node closes it once the handshake deadline
// has passed. A peer that did complete its handshake keeps its pooled
// connection past that deadline.
func TestTLSSilentConnectionIsCut(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	const deadline = 500 * time.Millisecond
	cfg := DefaultConfig()
	cfg.NodeID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", t.TempDir(), true
	cfg.FSM, cfg.Logger, cfg.TLS = &historyFSM{}, zerologFor(t), f.NodeConfig(t, "n1")
	n, err := open(cfg, testHooks{handshakeTimeout: deadline})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	target := raft.ServerAddress(n.Addr())

	peer := peerTransport(t, f.NodeConfig(t, "n2"))
	vote := func() error {
		var resp raft.RequestVoteResponse
		return peer.RequestVote("n1", target, &raft.RequestVoteRequest{RPCHeader: header(peer, "n2")}, &resp)
	}
	if err := vote(); err != nil {
		t.Fatalf("RequestVote from a trusted peer: %v", err)
	}

	start := time.Now()
	c, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(settle))
	_, err = c.Read(make([]byte, 1))
	elapsed := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the silent connection is still open after %s", elapsed)
	}
	if err != io.EOF && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read on the silent connection: %v, want EOF or reset", err)
	}
	if elapsed < deadline {
		t.Fatalf("the silent connection was cut after %s, before the %s deadline", elapsed, deadline)
	}

	// The pooled connection is older than the silent one: its handshake
	// deadline has passed too, and it must still work.
	if err := vote(); err != nil {
		t.Fatalf("RequestVote on the pooled connection after the handshake deadline: %v", err)
	}
}

func TestTLSConfigValidate(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	base := func() Config {
		c := DefaultConfig()
		c.NodeID, c.RaftAddr, c.DataDir, c.FSM = "n1", "127.0.0.1:0", t.TempDir(), &historyFSM{}
		c.TLS = f.NodeConfig(t, "n1")
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("valid TLS config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no certificate", func(c *Config) { c.TLS.Certificates = nil }, "no certificate"},
		{"no RootCAs", func(c *Config) { c.TLS.RootCAs = nil }, "RootCAs"},
		{"no ClientCAs", func(c *Config) { c.TLS.ClientCAs = nil }, "ClientCAs"},
		{"skip verify", func(c *Config) { c.TLS.InsecureSkipVerify = true }, "InsecureSkipVerify"},
		{"config per client", func(c *Config) {
			c.TLS.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return nil, nil }
		}, "GetConfigForClient"},
		{"TLS 1.1 at most", func(c *Config) { c.TLS.MaxVersion = tls.VersionTLS11 }, "TLS 1.2"},
		{"AllowedPeer without TLS", func(c *Config) {
			c.TLS, c.AllowedPeer = nil, func(string) bool { return true }
		}, "AllowedPeer needs TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestPeerConfigsLeaveTheCallersAlone checks the configs a node derives
// require client certificates and TLS 1.2 without changing the caller's,
// which the server may also use for RESP.
func TestPeerConfigsLeaveTheCallersAlone(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	c := f.NodeConfig(t, "n1")
	c.MinVersion = tls.VersionTLS10
	server, client := peerConfigs(c, func(string) bool { return true })
	if server.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("server ClientAuth = %v", server.ClientAuth)
	}
	if server.MinVersion != tls.VersionTLS12 || client.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x/%x, want TLS 1.2", server.MinVersion, client.MinVersion)
	}
	if server.VerifyConnection == nil || client.VerifyConnection == nil {
		t.Error("AllowedPeer is not checked")
	}
	if c.ClientAuth != tls.NoClientCert || c.MinVersion != tls.VersionTLS10 || c.VerifyConnection != nil {
		t.Errorf("the caller's config changed: %+v", c)
	}
}
