package server

import (
	"testing"
	"time"
)

func TestSmokeGoRedis(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	c := ctx(t)
	tok, err := rdb.Do(c, "ACQUIRE", "k", 30000).Uint64()
	if err != nil || tok == 0 {
		t.Fatalf("ACQUIRE = %d, %v", tok, err)
	}
	if n, err := rdb.Do(c, "VERIFY", "k", tok).Int(); err != nil || n != 1 {
		t.Fatalf("VERIFY = %d, %v", n, err)
	}
	_ = time.Second
}

func TestSmokeInline(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial()
	rc.send("PING\r\n")
	if got := rc.line(); got != "+PONG" {
		t.Fatalf("got %q", got)
	}
}
