package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// TestPassword runs the client against a server with a password: go-redis's
// Username and Password in Config.Redis authenticate every connection,
// including the one that unblocks an abandoned wait.
func TestPassword(t *testing.T) {
	const pw = "s3cret"
	srv := lockserver.Start(t, func(c *server.Config) { c.RequirePass = pw }).Server
	addr := srv.Addr().String()
	for _, tc := range []struct {
		name, user, pass, wantErr string
	}{
		{"password", "", pw, ""},
		{"user and password", "default", pw, ""},
		{"wrong password", "", "nope", "WRONGPASS"},
		{"unknown user", "bob", pw, "WRONGPASS"},
		{"none", "", "", "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, addr, func(cfg *leasehold.Config) {
				cfg.Redis.Username, cfg.Redis.Password, cfg.Redis.MaxRetries = tc.user, tc.pass, -1
			})
			l, err := c.Acquire(testContext(t), "k-"+tc.name, 10*time.Second)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Acquire: %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(testContext(t)); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("abandoned wait", func(t *testing.T) {
		// One connection, held by the wait: CLIENT UNBLOCK goes on the
		// control connection, which must authenticate too.
		c := newClient(t, addr, func(cfg *leasehold.Config) { cfg.Redis.Password, cfg.Redis.PoolSize = pw, 1 })
		ctx := testContext(t)
		held, err := c.Acquire(ctx, "w", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := c.Acquire(wctx, "w", 10*time.Second, leasehold.Wait(20*time.Second))
			got <- err
		}()
		testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool { return waiters(srv, "w") == 1 })
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		testutil.Eventually(t, 5*time.Second, "abandoned wait out of the queue", func() bool { return waiters(srv, "w") == 0 })
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
