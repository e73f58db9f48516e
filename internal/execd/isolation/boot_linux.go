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
		return dropUnheld()
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

// dropUnheld handles an execd that does not hold CAP_SYS_ADMIN although
// the runtime asked for the bootstrap: one that does not start as root
// (the image's USER), or re-executed after the drop. The container still
// has CAP_SYS_ADMIN in the bounding set of every process unless it was
// dropped, and without no_new_privs a setuid-root or file-capability
// binary would grant it for real: more than a sandbox without isolated
// execution ever gets. Dropping it needs CAP_SETPCAP, which a non-root
// execd lacks; then execd may run on only under no_new_privs (inherited by
// every process it starts, and irrevocable), which makes the bounding set
// unreachable. Sessions are unavailable to such an execd anyway.
func dropUnheld() error {
	in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_ADMIN, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("isolation bootstrap: read the bounding set: %w", err)
	}
	if in == 0 {
		return nil
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0); e == 0 {
		return nil
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err == nil && nnp == 1 {
		return nil
	}
	return fmt.Errorf("isolation bootstrap: CAP_SYS_ADMIN is in the bounding set and execd (uid %d) cannot drop it, and no_new_privs is off: "+
		"a setuid binary could hand it to any process; isolated execution needs execd to start as root, or no-new-privileges", os.Geteuid())
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
