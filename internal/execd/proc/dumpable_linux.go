package proc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SetNonDumpable makes the calling process non-dumpable: its
// /proc/<pid>/environ, mem and fds then need CAP_SYS_PTRACE, which a
// sandbox's processes lack even when they run as root. Programs it execs
// are dumpable again.
func SetNonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
