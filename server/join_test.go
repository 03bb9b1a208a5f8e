package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/rs/zerolog"
)

// lineSink is a log writer that passes each line on to a channel, dropping
// lines while nobody reads.
type lineSink chan string

func (s lineSink) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		select {
		case s <- string(line):
		default:
		}
	}
	return len(p), nil
}

// TestJoinGivenARESPAddress: a node whose Join names a member's RESP address
// (its --addr) rather than its Raft address says so, within a second or so,
// naming the address and the flag it wants. It used to wait for the join
// request's timeout and log "outcome unknown ... no reply" (or "... EOF"),
// again and again.
func TestJoinGivenARESPAddress(t *testing.T) {
	n1 := startClusterNode(t, "n1", t.TempDir(), true)
	waitLeader(t, n1)

	lines := make(lineSink, 64)
	cc := cluster.DefaultConfig()
	cc.NodeID, cc.RaftAddr, cc.DataDir, cc.Join = "n2", "127.0.0.1:0", t.TempDir(), []string{n1.addr}
	cluster.TestingTimeouts(&cc)
	startServerLogging(t, zerolog.New(lines).Level(zerolog.WarnLevel), func(c *Config) { c.Cluster = &cc })

	deadline := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case line := <-lines:
			seen = append(seen, line)
			if strings.Contains(line, "join") && strings.Contains(line, n1.addr) {
				want := []string{`"level":"error"`, n1.addr + " answered as a RESP server", "--raft-addr"}
				for _, w := range want {
					if !strings.Contains(line, w) {
						t.Fatalf("the join's log line %s\nwants %q", line, w)
					}
				}
				t.Log(line)
				return
			}
		case <-deadline:
			t.Fatalf("no log line about the join through %s within 10s; saw:\n%s", n1.addr, strings.Join(seen, "\n"))
		}
	}
}
