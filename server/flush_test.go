package server

import (
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/persist"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"
)

// commitProbe stands for a transport's socket writer: it notes whether the
// data directory still had changes to commit when the replies reached it.
type commitProbe struct {
	store          *persist.Store
	writes         int
	pendingAtWrite bool
}

func (p *commitProbe) Write(b []byte) (int, error) {
	p.writes++
	p.pendingAtWrite = p.pendingAtWrite || p.store.Pending()
	return len(b), nil
}

// TestFlushCommitsBeforeWriting: conn.flush, the flush step of both
// transports, makes what the commands changed durable before the first byte
// of their replies reaches the transport's writer.
func TestFlushCommitsBeforeWriting(t *testing.T) {
	srv, err := New(persistConfig(t, t.TempDir()), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	probe := &commitProbe{store: srv.store}
	c := newConn(srv, "test", "test")
	c.wr = redcon.NewWriter(probe)
	pendingBeforeFlush := 0
	const rounds = 20
	for i := range rounds {
		key := fmt.Sprintf("k%d", i)
		c.dispatch([][]byte{[]byte("ACQUIRE"), []byte(key), []byte("30000")})
		c.unflushed = true
		// The store's background work commits every 100ms too; a round it
		// overtook proves nothing, so count the rounds it did not.
		if srv.store.Pending() {
			pendingBeforeFlush++
		}
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		if probe.pendingAtWrite {
			t.Fatalf("round %d: the replies were written with the grant not yet committed", i)
		}
	}
	if probe.writes != rounds || pendingBeforeFlush == 0 {
		t.Fatalf("%d writes for %d rounds, %d with a commit pending before the flush", probe.writes, rounds, pendingBeforeFlush)
	}
	if c.unflushed {
		t.Fatal("flush left unflushed set")
	}
}
