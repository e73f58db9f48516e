package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// phase is where the supervisor is in its life.
type phase int

const (
	phaseRunning        phase = iota // entrypoint running, server kept alive
	phaseStopEntrypoint              // entrypoint asked to stop, waiting for it
	phaseStopServer                  // entrypoint gone, server asked to stop
	phaseDone                        // everything reaped (or given up on)
)

// child is one of the two known children; pid is 0 while it is not running.
// Each leads its own process group, whose id is its pid.
type child struct {
	pid     int
	started time.Time
}

// loop is the state of one Run. All of it is owned by the goroutine in run:
// forking, reaping and signalling happen there only, so a pid is never
// signalled after it has been reaped.
type loop struct {
	s       *Supervisor
	cfg     Config
	log     *slog.Logger
	devNull uintptr

	server, entry child
	entryPgid     int  // the entrypoint's group, kept after the leader is reaped
	serverPgid    int  // the last server's group, kept likewise
	foreground    bool // the entrypoint's group owns the terminal

	phase phase
	code  int
	err   error
	bo    backoff

	restart, entryGrace, serverGrace, drain alarm
}

func newLoop(s *Supervisor, cfg Config, devNull uintptr) *loop {
	return &loop{
		s:       s,
		cfg:     cfg,
		log:     cfg.Logger,
		devNull: devNull,
		bo:      newServerBackoff(),
	}
}

func (l *loop) run(ctx context.Context, chld, fwd <-chan os.Signal) (int, error) {
	if err := l.startServer(); err != nil {
		l.log.Error("supervisor: cannot start the execd server", "path", l.cfg.ServerPath, "err", err)
		return exitSupervisorFailure, fmt.Errorf("supervisor: start server: %w", err)
	}
	if code, err := l.startEntrypoint(); err != nil {
		l.code = code
		l.err = fmt.Errorf("supervisor: start entrypoint %q: %w", l.cfg.Entrypoint[0], err)
		l.log.Error("supervisor: cannot start the entrypoint; stopping execd",
			"argv", l.cfg.Entrypoint, "exitCode", l.code, "err", err)
		l.stopServer()
	}

	done := ctx.Done()
	for l.advance() {
		select {
		case <-chld:
			l.reap()
		case sig := <-fwd:
			l.onSignal(sig.(syscall.Signal))
		case <-done:
			done = nil
			l.log.Info("supervisor: context cancelled; shutting down")
			l.shutdown(syscall.SIGTERM)
		case <-l.restart.C():
			l.restart.fired()
			l.restartServer()
		case <-l.entryGrace.C():
			l.entryGrace.fired()
			if l.entry.pid != 0 {
				l.log.Warn("supervisor: entrypoint still running after grace period; killing its process group",
					"pid", l.entry.pid, "grace", l.cfg.StopGrace)
				l.killGroup(l.entryPgid, syscall.SIGKILL)
			}
		case <-l.serverGrace.C():
			l.serverGrace.fired()
			if l.server.pid != 0 {
				l.log.Warn("supervisor: execd server still running after grace period; killing its process group",
					"pid", l.server.pid, "grace", l.cfg.StopGrace)
				l.killGroup(l.serverPgid, syscall.SIGKILL)
			}
		case <-l.drain.C():
			l.drain.fired()
			l.log.Warn("supervisor: processes left in the entrypoint's or server's process group after SIGKILL; not waiting for them",
				"entrypointGroup", l.entryPgid, "serverGroup", l.serverPgid)
			l.phase = phaseDone
		}
	}
	l.reap() // collect whatever exited in the meantime
	for _, a := range []*alarm{&l.restart, &l.entryGrace, &l.serverGrace, &l.drain} {
		a.stop()
	}
	return l.code, l.err
}

// advance reports whether the loop must keep running, ending it once the
// server is stopped and both process groups are empty.
func (l *loop) advance() bool {
	if l.phase == phaseStopServer && l.server.pid == 0 {
		if l.groupsEmpty() {
			l.phase = phaseDone
		} else if !l.drain.armed() {
			l.drain.set(l.cfg.StopGrace)
		}
	}
	return l.phase != phaseDone
}

// onSignal handles a signal sent to the supervisor.
func (l *loop) onSignal(sig syscall.Signal) {
	if sig == syscall.SIGTERM || sig == syscall.SIGINT {
		l.log.Info("supervisor: received signal; shutting down", "signal", sig)
		l.shutdown(sig)
		return
	}
	l.forward(sig)
}

