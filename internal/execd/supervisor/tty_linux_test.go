package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTerminalForeground runs a supervisor whose stdin is its controlling
// terminal (a fresh pty), as under "docker run -it": the entrypoint must own
// the terminal while it runs, and the supervisor must own it again after.
func TestTerminalForeground(t *testing.T) {
	ptmx, pts, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal available: %v", err)
	}
	defer ptmx.Close()
	defer pts.Close()

	dir := t.TempDir()
	cmd := exec.Command(self(), "-test.run=^$")
	cmd.Env = helperEnv(dir, "tty-supervisor")
	cmd.Stdin = pts
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run supervisor on a terminal: %v\n%s", err, out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 5 {
		t.Fatalf("supervisor on a terminal exited %d; want 5 (entrypoint in the foreground, terminal given back after)\n%s", code, out.String())
	}
}

// ttySupervisor is the helper role: a supervisor on its terminal.
func ttySupervisor(dir string) int {
	if !stdinIsForegroundTTY() {
		fmt.Fprintln(os.Stderr, "tty-supervisor: stdin is not a terminal this process owns")
		return 90
	}
	code, err := Run(context.Background(), Config{
		Entrypoint: []string{self(), "-test.run=^$"},
		Env:        helperEnv(dir, "tty-check"),
		ServerPath: self(),
		ServerEnv:  helperEnv(dir, "serve"),
		StopGrace:  5 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tty-supervisor:", err)
		return 91
	}
	if !stdinIsForegroundTTY() {
		fmt.Fprintln(os.Stderr, "tty-supervisor: terminal not given back after the entrypoint exited")
		return 92
	}
	return code
}

// ttyCheck is the helper role: an entrypoint that must lead the terminal's
// foreground process group.
func ttyCheck() int {
	pgrp, err := unix.IoctlGetUint32(0, unix.TIOCGPGRP)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "tty-check: tcgetpgrp:", err)
		return 80
	case unix.Getpgrp() != os.Getpid():
		fmt.Fprintf(os.Stderr, "tty-check: in group %d, not its own\n", unix.Getpgrp())
		return 81
	case int(pgrp) != unix.Getpgrp():
		fmt.Fprintf(os.Stderr, "tty-check: foreground group is %d, not ours (%d)\n", pgrp, unix.Getpgrp())
		return 82
	}
	return 5
}

// openPTY opens a new pseudo-terminal pair.
func openPTY() (ptmx, pts *os.File, err error) {
	ptmx, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptmx.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		ptmx.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		return nil, nil, err
	}
	return ptmx, pts, nil
}
