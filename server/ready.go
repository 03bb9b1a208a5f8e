package server

// Ready reports whether the server serves commands, for a readiness probe:
// its data directory is recovered (New does that before it returns), Serve
// accepts connections and Close has not begun, and in cluster mode this
// node knows a leader to propose through. When it is not ready, why says
// what it waits for, in words for the probe's body. It takes no lock a
// command takes, and is safe to call from any goroutine.
func (s *Server) Ready() (ready bool, why string) {
	if !s.serving.Load() {
		return false, "starting: not accepting connections yet"
	}
	if s.isClosed() {
		return false, "shutting down"
	}
	if s.replica != nil {
		if !s.replica.LeaderKnown() {
			return false, "cluster: no leader known (election in progress, or no quorum)"
		}
		if s.replica.SettingsMismatch() != "" {
			return false, "cluster: this node's lock-table settings differ from the leader's"
		}
	}
	return true, "ok"
}

// Serving returns a channel closed once Serve accepts connections: the data
// directory is recovered (New did it) and commands are served, as systemd's
// READY=1 means (Type=notify). Unlike Ready it does not wait for a cluster
// leader, which a member started on its own would wait for in vain, and it
// stays closed through Close.
func (s *Server) Serving() <-chan struct{} { return s.servingC }

// markServing is Serve's: from here on Ready may report ready, and Serving
// is closed.
func (s *Server) markServing() {
	if !s.serving.Swap(true) {
		close(s.servingC)
	}
}
