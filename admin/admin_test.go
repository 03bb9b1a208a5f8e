package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// startAdmin starts an admin listener for src on a free loopback port, with
// adjust applied to its configuration; the test's cleanup closes it.
func startAdmin(t *testing.T, src admin.Source, adjust ...func(*admin.Config)) string {
	t.Helper()
	cfg := admin.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	for _, f := range adjust {
		f(&cfg)
	}
	a, err := admin.Start(cfg, src, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return "http://" + a.Addr().String()
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// doer returns a function that sends a command on rdb, fails t if it is
// answered with an error, and returns the reply.
func doer(t *testing.T, rdb *redis.Client) func(args ...any) any {
	return func(args ...any) any {
		t.Helper()
		v, err := rdb.Do(context.Background(), args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	return testutil.HTTPGet(t, url)
}

// expect fetches url and fails the test unless it answers status with a
// body that contains want.
func expect(t *testing.T, url string, status int, want string) {
	t.Helper()
	code, body := get(t, url)
	if code != status || !strings.Contains(body, want) {
		t.Errorf("GET %s: %d %q, want %d with %q", url, code, body, status, want)
	}
}

// TestHealthAndReady follows a single node from made to closed: /healthz
// answers 200 throughout, /readyz only while the server serves.
func TestHealthAndReady(t *testing.T) {
	cfg, err := lockserver.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	base := startAdmin(t, srv)

	expect(t, base+"/healthz", http.StatusOK, "ok")
	expect(t, base+"/readyz", http.StatusServiceUnavailable, "starting")

	running := servertest.Start(t, srv, server.ErrServerClosed)
	if err := running.WaitServing(); err != nil {
		t.Fatal(err)
	}
	expect(t, base+"/healthz", http.StatusOK, "ok")
	expect(t, base+"/readyz", http.StatusOK, "ok")

	if err := running.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, base+"/healthz", http.StatusOK, "ok")
	expect(t, base+"/readyz", http.StatusServiceUnavailable, "shutting down")
}

// TestReadyCluster: a cluster node is ready only while it knows a leader.
func TestReadyCluster(t *testing.T) {
	// A node that neither bootstraps nor has joined a group never hears of a
	// leader.
	alone := lockserver.StartNode(t, "alone", t.TempDir(), false)
	expect(t, startAdmin(t, alone.Server.Server)+"/readyz", http.StatusServiceUnavailable, "no leader")

	nodes := lockserver.StartCluster(t, 1)
	leader, err := lockserver.WaitLeader(nodes...)
	if err != nil {
		t.Fatal(err)
	}
	base := startAdmin(t, leader.Server.Server)
	expect(t, base+"/readyz", http.StatusOK, "ok")
	fams := scrape(t, base)
	for name, want := range map[string]float64{"leasehold_cluster_leader": 1, "leasehold_cluster_leader_known": 1} {
		if got := value(t, fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{"leasehold_cluster_proposed_entries_total", "leasehold_cluster_proposed_batches_total"} {
		if fams[name] == nil {
			t.Errorf("%s is missing from /metrics", name)
		}
	}
}

// scrape fetches /metrics and parses it as Prometheus's text format.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// value is the value of the one series of the metric name.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("metric %s: %v, want one series", name, f)
	}
	m := f.Metric[0]
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s is a %v", name, f.GetType())
	return 0
}

// TestMetrics: /metrics parses, has the Go runtime's and the process's
// metrics, types leasehold's counters as counters, and follows an ACQUIRE.
func TestMetrics(t *testing.T) {
	ls := lockserver.Start(t)
	base := startAdmin(t, ls.Server)
	before := scrape(t, base)
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "leasehold_build_info"} {
		if before[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
	for name, f := range before {
		if !strings.HasPrefix(name, "leasehold_") {
			continue
		}
		if isCounter := f.GetType() == dto.MetricType_COUNTER; isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %v: counters, and only they, end in _total", name, f.GetType())
		}
	}
	for _, absent := range []string{"leasehold_fsyncs_total", "leasehold_cluster_leader", "leasehold_tls_handshake_failures_total"} {
		if before[absent] != nil {
			t.Errorf("%s in /metrics of a single node in memory without TLS", absent)
		}
	}

	rdb := ls.Client()
	ctx := context.Background()
	if _, err := rdb.Do(ctx, "ACQUIRE", "k", 60000).Uint64(); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, base)
	for name, delta := range map[string]float64{"leasehold_leases_granted_total": 1, "leasehold_leases_held": 1, "leasehold_locks": 1} {
		if got, want := value(t, after, name), value(t, before, name)+delta; got != want {
			t.Errorf("%s after an ACQUIRE = %v, want %v", name, got, want)
		}
	}
	if b, a := value(t, before, "leasehold_commands_processed_total"), value(t, after, "leasehold_commands_processed_total"); a <= b {
		t.Errorf("leasehold_commands_processed_total %v before an ACQUIRE, %v after", b, a)
	}
	if got := value(t, after, "leasehold_connected_clients"); got < 1 {
		t.Errorf("leasehold_connected_clients = %v with a client connected", got)
	}
}

// TestMetricsPersistence: with a data directory, its figures are exported.
func TestMetricsPersistence(t *testing.T) {
	dir := t.TempDir()
	ls := lockserver.Start(t, func(c *server.Config) { c.Persist.Dir = dir })
	base := startAdmin(t, ls.Server)
	if _, err := ls.Client().Do(context.Background(), "ACQUIRE", "k", 60000).Uint64(); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, base)
	if got := value(t, fams, "leasehold_persist_ok"); got != 1 {
		t.Errorf("leasehold_persist_ok = %v, want 1", got)
	}
	if got := value(t, fams, "leasehold_fsyncs_total"); got < 1 {
		t.Errorf("leasehold_fsyncs_total = %v after an ACQUIRE under fsync always", got)
	}
	if got := value(t, fams, "leasehold_token_reserved_up_to"); got < 1 {
		t.Errorf("leasehold_token_reserved_up_to = %v after a grant", got)
	}
}

func TestPprof(t *testing.T) {
	ls := lockserver.Start(t)
	for _, on := range []bool{false, true} {
		base := startAdmin(t, ls.Server, func(c *admin.Config) { c.Pprof = on })
		status := http.StatusNotFound
		if on {
			status = http.StatusOK
		}
		code, _ := get(t, base+"/debug/pprof/")
		if code != status {
			t.Errorf("pprof %v: GET /debug/pprof/: %d, want %d", on, code, status)
		}
		code, _ = get(t, base+"/debug/pprof/goroutine?debug=1")
		if code != status {
			t.Errorf("pprof %v: GET /debug/pprof/goroutine: %d, want %d", on, code, status)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		want   error // nil: valid; errAny: some other error
	}{
		{"127.0.0.1:0", false, nil},
		{"127.0.0.2:9090", false, nil},
		{"[::1]:9090", false, nil},
		{"localhost:9090", false, nil},
		{"", false, admin.ErrNoAddr},
		{":9090", false, admin.ErrRemote},
		{"0.0.0.0:9090", false, admin.ErrRemote},
		{"[::]:9090", false, admin.ErrRemote},
		{"10.1.2.3:9090", false, admin.ErrRemote},
		{"metrics.example:9090", false, admin.ErrRemote},
		{":9090", true, nil},
		{"10.1.2.3:9090", true, nil},
		{"127.0.0.1", false, errAny},
	} {
		cfg := admin.DefaultConfig()
		cfg.Addr, cfg.AllowRemote = tc.addr, tc.remote
		err := cfg.Validate()
		switch {
		case tc.want == nil && err != nil,
			tc.want == errAny && (err == nil || errors.Is(err, admin.ErrRemote)),
			tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
			t.Errorf("Addr %q AllowRemote %v: Validate() = %v, want %v", tc.addr, tc.remote, err, tc.want)
		}
	}
}

var errAny = errors.New("any error")

// TestCloseTwice: Close ends the listener, and a second Close returns the
// first's result.
func TestCloseTwice(t *testing.T) {
	ls := lockserver.Start(t)
	cfg := admin.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	a, err := admin.Start(cfg, ls.Server, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + a.Addr().String() + "/healthz"
	expect(t, url, http.StatusOK, "ok")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := httpClient.Get(url); err == nil {
		t.Errorf("GET %s after Close succeeded", url)
	}
}