// shutdown passes sig to the entrypoint and gives it StopGrace to exit.
func (l *loop) shutdown(sig syscall.Signal) {
	switch l.phase {
	case phaseRunning:
		l.phase = phaseStopEntrypoint
		l.restart.stop()
		l.forward(sig)
		l.entryGrace.set(l.cfg.StopGrace)
	case phaseStopEntrypoint:
		l.forward(sig)
	}
}

// forward sends sig to the entrypoint's process group.
func (l *loop) forward(sig syscall.Signal) {
	if l.entry.pid == 0 {
		l.log.Debug("supervisor: entrypoint not running; signal dropped", "signal", sig)
		return
	}
	l.log.Debug("supervisor: forwarding signal to the entrypoint", "signal", sig, "pgid", l.entryPgid)
	l.killGroup(l.entryPgid, sig)
}

// onEntrypointExit records the entrypoint's status and stops the server.
func (l *loop) onEntrypointExit(ws unix.WaitStatus) {
	l.entry.pid = 0
	l.code = exitCode(ws)
	l.log.Info("supervisor: entrypoint exited", "status", describe(ws), "exitCode", l.code)
	// Nothing of the entrypoint outlives it, as when a container's init
	// exits: whatever is left in its process group is killed.
	l.killGroup(l.entryPgid, syscall.SIGKILL)
	if l.foreground {
		l.foreground = false
		if err := reclaimForeground(); err != nil {
			l.log.Warn("supervisor: cannot take the terminal back from the entrypoint", "err", err)
		}
	}
	l.stopServer()
}

// stopServer asks the server to exit and gives it StopGrace to do so.
func (l *loop) stopServer() {
	l.phase = phaseStopServer
	l.entryGrace.stop()
	l.restart.stop()
	if l.server.pid != 0 {
		l.log.Info("supervisor: stopping the execd server", "pid", l.server.pid)
		if err := unix.Kill(l.server.pid, syscall.SIGTERM); err != nil {
			l.log.Warn("supervisor: cannot signal the execd server", "pid", l.server.pid, "err", err)
		}
		l.serverGrace.set(l.cfg.StopGrace)
	}
}

// onServerExit restarts the server if the entrypoint still runs.
func (l *loop) onServerExit(ws unix.WaitStatus) {
	uptime := time.Since(l.server.started)
	l.server.pid = 0
	switch l.phase {
	case phaseRunning:
		delay := l.bo.delay(uptime)
		l.log.Error("supervisor: execd server exited unexpectedly; restarting",
			"status", describe(ws), "uptime", uptime, "restartIn", delay)
		// What the crashed server left in its group (background commands)
		// keeps running; it is reaped as orphans are.
		l.serverPgid = 0
		l.restart.set(delay)
	case phaseStopEntrypoint:
		l.log.Warn("supervisor: execd server exited during shutdown; not restarting", "status", describe(ws))
		l.killGroup(l.serverPgid, syscall.SIGKILL)
	default:
		l.serverGrace.stop()
		l.log.Info("supervisor: execd server stopped", "status", describe(ws))
		l.killGroup(l.serverPgid, syscall.SIGKILL)
	}
}

// restartServer starts the server again after a crash.
func (l *loop) restartServer() {
	if l.phase != phaseRunning || l.server.pid != 0 {
		return
	}
	l.s.restarts.Add(1)
	if err := l.startServer(); err != nil {
		delay := l.bo.delay(0)
		l.log.Error("supervisor: cannot restart the execd server", "err", err, "retryIn", delay)
		l.restart.set(delay)
		return
	}
	l.log.Info("supervisor: execd server restarted", "pid", l.server.pid, "restarts", l.s.Restarts())
}

// killGroup sends sig to process group pgid; a group that is already empty
// is not an error.
func (l *loop) killGroup(pgid int, sig syscall.Signal) {
	if pgid <= 0 {
		return
	}
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		l.log.Warn("supervisor: cannot signal process group", "pgid", pgid, "signal", sig, "err", err)
	}
}

// groupsEmpty reports whether every process of the entrypoint's and the
// server's groups has been reaped.
func (l *loop) groupsEmpty() bool {
	for _, pgid := range []int{l.entryPgid, l.serverPgid} {
		if pgid > 0 && unix.Kill(-pgid, 0) != unix.ESRCH {
			return false
		}
	}
	return true
}
