package admin

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

var (
	// ErrNoAddr is returned by Config.Validate for an empty Addr.
	ErrNoAddr = errors.New("admin: no address to listen on")
	// ErrRemote is returned by Config.Validate for an Addr whose host is
	// not loopback, without AllowRemote.
	ErrRemote = errors.New("admin: the address is not loopback")
)

// Config is the admin listener's configuration.
type Config struct {
	// Addr is HOST:PORT to listen on; port 0 picks a free one (see
	// Server.Addr).
	Addr string
	// AllowRemote lets Addr's host be other than loopback (127.0.0.0/8,
	// ::1 or localhost), an empty host (every interface) included. The
	// listener speaks plain HTTP: credentials (see Authenticator) cross the
	// network in clear text, and a server without a password asks for
	// none.
	AllowRemote bool
	// Pprof mounts net/http/pprof's handlers under /debug/pprof/.
	Pprof bool
	// ShutdownTimeout bounds Close: requests in flight (a CPU profile runs
	// as many seconds as it was asked for) have this long to finish before
	// their connections are closed.
	ShutdownTimeout time.Duration
}

// DefaultConfig is the configuration with every default: no address (the
// listener is off until one is given), loopback only, no profiler.
func DefaultConfig() Config {
	return Config{ShutdownTimeout: 5 * time.Second}
}

// Validate returns the first problem with cfg, or nil.
func (cfg Config) Validate() error {
	if cfg.Addr == "" {
		return ErrNoAddr
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("admin: address %q: %w", cfg.Addr, err)
	}
	if !cfg.AllowRemote && !isLoopback(host) {
		return fmt.Errorf("%w: %q (the admin listener speaks plain HTTP; allow it explicitly)", ErrRemote, cfg.Addr)
	}
	if cfg.ShutdownTimeout <= 0 {
		return fmt.Errorf("admin: shutdown timeout %v: want more than 0", cfg.ShutdownTimeout)
	}
	return nil
}

// isLoopback reports whether host names only the loopback interface. Other
// names are not resolved: what they resolve to can change after the check.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Source is what the admin listener reads; *server.Server is one.
type Source interface {
	// Ready reports whether commands are served, and if not, why.
	Ready() (ready bool, why string)
	// StatsSnapshot reads the server's figures, at each scrape.
	StatsSnapshot() stats.Stats
}

// Server is a running admin listener. Its serving goroutine, and the status
// page's sampler, are its own and end in Close.
type Server struct {
	cfg  Config
	log  zerolog.Logger
	ln   net.Listener
	http *http.Server
	done chan struct{} // closed when the serving goroutine has returned
	// status is the status page, whose sampler Close stops once the
	// requests are done; nil when the Source has none.
	status *statusPage

	closeOnce sync.Once
	closeErr  error
}

// Start validates cfg, listens on cfg.Addr and serves src's health and
// metrics (and its status page, if src is a StatusSource) on a goroutine
// the returned Server owns, until Close. It returns once the address is
// bound, so that a taken address fails the start.
func Start(cfg Config, src Source, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, status := handler(cfg, src)
	s, err := start(cfg, h, log)
	if err != nil {
		if status != nil {
			status.close()
		}
		return nil, err
	}
	if status != nil {
		s.status = status
		s.http.RegisterOnShutdown(status.shutdown)
	}
	return s, nil
}

// start is Start with the handler given.
func start(cfg Config, h http.Handler, log zerolog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	s := &Server{
		cfg:  cfg,
		log:  log,
		ln:   ln,
		done: make(chan struct{}),
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
			// net/http's own complaints (a malformed request, say) go to
			// the server's log, in its format.
			ErrorLog: stdlog.New(log, "admin listener: ", 0),
		},
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("admin listener stopped")
		}
	}()
	log.Info().Str("http_addr", ln.Addr().String()).Bool("pprof", cfg.Pprof).Msg("admin listening")
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the listener: it stops accepting, gives requests in flight
// Config.ShutdownTimeout to finish, closes the connections still open, and
// returns once the serving goroutine has ended. It is safe to call more than
// once; every call returns the first's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			s.log.Warn().Err(err).Stringer("timeout", s.cfg.ShutdownTimeout).
				Msg("admin listener: requests still running at the shutdown timeout; closing them")
			s.closeErr = s.http.Close()
		}
		<-s.done
		if s.status != nil {
			s.status.close()
		}
	})
	return s.closeErr
}

// handler serves the admin endpoints for src: /healthz, /readyz, /metrics,
// /debug/pprof/ with cfg.Pprof, and the status page (status.go) when src is
// a StatusSource, which it returns for Close to stop (nil without). Each
// call makes its own metrics registry (not the global one), so that several
// servers in one process (tests) do not meet.
func handler(cfg Config, src Source) (http.Handler, *statusPage) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCollector(src),
	)
	auth, _ := src.(Authenticator)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, why := src.Ready()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	mux.Handle("GET /metrics", guard(auth, needStats, promhttp.InstrumentMetricHandler(reg,
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))))
	if cfg.Pprof {
		mux.Handle("/debug/pprof/", guard(auth, needProfile, http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(auth, needProfile, http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(auth, needProfile, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(auth, needProfile, http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(auth, needProfile, http.HandlerFunc(pprof.Trace)))
	}
	return mux, mountStatus(mux, src, auth)
}
