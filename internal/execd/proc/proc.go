// Package proc holds the process-control pieces shared by execd's command,
// session and terminal runners: exit codes in shell convention, user
// credentials, signalling whole process groups or process trees, and
// terminating them with a grace period.
package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ExitCode returns the exit status of a finished process the way a shell
// reports it: the exit code, or 128+signal when a signal killed it.
func ExitCode(state *os.ProcessState) int {
	if state == nil {
		return -1
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// WaitExitCode returns the shell-style exit code for the error of
// exec.Cmd.Wait (nil error means 0) and whether the process ran at all.
func WaitExitCode(cmd *exec.Cmd, waitErr error) (int, bool) {
	if cmd.ProcessState != nil {
		return ExitCode(cmd.ProcessState), true
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return ExitCode(ee.ProcessState), true
	}
	return -1, false
}

// SignalGroup sends sig to the process group led by pgid. A group that is
// already gone is not an error.
func SignalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return errors.New("refusing to signal process group <= 1")
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// TerminateGroup sends SIGTERM to the group, then SIGKILL if done is not
// closed within grace. It returns once the signals are sent; it does not wait
// for done after SIGKILL.
func TerminateGroup(pgid int, grace time.Duration, done <-chan struct{}) {
	if err := SignalGroup(pgid, syscall.SIGTERM); err != nil {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		// The leader is gone; members it left behind still get SIGKILL so
		// nothing of the group outlives an interrupt.
		SignalGroup(pgid, syscall.SIGKILL)
	case <-t.C:
		SignalGroup(pgid, syscall.SIGKILL)
	}
}
