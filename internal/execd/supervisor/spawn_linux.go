package supervisor

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// startServer forks the execd API server. It reads /dev/null, shares
// execd's stdout and stderr, and leads its own process group so that
// terminal signals do not reach it: the supervisor alone decides when it
// stops.
func (l *loop) startServer() error {
	pid, err := syscall.ForkExec(l.cfg.ServerPath, l.cfg.serverArgv(), &syscall.ProcAttr{
		Env:   l.cfg.serverEnv(),
		Files: []uintptr{l.devNull, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fmt.Errorf("fork/exec %s: %w", l.cfg.ServerPath, err)
	}
	l.server = child{pid: pid, started: time.Now()}
	l.serverPgid = pid
	l.log.Info("supervisor: execd server started", "pid", pid)
	return nil
}

// startEntrypoint forks the user's entrypoint with execd's stdin, stdout and
// stderr, in a process group of its own that signals are forwarded to, and
// hands it the terminal when execd has it. On failure it returns the exit
// code to report: 127 when the program does not exist, 126 when it cannot be
// executed or its working directory is unusable.
func (l *loop) startEntrypoint() (int, error) {
	argv := l.cfg.Entrypoint
	env := l.cfg.entrypointEnv()
	if l.cfg.Dir != "" {
		fi, err := os.Stat(l.cfg.Dir)
		if err != nil {
			return exitNotExecutable, fmt.Errorf("working directory: %w", err)
		}
		if !fi.IsDir() {
			return exitNotExecutable, fmt.Errorf("working directory %s: %w", l.cfg.Dir, syscall.ENOTDIR)
		}
	}
	path, err := lookPath(argv[0], env, l.cfg.Dir)
	if err != nil {
		return startFailureCode(err), err
	}
	fg := stdinIsForegroundTTY()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   l.cfg.Dir,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Foreground: fg,
			Ctty:       0, // with Foreground: execd's fd 0
			Pdeathsig:  syscall.SIGKILL,
		},
	})
	if err != nil {
		return startFailureCode(err), fmt.Errorf("fork/exec %s: %w", path, err)
	}
	l.entry = child{pid: pid, started: time.Now()}
	l.entryPgid = pid
	l.foreground = fg
	l.log.Info("supervisor: entrypoint started", "pid", pid, "argv", argv, "foreground", fg)
	return 0, nil
}
