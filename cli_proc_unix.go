//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// startGroup runs cmd in a process group of its own: signals reach
// everything the command started, and a terminal's Ctrl-C reaches it once,
// through leasehold.
func startGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(-cmd.Process.Pid, s)
	}
}

// killedBy reports the signal that ended a command, if one did.
func killedBy(ee *exec.ExitError) (int, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal()), true
	}
	return 0, false
}
