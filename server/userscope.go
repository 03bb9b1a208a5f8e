package server

// scopeUser names c's user and reports whether it works in an owner scope
// (ownership.go): a user that is not an admin. Until users exist, no one is.
func (c *conn) scopeUser() (name string, scoped bool) { return "", false }

// hasScopedUsers reports whether any user works in an owner scope.
func (s *Server) hasScopedUsers() bool { return false }
