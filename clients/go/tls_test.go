package leasehold_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
	"github.com/leasehold/leasehold/server"
	"github.com/redis/go-redis/v9"
)

// TestTLS runs the client through Config.Redis.TLSConfig: every connection
// it opens speaks TLS with the client certificate, including those of a
// waiting Acquire and of the CLIENT UNBLOCK that takes an abandoned wait
// out of the queue, from New and from NewFromRedis; a password goes with
// it; and a client without TLS, or that does not trust the server's CA,
// fails.
func TestTLS(t *testing.T) {
	t.Parallel()
	const pw = "s3cret"
	certs := tlstest.New(t, t.TempDir())
	srv := lockserver.Start(t, func(c *server.Config) {
		c.RequirePass = pw
		// A TLS listener that wants a client certificate signed by the CA.
		c.TLS.Addr = servertest.Addr
		c.TLS.CertFile, c.TLS.KeyFile, c.TLS.CACertFile = certs.ServerCert, certs.ServerKey, certs.CACert
		c.TLS.AuthClients = "yes"
	}).Server
	tlsAddr := srv.TLSAddr().String()

	withTLS := func(cfg *leasehold.Config) {
		cfg.Redis.TLSConfig = certs.ClientConfig(t, "alice")
		cfg.Redis.Password = pw
		cfg.Redis.MaxRetries = -1
	}

	t.Run("lease", func(t *testing.T) {
		c := newClient(t, tlsAddr, withTLS)
		ctx := testContext(t)
		l, err := c.Acquire(ctx, "tls", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := l.Verify(ctx); !ok || err != nil {
			t.Fatalf("Verify: %v, %v", ok, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	// One connection, held by the wait: CLIENT UNBLOCK goes on the control
	// connection, which must speak TLS and authenticate too.
	abandonWait := func(t *testing.T, c *leasehold.Client, key string) {
		t.Helper()
		ctx := testContext(t)
		held, err := c.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := c.Acquire(wctx, key, 10*time.Second, leasehold.Wait(20*time.Second))
			got <- err
		}()
		testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool { return waiters(srv, key) == 1 })
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		testutil.Eventually(t, 5*time.Second, "abandoned wait out of the queue", func() bool { return waiters(srv, key) == 0 })
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("abandoned wait", func(t *testing.T) {
		c := newClient(t, tlsAddr, withTLS, func(cfg *leasehold.Config) { cfg.Redis.PoolSize = 1 })
		abandonWait(t, c, "tls-wait")
	})
	// With a list, the dial is this package's own: it must do the TLS, and
	// without a ServerName verify each address against its own host.
	t.Run("Addrs", func(t *testing.T) {
		c := newClient(t, "", withTLS, withAddrs(deadAddr(t), tlsAddr), func(cfg *leasehold.Config) {
			cfg.Redis.PoolSize = 1
			cfg.Redis.TLSConfig.ServerName = "" // 127.0.0.1, which the certificate names

		})
		abandonWait(t, c, "tls-addrs")
	})
	t.Run("Addrs wrong server name", func(t *testing.T) {
		c := newClient(t, "", withTLS, withAddrs(deadAddr(t), tlsAddr), func(cfg *leasehold.Config) {
			cfg.Redis.TLSConfig.ServerName = "locks.elsewhere"
			cfg.Redis.MaxRetries, cfg.Redis.ReadTimeout = -1, 2*time.Second
		})
		_, err := c.Acquire(testContext(t), "tls-refused", 10*time.Second)
		if err == nil || !strings.Contains(err.Error(), "locks.elsewhere") {
			t.Fatalf("Acquire: %v, want a certificate error for locks.elsewhere", err)
		}
	})
	t.Run("NewFromRedis", func(t *testing.T) {
		// The waiting Acquire and CLIENT UNBLOCK run on clients made from
		// rdb's options: TLS carries over.
		rdb := redis.NewClient(&redis.Options{Addr: tlsAddr, Password: pw, TLSConfig: certs.ClientConfig(t, "alice"), PoolSize: 1, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		c, err := leasehold.NewFromRedis(rdb, leasehold.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		abandonWait(t, c, "tls-from-redis")
	})

	for _, tc := range []struct {
		name   string
		adjust func(*leasehold.Config)
		want   string
	}{
		{"no TLS", func(cfg *leasehold.Config) { cfg.Redis.Password = pw }, ""},
		{"unknown CA", func(cfg *leasehold.Config) {
			withTLS(cfg)
			cfg.Redis.TLSConfig.RootCAs = x509.NewCertPool()
		}, "certificate signed by unknown authority"},
		{"wrong server name", func(cfg *leasehold.Config) {
			withTLS(cfg)
			cfg.Redis.TLSConfig.ServerName = "locks.elsewhere"
		}, "locks.elsewhere"},
		{"no client certificate", func(cfg *leasehold.Config) {
			withTLS(cfg)
			cfg.Redis.TLSConfig.Certificates = nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tlsAddr, func(cfg *leasehold.Config) {
				tc.adjust(cfg)
				cfg.Redis.MaxRetries, cfg.Redis.ReadTimeout = -1, 2*time.Second
			})
			_, err := c.Acquire(testContext(t), "tls-refused", 10*time.Second)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Acquire: %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
