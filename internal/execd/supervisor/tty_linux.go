package supervisor

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The entrypoint runs in its own process group. When execd's stdin is a
// terminal whose foreground group is execd's own, the entrypoint's group is
// made the foreground group instead: it can then read the terminal (no
// SIGTTIN), and keys such as Ctrl-C reach it and its children directly,
// exactly once, as they would under a shell.

// stdinIsForegroundTTY reports whether fd 0 is a terminal on which this
// process's group is in the foreground.
func stdinIsForegroundTTY() bool {
	pgrp, err := unix.IoctlGetUint32(0, unix.TIOCGPGRP)
	return err == nil && int(pgrp) == unix.Getpgrp()
}

// reclaimForeground makes this process's group the terminal's foreground
// group again. It must run on a goroutine locked to its thread: SIGTTOU,
// which a background group changing the foreground would get, is blocked on
// that thread for the duration of the call.
func reclaimForeground() error {
	var block, old unix.Sigset_t
	sigaddset(&block, unix.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &block, &old); err != nil {
		return fmt.Errorf("block SIGTTOU: %w", err)
	}
	defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	if err := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp()); err != nil {
		return fmt.Errorf("tcsetpgrp: %w", err)
	}
	return nil
}

func sigaddset(set *unix.Sigset_t, sig unix.Signal) {
	const bits = uint(unsafe.Sizeof(set.Val[0]) * 8)
	n := uint(sig) - 1
	set.Val[n/bits] |= 1 << (n % bits)
}
