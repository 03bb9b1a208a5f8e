package command

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Exit statuses of the client commands, as docs/cli.md lists them.
const (
	exitYes     = 0  // granted, true, done
	exitNo      = 1  // not granted (within --wait), false, not held
	exitFailure = 2  // bad arguments, no server, an error reply
	exitLost    = 75 // run: the lease was lost and the command stopped (EX_TEMPFAIL)
	// run exits 126 when the command cannot be started, 127 when it is not
	// found, as a shell does, and 128+n when it (or leasehold, while
	// waiting for the lock) is killed by signal n.
	exitCannotExec = 126
	exitNotFound   = 127
)

// Defaults of the client commands' flags.
const (
	defaultTTL       = 30 * time.Second
	defaultKillGrace = 10 * time.Second
)

// exitCodeError is an error with the exit status it calls for; it is a
// cli.ExitCoder. main prints its message, if any, and exits with the code.
type exitCodeError struct {
	code  int
	err   error // nil: exit silently
	usage bool  // bad arguments or flags: exitStatus points to the help
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitCodeError) ExitCode() int { return e.code }
func (e *exitCodeError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitCodeError{code: code, err: err} }

// usageError is an error in the command line: exit status 2, and a line
// that points to the command's help after the message.
func usageError(format string, args ...any) error {
	return &exitCodeError{code: exitFailure, err: fmt.Errorf(format, args...), usage: true}
}

// exitStatus reports err on w and returns the process's exit status: an
// ExitCoder's code, 1 for any other error (the server's failures), 0 for
// none. After a usage error it names help, the command line that shows the
// right help ("leasehold acquire --help").
func exitStatus(err error, w io.Writer, help string) int {
	if err == nil {
		return 0
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(w, "leasehold:", strings.TrimPrefix(msg, "leasehold: "))
	}
	if ue := (*exitCodeError)(nil); errors.As(err, &ue) && ue.usage {
		fmt.Fprintf(w, "see '%s'\n", help)
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
