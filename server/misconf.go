package server

import (
	"errors"
	"strconv"
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

// writeCommands[i] says whether protocol.Commands[i] changes the lock table:
// Redis's "write" flag.
var writeCommands = commandsFlagged("write")

// handle is conn.dispatch's last step: it runs command i's handler, unless
// the data directory cannot be written and the command would change the
// table: that one does not run, and gets MISCONF. A change that runs marks
// the connection as owing a commit before its replies go out.
func (c *conn) handle(i int, args [][]byte) error {
	if writeCommands[i] && c.srv.store != nil {
		if err := c.srv.store.WriteFailure(); err != nil {
			return protocol.MisconfError(failureReason(err))
		}
		c.owesCommit = true
	}
	if lockCommands[i] {
		if err := c.srv.applier.admit(c, i, args); err != nil {
			return err
		}
	}
	return c.srv.handlers[i](c, args)
}

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
	out, ok := refuseReplies(c.wr.Buffer(), protocol.MisconfUnknownError(failureReason(c.srv.store.WriteFailure())))
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

// refuseReplies returns buf, RESP2 replies, with each reply replaced by e
// (lock event messages kept as they are), and false if buf does not parse.
func refuseReplies(buf []byte, e *protocol.Error) ([]byte, bool) {
	frame := e.Frame()
	var out []byte
	for len(buf) > 0 {
		n, ok := replyLen(buf)
		if !ok {
			return nil, false
		}
		if isMessage(buf[:n]) {
			out = append(out, buf[:n]...)
		} else {
			out = append(out, frame...)
		}
		buf = buf[n:]
	}
	return out, true
}

// replyLen is the length of the RESP2 value at the start of b.
func replyLen(b []byte) (int, bool) {
	line, ok := lineLen(b)
	if !ok || line < 3 {
		return 0, false
	}
	switch b[0] {
	case '+', '-', ':':
		return line, true
	case '$':
		n, err := strconv.Atoi(string(b[1 : line-2]))
		switch {
		case err != nil:
			return 0, false
		case n < 0:
			return line, true
		case line+n+2 > len(b):
			return 0, false
		}
		return line + n + 2, true
	case '*':
		n, err := strconv.Atoi(string(b[1 : line-2]))
		if err != nil {
			return 0, false
		}
		at := line
		for range max(n, 0) {
			m, ok := replyLen(b[at:])
			if !ok {
				return 0, false
			}
			at += m
		}
		return at, true
	}
	return 0, false
}

// lineLen is the length of b's first line, CRLF included.
func lineLen(b []byte) (int, bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i + 2, true
		}
	}
	return 0, false
}

// isMessage reports whether a reply is a pub/sub message (an array whose
// first element is "message" or "pmessage"), which acknowledges nothing.
func isMessage(r []byte) bool {
	for _, p := range []string{"*3\r\n$7\r\nmessage\r\n", "*4\r\n$8\r\npmessage\r\n"} {
		if len(r) >= len(p) && string(r[:len(p)]) == p {
			return true
		}
	}
	return false
}
