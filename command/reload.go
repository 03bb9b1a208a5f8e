package command

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
)

// reload is one thing serve re-reads on SIGHUP.
type reload struct {
	what string
	run  func() error
}

// hangupReloads lists what SIGHUP reloads for a server built from cfg.
func hangupReloads(srv *server.Server, cfg server.Config) []reload {
	var rs []reload
	if cfg.ACLFile != "" {
		rs = append(rs, reload{"acl file", srv.ReloadACL})
	}
	if cfg.TLS.Addr != "" || cfg.ClusterTLS != nil {
		rs = append(rs, reload{"tls certificates", srv.ReloadTLS})
	}
	return rs
}

// reloadOnHangup runs every reload on each SIGHUP, logging each outcome: a
// reload that fails keeps what was in force. SIGHUP never stops the
// server, reloads or not, as Redis ignores it. The returned stop ends the
// watching; its goroutine is owned by it.
func reloadOnHangup(log zerolog.Logger, reloads []reload) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-ch:
			case <-done:
				return
			}
			if len(reloads) == 0 {
				log.Info().Msg("SIGHUP: nothing to reload")
			}
			for _, r := range reloads {
				if err := r.run(); err != nil {
					log.Error().Err(err).Str("reload", r.what).Msg("SIGHUP: reload failed; what was in force stays")
				} else {
					log.Info().Str("reload", r.what).Msg("SIGHUP: reloaded")
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-exited
	}
}
