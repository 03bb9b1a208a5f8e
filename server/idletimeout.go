package server

import (
	"errors"
	"time"
)

// idleTimeout is the idle timeout in force: Config.IdleTimeout until
// SetIdleTimeout changes it; 0 for none.
func (s *Server) idleTimeout() time.Duration { return time.Duration(s.idle.Load()) }

// SetIdleTimeout puts a new idle timeout in force while the server runs (a
// SIGHUP reload), 0 for none, and returns the one it replaced. Each event
// loop is woken to take it: it starts, stops or re-paces its sweep at once.
// A connection already silent for longer than a lowered timeout is closed
// at once, as Redis does; set from none, silence counts from the change,
// since reads went untimed until then. The goroutine transport (--io-loops
// 0) reads it at each read: a connection already waiting for input keeps
// the timeout it began that read with, until it sends something.
func (s *Server) SetIdleTimeout(d time.Duration) (was time.Duration, err error) {
	if d < 0 {
		return 0, errors.New("server: idle timeout must not be negative")
	}
	was = time.Duration(s.idle.Swap(int64(d)))
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	for _, l := range loops {
		l.post(l.takeIdleTimeout)
	}
	return was, nil
}
