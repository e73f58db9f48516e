package supervisor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// reap collects every child that has exited, known or orphan, without
// blocking. SIGCHLD notifications coalesce, so one notification may stand for
// many exits: reap loops until wait4 has nothing more to report.
func (l *loop) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			return
		case err != nil:
			l.log.Error("supervisor: wait4 failed", "err", err)
			return
		case pid <= 0:
			return
		}
		switch pid {
		case l.entry.pid:
			l.onEntrypointExit(ws)
		case l.server.pid:
			l.onServerExit(ws)
		default:
			l.log.Debug("supervisor: reaped orphan", "pid", pid, "status", describe(ws))
		}
	}
}

// exitCode turns a wait status into a shell-style exit code.
func exitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}

// describe renders a wait status for logs.
func describe(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}
