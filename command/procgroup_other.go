//go:build !unix

package command

import (
	"os"
	"os/exec"
)

// forwardedSignals are passed on to run's command.
var forwardedSignals = []os.Signal{os.Interrupt}

func ignoreStops() {}

// startGroup starts cmd; without Unix process groups, signals reach the
// command alone.
func startGroup(cmd *exec.Cmd) error { return cmd.Start() }

// signalGroup stops cmd: this platform cannot pass a signal on, so every
// signal kills it.
func signalGroup(cmd *exec.Cmd, sig os.Signal) { cmd.Process.Kill() }

// groupAlive: the command's own exit is all this platform can see.
func groupAlive(*exec.Cmd) bool { return false }

func killedBy(*exec.ExitError) (int, bool) { return 0, false }
