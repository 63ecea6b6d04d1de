//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel kill the child when the test binary dies (a
// panic, a -timeout's exit), which skips every t.Cleanup: the child's mock
// went with the test, and a run whose server vanished waits as an outage
// does, so on CI such an orphan ran on for minutes, using a core. (The
// signal follows the thread that started the child; Go ends a thread only
// when a goroutine locked to it exits, which no test here does.)
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
