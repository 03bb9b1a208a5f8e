package command

import (
	"os/exec"
	"syscall"
)

// startGroup runs cmd in a process group of its own: signals reach
// everything the command started, and a terminal's Ctrl-C reaches it once,
// through leasehold. Should leasehold itself be killed (SIGKILL, a crash),
// the kernel kills the command too: nobody would stop it on a lost lease.
func startGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd.Start()
}
