package admin

import (
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// TestCloseBounded: a request that does not end (a long CPU profile, say)
// holds Close up for Config.ShutdownTimeout, no longer, and its connection
// is closed.
func TestCloseBounded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 200 * time.Millisecond
	s, err := start(cfg, h, zerolog.New(testutil.NewTestLog(t)))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + s.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	begin := time.Now()
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a request in flight")
	}
	if took := time.Since(begin); took < cfg.ShutdownTimeout {
		t.Errorf("Close returned after %v, before the shutdown timeout %v", took, cfg.ShutdownTimeout)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Error("the request in flight got a reply; want its connection closed")
		}
	case <-time.After(10 * time.Second):
		t.Error("the request in flight still runs after Close")
	}
}
