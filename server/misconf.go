package server

import (
	"errors"
	"syscall"

	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/protocol"
)

// While the data directory cannot be written (a full disk, an I/O error:
// persist.ErrUnwritable), the server does what Redis does after a failed
// save with stop-writes-on-bgsave-error: it refuses the commands that would
// change the lock table with MISCONF, before they run, and goes on serving
// the others (VERIFY, STATUS, LOCKS, INFO, PING, subscriptions), while the
// store retries the write in the background; once a retry succeeds, changes
// are accepted again, with no restart.
//
// A command that changed the table before the failure was noticed (in the
// same round, or on another connection meanwhile) has its change in memory
// but not on disk: its reply must not acknowledge it, so the connection's
// replies since its last flush are replaced by MISCONF errors, one each,
// saying that the outcome is unknown. The change itself stays (a lease
// granted so expires on its ttl), and the retry writes it.

// commitBeforeReply is conn.flush's commit (see Server.commitBeforeReply).
// If the data directory cannot be written and this connection changed the
// table since its last flush, its replies waiting in wr are replaced by
// MISCONF errors, one each. A connection parked in a WAIT still owes the
// commit of the grant its reply will carry.
func (c *conn) commitBeforeReply() error {
	err := c.srv.commit()
	owed := c.owesCommit
	if c.blocked == nil {
		c.owesCommit = false
	}
	if !errors.Is(err, persist.ErrUnwritable) {
		return err
	}
	if !owed {
		return nil
	}
	out, ok := protocol.ReplaceReplies(c.wr.Buffer(), protocol.MisconfUnknownError(failureReason(c.srv.store.WriteFailure())))
	if !ok {
		return err // replies it cannot count: none is sent, and the connection closes
	}
	c.wr.SetBuffer(out)
	return nil
}

// failureReason is the OS's words for a write failure, such as "no space
// left on device".
func failureReason(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "retried" // it ended meanwhile; the commit may still be pending
	case errors.As(err, &errno):
		return errno.Error()
	}
	return err.Error()
}
