package server

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/rs/zerolog"
)

// reservedFiles is how many descriptors the server keeps for itself beyond
// one per client: the standard streams, the listener, the Go runtime's
// poller, the data directory's files, a connection being handed over. Redis
// keeps the same 32 (CONFIG_MIN_RESERVED_FDS). Each event loop adds its
// epoll and eventfd descriptors.
const reservedFiles = 32

// fitMaxClients fits cfg.MaxClients to the process's open-file limit, as
// Redis's adjustOpenFilesLimit does: if the soft limit is too low for that
// many clients and the reserve, it raises it, to what is needed or else as
// far as the hard limit; if that is still too low, it returns the clients
// the limit allows, with a warning, and fails if it allows none. Where the
// limit cannot be read (not Linux or macOS) it returns cfg.MaxClients.
func fitMaxClients(cfg Config, log zerolog.Logger) (int, error) {
	lim, err := limits.OpenFiles()
	if err != nil {
		log.Warn().Err(err).Int("max_clients", cfg.MaxClients).Msg("cannot read the open-file limit (ulimit -n); max clients left as given")
		return cfg.MaxClients, nil
	}
	if lim == nil {
		return cfg.MaxClients, nil
	}
	reserve := uint64(reservedFiles + 2*cfg.IOLoops)
	need := uint64(cfg.MaxClients) + reserve
	now, setErr := limits.RaiseFileLimit(*lim, need, limits.SetOpenFiles)
	if now >= need {
		if now > lim.Cur {
			log.Info().Uint64("open_files_limit", now).Uint64("was", lim.Cur).Msg("raised the open-file limit for max clients")
		}
		return cfg.MaxClients, nil
	}
	if now <= reserve {
		return 0, fmt.Errorf("server: the open-file limit (ulimit -n) of %d leaves no descriptor for a client: the server keeps %d for itself; raise it to at least %d for --max-clients %d",
			now, reserve, need, cfg.MaxClients)
	}
	clients := int(now - reserve)
	ev := log.Warn()
	if setErr != nil {
		ev = ev.AnErr("raise_error", setErr)
	}
	ev.Int("max_clients", clients).
		Int("max_clients_requested", cfg.MaxClients).
		Uint64("open_files_limit", now).
		Uint64("open_files_needed", need).
		Msg("max clients lowered to fit the open-file limit (ulimit -n)")
	return clients, nil
}

// maxClients is --max-clients as in force (SetMaxClients may change it).
func (s *Server) maxClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxConns
}

// SetMaxClients puts a new --max-clients in force while the server runs (a
// SIGHUP reload), fitted to the open-file limit as at start, and returns the
// value it replaced and the value now in force. Connections over a lowered
// limit stay; new ones are refused until there are fewer.
func (s *Server) SetMaxClients(n int) (was, now int, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("server: max clients must be at least 1, got %d", n)
	}
	cfg := s.cfg
	cfg.MaxClients = n
	fitted, err := fitMaxClients(cfg, s.log)
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	was, s.maxConns = s.maxConns, fitted
	s.mu.Unlock()
	return was, fitted, nil
}
