package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// forwardedSignals are passed on to the entrypoint's process group; SIGTERM
// and SIGINT also start the shutdown.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// Run starts the server and the entrypoint and supervises them until the
// entrypoint has exited and the server has been stopped. It may be called
// once per Supervisor.
//
// exitCode is always the code execd should exit with: the entrypoint's exit
// status, or 128+n when signal n killed it; 127 when the entrypoint does not
// exist and 126 when it cannot be executed (err then says why); 125 when the
// supervisor itself could not work (err says why). Cancelling ctx stops the
// children as SIGTERM does.
func (s *Supervisor) Run(ctx context.Context) (exitCode int, err error) {
	if len(s.cfg.Entrypoint) == 0 {
		return exitSupervisorFailure, ErrNoEntrypoint
	}
	if !s.ran.CompareAndSwap(false, true) {
		return exitSupervisorFailure, errors.New("supervisor: Run called more than once")
	}
	if err := ctx.Err(); err != nil {
		return exitSupervisorFailure, fmt.Errorf("supervisor: not started: %w", err)
	}
	cfg := s.cfg.withDefaults()

	// Every fork happens on this thread. Pdeathsig is delivered when the
	// thread that forked a child exits, so it must outlive the children;
	// blocking SIGTTOU in reclaimForeground needs a fixed thread too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	// Subscribe before the first fork so that no exit goes unnoticed.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	fwd := make(chan os.Signal, 16)
	signal.Notify(fwd, forwardedSignals...)
	defer signal.Stop(fwd)

	restore, err := becomeSubreaper()
	if err != nil {
		cfg.Logger.Warn("supervisor: orphans will not be reparented to execd", "err", err)
	}
	defer restore()

	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return exitSupervisorFailure, fmt.Errorf("supervisor: open server stdin: %w", err)
	}
	defer devNull.Close()

	l := newLoop(s, cfg, devNull.Fd())
	return l.run(ctx, chld, fwd)
}
