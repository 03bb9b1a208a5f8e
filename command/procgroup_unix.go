//go:build unix && !linux

package command

import (
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
