package servertest

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

var errStopped = errors.New("fake: closed")

// fake answers every line with +PONG; serveErr, when set, is what Serve
// returns after Close instead of errStopped.
type fake struct {
	ln       net.Listener
	serveErr error
	mu       sync.Mutex // guards closes
	closes   int
}

func (f *fake) Listen() (err error) {
	f.ln, err = net.Listen("tcp", Addr)
	return err
}

func (f *fake) Addr() net.Addr { return f.ln.Addr() }

func (f *fake) Serve() error {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			if f.serveErr != nil {
				return f.serveErr
			}
			return errStopped
		}
		go func() {
			defer nc.Close()
			for r := bufio.NewReader(nc); ; {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				nc.Write([]byte("+PONG\r\n"))
			}
		}()
	}
}

func (f *fake) Close() error {
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
	return f.ln.Close()
}

func TestStartServesAndCloses(t *testing.T) {
	f := &fake{}
	r, err := Serve(f, errStopped)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") || strings.HasSuffix(r.Addr, ":0") {
		t.Errorf("Addr = %q, want a port on 127.0.0.1", r.Addr)
	}
	if err := r.WaitServing(); err != nil {
		t.Fatal(err)
	}
	nc := r.Dial(t)
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(nc).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("raw PING: %q, %v", line, err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil || f.closes != 1 {
		t.Fatalf("second Close: %v, server closed %d times, want once", err, f.closes)
	}
	if err := r.WaitServing(); err == nil {
		t.Error("WaitServing succeeded after Close")
	}
}

func TestCloseReportsServeError(t *testing.T) {
	odd := errors.New("fake: accept failed")
	r, err := Serve(&fake{serveErr: odd}, errStopped)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), odd.Error()) {
		t.Fatalf("Close: %v, want it to report Serve's %v", err, odd)
	}
}

// TestSkipUnlessTransportTest: in a transport pass a test runs when listed
// (its subtests with it) and skips otherwise; outside one every test runs;
// a value of the variable other than 0 or 1 fails the test.
func TestSkipUnlessTransportTest(t *testing.T) {
	listed := map[string]bool{"TestSkipUnlessTransportTest": true}
	skipped := func(t *testing.T, tests map[string]bool) bool {
		var ran bool
		t.Run("sub", func(t *testing.T) {
			SkipUnlessTransportTest(t, tests)
			ran = true
		})
		return !ran
	}
	for _, tc := range []struct {
		env    string
		tests  map[string]bool
		skip   bool
		reason string
	}{
		{"", nil, false, "no pass: every test runs"},
		{"0", nil, false, "0 is no pass"},
		{"1", listed, false, "a listed test runs in the pass"},
		{"1", map[string]bool{"TestOther": true}, true, "an unlisted test skips in the pass"},
	} {
		t.Setenv(TransportOnlyEnv, tc.env)
		if got := skipped(t, tc.tests); got != tc.skip {
			t.Errorf("%s=%q: skipped %v, want %v (%s)", TransportOnlyEnv, tc.env, got, tc.skip, tc.reason)
		}
	}
	t.Setenv(TransportOnlyEnv, "yes")
	if _, err := TransportOnly(); err == nil {
		t.Errorf("%s=yes: no error", TransportOnlyEnv)
	}
}
