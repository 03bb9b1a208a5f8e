package server

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/limits"
)

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
	fitted, err := limits.FitMaxClients(cfg.MaxClients, cfg.IOLoops, s.log)
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	was, s.maxConns = s.maxConns, fitted
	s.mu.Unlock()
	return was, fitted, nil
}
