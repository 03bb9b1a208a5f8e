package server

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/protocol"
)

// The memory watch is a goroutine the Server owns (started by Serve, ended
// by Close), sampling its limits.MemoryGuard; INFO takes a reading of its
// own.

// denyOOM are the commands refused while the heap is over --maxmemory:
// those that make a lock or a lease or queue for one, as Redis refuses the
// commands it flags denyoom. VERIFY, RELEASE, EXTEND, DELETE and every
// read go on, so that holders keep and end their leases.
var denyOOM = map[string]bool{"acquire": true, "macquire": true, "create": true}

// guardMemory wraps the handlers of denyOOM's commands with the check. It
// does so without a limit too, since SetMaxMemory may set one: the check is
// a load of a flag that stays false.
func (s *Server) guardMemory(hs []handler) {
	for i, cmd := range protocol.Commands {
		if !denyOOM[cmd.Name] {
			continue
		}
		h := hs[i]
		hs[i] = func(c *conn, args [][]byte) error {
			if c.srv.mem.Over() {
				c.srv.mem.Refused()
				return protocol.ErrMaxMemory
			}
			return h(c, args)
		}
	}
}

// startMemoryWatch starts the watch on a goroutine the server owns; Close
// ends it (s.closing) and waits for it with the connections (s.wg).
func (s *Server) startMemoryWatch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ticker := time.NewTicker(limits.MemorySampleEvery)
		defer ticker.Stop()
		for {
			s.mem.Sample(time.Now(), s.lockTable().Stats().TableBytes, s.log)
			select {
			case <-s.closing:
				return
			case <-ticker.C:
			}
		}
	}()
	return nil
}

// SetMaxMemory puts a new --maxmemory in force while the server runs (a
// SIGHUP reload), in bytes, 0 for no bound, and returns the limit it
// replaced. The watch, which runs with or without a limit, compares the
// heap with it from its next sample (within limits.MemorySampleEvery): commands
// are refused, or accepted again, from then on.
func (s *Server) SetMaxMemory(n int64) (was int64, err error) {
	if n < 0 {
		return 0, fmt.Errorf("server: maxmemory must not be negative (0 for no bound), got %d", n)
	}
	return int64(s.mem.SetLimit(uint64(n))), nil
}
