//go:build linux

package isolation

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// BootstrapEnv is set by the runtime in sandboxes created with isolated
// execution enabled, which it starts with CAP_SYS_ADMIN for this purpose.
const BootstrapEnv = sandbox.IsolationBootstrapEnv

// anchorDir holds the pid-only proc instance that lets sessions mount a
// proc of their own (see Bootstrap).
const anchorDir = "/run/opensandbox/isolation-proc"

// Bootstrap runs first in execd when the runtime asked for isolated
// execution (BootstrapEnv=1) and execd holds CAP_SYS_ADMIN, before any
// other process starts. It mounts a proc with subset=pid (it shows the pid
// directories the sandbox's /proc shows already, and nothing else): the
// kernel lets a process in a new user namespace mount proc only if a proc
// is fully visible in its mount namespace, and the runtime's /proc is not
// (Docker masks /proc/kcore, /proc/sys and others with mounts). Then it
// The anchor is read-only, and so the kernel lets nobody mount a writable
// proc in a user namespace here: root in a session (or any process of the
// sandbox in a user namespace of its own) is root on the host for files
// such as /proc/sysrq-trigger that no capability guards. Then Bootstrap
// drops CAP_SYS_ADMIN from every set of every thread, so that nothing
// execd starts ever holds it. Any failure is returned: execd must not
// run on with CAP_SYS_ADMIN.
func Bootstrap() error {
	if os.Getenv(BootstrapEnv) != "1" {
		return nil
	}
	os.Unsetenv(BootstrapEnv)
	has, err := hasCap(unix.CAP_SYS_ADMIN)
	if err != nil {
		return err
	}
	if !has {
		return nil // a re-executed execd, already without it
	}
	if err := os.MkdirAll(anchorDir, 0o555); err != nil {
		return fmt.Errorf("isolation bootstrap: %w", err)
	}
	err = unix.Mount("proc", anchorDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "subset=pid")
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("isolation bootstrap: mount the proc anchor: %w", err)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0); e != 0 {
		return fmt.Errorf("isolation bootstrap: drop CAP_SYS_ADMIN from the bounding set: %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("isolation bootstrap: capget: %w", err)
	}
	bit := uint32(1) << (unix.CAP_SYS_ADMIN % 32)
	i := unix.CAP_SYS_ADMIN / 32
	data[i].Effective &^= bit
	data[i].Permitted &^= bit
	data[i].Inheritable &^= bit
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("isolation bootstrap: drop CAP_SYS_ADMIN: %w", e)
	}
	if has, err := hasCap(unix.CAP_SYS_ADMIN); err != nil || has {
		return fmt.Errorf("isolation bootstrap: CAP_SYS_ADMIN is still held (%v)", err)
	}
	return nil
}

// hasCap reports whether the calling thread holds capability c in its
// effective or permitted set.
func hasCap(c int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("capget: %w", err)
	}
	bit := uint32(1) << (c % 32)
	return (data[c/32].Effective|data[c/32].Permitted)&bit != 0, nil
}
