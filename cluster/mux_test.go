package cluster

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/tlstest"
)

// TestMuxRefusesUnmarkedStreams speaks to a node's Raft port as a peer
// without the marker byte would: raft's own TCP transport (whose first
// byte is a raft message type) and a raw connection starting with an
// unknown byte are closed, while a marked raft stream is served. Plain
// TCP and mutual TLS alike.
func TestMuxRefusesUnmarkedStreams(t *testing.T) {
	t.Parallel()
	f := tlstest.New(t, t.TempDir())
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"mTLS", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*Config)
			if tc.tls {
				opts = append(opts, withTLS(t, f))
			}
			_, ms := startCluster(t, 1, opts...)
			n := waitLeader(t, ms).node.Load()
			target := raft.ServerAddress(n.Addr())

			var peerTLS = f.NodeConfig(t, "n2")
			if !tc.tls {
				peerTLS = nil
			}
			marked := peerTransport(t, peerTLS)
			var vote raft.RequestVoteResponse
			if err := marked.RequestVote("n1", target, &raft.RequestVoteRequest{RPCHeader: header(marked, "n2")}, &vote); err != nil {
				t.Fatalf("a marked raft stream: %v", err)
			}

			if !tc.tls {
				unmarked := newTCPTransport(t)
				err := unmarked.RequestVote("n1", target, &raft.RequestVoteRequest{RPCHeader: header(unmarked, "n2")}, &vote)
				if err == nil {
					t.Fatal("raft's TCP transport without the marker got an answer")
				}
			}

			c, err := n.mux.dial(n.Addr(), 'X', time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(settle))
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a stream with an unknown marker is still open")
			}
			if err == nil {
				t.Fatal("a stream with an unknown marker got an answer")
			}
		})
	}
}
