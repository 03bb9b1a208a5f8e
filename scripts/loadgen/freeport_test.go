package main

import (
	"net"
	"strconv"
	"testing"
)

// freePort's port binds, and comes from below the ephemeral range, where
// no client connection's source port can take it, when the range is known.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	for range 20 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if low, ok := ephemeralLow(); ok && low > 10100 && p >= low {
			t.Fatalf("port %d is in the ephemeral range (from %d)", p, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d does not bind: %v", p, err)
		}
		l.Close()
	}
}
