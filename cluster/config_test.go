package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := func() Config {
		c := DefaultConfig()
		c.NodeID, c.RaftAddr, c.DataDir, c.FSM = "n1", "127.0.0.1:7000", "/tmp/x", &historyFSM{}
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "NodeID"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"no fsm", func(c *Config) { c.FSM = nil }, "FSM"},
		{"no port", func(c *Config) { c.RaftAddr = "127.0.0.1" }, "RaftAddr"},
		{"unspecified host", func(c *Config) { c.RaftAddr = "0.0.0.0:7000" }, "unspecified"},
		{"empty host", func(c *Config) { c.RaftAddr = ":7000" }, "unspecified"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout }, "LeaderLeaseTimeout"},
		{"no transfer timeout", func(c *Config) { c.TransferTimeout = 0 }, "TransferTimeout"},
		{"no catch-up timeout", func(c *Config) { c.CatchUpTimeout = 0 }, "CatchUpTimeout"},
		{"unknown log store", func(c *Config) { c.LogStore = "rocks" }, "LogStore"},
		{"peers and join", func(c *Config) {
			c.Peers, c.Join = []Peer{{"n1", c.RaftAddr}}, []string{"127.0.0.1:7001"}
		}, "exclusive"},
		{"bootstrap and join", func(c *Config) { c.Bootstrap, c.Join = true, []string{"127.0.0.1:7001"} }, "exclusive"},
		{"bootstrap and peers", func(c *Config) { c.Bootstrap, c.Peers = true, []Peer{{"n1", c.RaftAddr}} }, "exclusive"},
		{"peers without this node", func(c *Config) { c.Peers = []Peer{{"n2", "127.0.0.1:7001"}} }, "does not list"},
		{"peers with another address", func(c *Config) { c.Peers = []Peer{{"n1", "127.0.0.1:7001"}} }, "RaftAddr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: %v, want an error about %s", err, tc.wantErr)
			}
			if _, err := Open(c); err == nil {
				t.Fatal("Open accepted an invalid config")
			}
		})
	}
}

// TestBootstrapOnlyOnce restarts a bootstrapped single node with Bootstrap
// still set: it must come back from its stores, not start a new cluster.
func TestBootstrapOnlyOnce(t *testing.T) {
	t.Parallel()
	_, ms := startCluster(t, 1)
	m := ms[0]
	acked := apply(t, ms, "a", 5)
	m.stop(t)
	if m.node.Load() != nil {
		t.Fatal("node still set after stop")
	}
	m.start(t)
	waitLeader(t, ms)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history after restart = %q, want %q", got, acked)
	}
	if _, err := m.node.Load().Apply([]byte("b"), time.Second); err != nil {
		t.Fatalf("apply after restart: %v", err)
	}
}

// TestLogStoreKindIsKept restarts a node with the other kind of log store
// than its data directory holds: refused, in both directions, since
// starting over empty would lose its log and its vote. ("" opens the kind
// the directory holds: TestLogStoreDefault.)
func TestLogStoreKindIsKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ created, reopened string }{
		{LogStoreBolt, LogStoreWAL},
		{LogStoreWAL, LogStoreBolt},
		{"", LogStoreBolt}, // "" makes raft-wal
	} {
		t.Run(tc.created+"-then-"+tc.reopened, func(t *testing.T) {
			t.Parallel() // each case has a node and a data directory of its own
			_, ms := startCluster(t, 1, func(c *Config) { c.LogStore = tc.created })
			m := ms[0]
			apply(t, ms, "a", 3)
			m.stop(t)
			c := m.cfg
			c.LogStore = tc.reopened
			if n, err := Open(c); err == nil {
				n.Close()
				t.Fatalf("Open with LogStore %q of a %q data directory succeeded", tc.reopened, tc.created)
			} else if !strings.Contains(err.Error(), "log store") {
				t.Fatalf("Open: %v, want an error about the log store", err)
			}
			m.start(t) // the kind it was created with still opens
			waitLeader(t, ms)
		})
	}
}
