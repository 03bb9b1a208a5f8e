//go:build unix

package command

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// forwardedSignals are passed on to run's command: what would otherwise end
// leasehold and leave the command running without its lease kept alive.
var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// ignoreStops keeps leasehold running while its command runs: a write to a
// closed pipe returns an error instead of killing it, and the terminal's
// stop keys (Ctrl-Z) do not stop it, since its command, in a group of its
// own, would go on unwatched.
//
// The signals are caught and dropped, not ignored: an ignored signal stays
// ignored across exec, and the command (a pipeline that relies on SIGPIPE,
// say) must start with the dispositions a shell would give it. A caught one
// is back to its default in the command.
func ignoreStops() {
	// Never read: a signal that finds the buffer full is dropped.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(-cmd.Process.Pid, s)
	}
}

// groupAlive reports whether any process of cmd's group is still there.
func groupAlive(cmd *exec.Cmd) bool {
	err := syscall.Kill(-cmd.Process.Pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killedBy reports the signal that ended a command, if one did.
func killedBy(ee *exec.ExitError) (int, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal()), true
	}
	return 0, false
}
