package leasehold

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFailoverOrder: a dial starts at the address that last connected and
// goes on down the list, wrapping round; one that fails is passed over by
// the next dial; all failing is an error naming each address.
func TestFailoverOrder(t *testing.T) {
	addrs := []string{"a:1", "b:1", "c:1"}
	var tried []string
	down := map[string]bool{}
	f := &failover{addrs: addrs, each: time.Second, dialOne: func(_ context.Context, network, addr string) (net.Conn, error) {
		tried = append(tried, addr)
		if down[addr] {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}}
	for _, step := range []struct {
		name  string
		down  []string
		tried []string
	}{
		{"all up: the first", nil, []string{"a:1"}},
		{"the first down: the second", []string{"a:1"}, []string{"a:1", "b:1"}},
		{"the first back: stays on the second", nil, []string{"b:1"}},
		{"the second down: the third", []string{"b:1"}, []string{"b:1", "c:1"}},
		{"wraps round", []string{"b:1", "c:1"}, []string{"c:1", "a:1"}},
		{"all down", addrs, []string{"a:1", "b:1", "c:1"}},
		{"after all down: from the first again", nil, []string{"a:1"}},
	} {
		tried, down = nil, map[string]bool{}
		for _, a := range step.down {
			down[a] = true
		}
		conn, err := f.Dial(context.Background(), "tcp", "ignored:1")
		if !slices.Equal(tried, step.tried) {
			t.Errorf("%s: tried %v, want %v", step.name, tried, step.tried)
		}
		if len(step.down) == len(addrs) {
			var de *DialError
			if !errors.As(err, &de) || len(de.Errs) != len(addrs) {
				t.Fatalf("%s: %v, want a DialError of every address", step.name, err)
			}
			for _, a := range addrs {
				if !strings.Contains(err.Error(), a) {
					t.Errorf("%s: %q does not name %s", step.name, err, a)
				}
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%s: %v does not wrap the dial's error", step.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		conn.Close()
	}
}

// TestFailoverTimeoutPerAddress: an address that does not answer costs its
// own timeout, and the next is tried; a caller's context that ends stops
// the dial there.
func TestFailoverTimeoutPerAddress(t *testing.T) {
	var tried []string
	f := &failover{addrs: []string{"silent:1", "b:1"}, each: 50 * time.Millisecond, dialOne: func(ctx context.Context, _, addr string) (net.Conn, error) {
		tried = append(tried, addr)
		if addr == "silent:1" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}}
	conn, err := f.Dial(context.Background(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !slices.Equal(tried, []string{"silent:1", "b:1"}) {
		t.Errorf("tried %v", tried)
	}

	tried = nil
	f.start.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = f.Dial(ctx, "tcp", "")
	if !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(tried, []string{"silent:1"}) {
		t.Errorf("with the caller's context ending first: %v, tried %v", err, tried)
	}
	if !strings.Contains(err.Error(), "silent:1: context deadline exceeded") {
		t.Errorf("error %q does not name the address", err)
	}
}

func TestValidateAddrs(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string // "" for valid
	}{
		{[]string{"127.0.0.1:7379", "[::1]:7379", "locks.example:7379"}, ""},
		{[]string{"127.0.0.1:7379", ""}, "address 2 of Config.Addrs is empty"},
		{[]string{"127.0.0.1"}, "not HOST:PORT"},
		{[]string{"127.0.0.1:"}, "not HOST:PORT"},
		{[]string{"::1:7379"}, "not HOST:PORT"},
		{[]string{"[::1]"}, "not HOST:PORT"},
		{[]string{"a:1", "b:1", "a:1"}, "a:1 is in Config.Addrs twice"},
	} {
		err := validateAddrs(tc.addrs, "tcp")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.addrs, err, tc.want)
		}
	}
}
