// Command btrfs-squota turns on btrfs simple quotas (kernel 6.7+) on the
// filesystem holding DIR, for Docker's btrfs storage driver: Debian 12's
// btrfs-progs (6.2) has no `btrfs quota enable --simple`. Simple quotas
// charge each extent to the subvolume that wrote it, so a container's
// limit counts only what it wrote, and their accounting never turns
// inconsistent (full quota groups do on large deletions and then stop
// enforcing). Already on: nothing to do. See docs/server.md#disk-limits.
//
//	go run ./scripts/btrfs-squota DIR
package main

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// From linux/btrfs.h: BTRFS_IOC_QUOTA_CTL is _IOWR(0x94, 40, struct
// btrfs_ioctl_quota_ctl_args {__u64 cmd; __u64 status;}).
const (
	iocQuotaCtl        = 0xC0109428
	quotaCtlEnableSimp = 4 // BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
	btrfsSuperMagic    = 0x9123683E
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: btrfs-squota DIR")
		os.Exit(2)
	}
	if err := enable(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "btrfs-squota:", err)
		os.Exit(1)
	}
}

func enable(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if uint32(st.Type) != btrfsSuperMagic {
		return fmt.Errorf("%s is not on btrfs (filesystem type %#x)", dir, st.Type)
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	args := struct{ cmd, status uint64 }{cmd: quotaCtlEnableSimp}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocQuotaCtl, uintptr(unsafe.Pointer(&args)))
	switch {
	case errno == 0:
		return nil
	case errors.Is(errno, unix.EEXIST):
		return nil // quotas already on
	case errors.Is(errno, unix.EINVAL), errors.Is(errno, unix.EOPNOTSUPP):
		return fmt.Errorf("enable simple quotas on %s: %w (needs Linux 6.7 or later)", dir, errno)
	}
	return fmt.Errorf("enable simple quotas on %s: %w", dir, errno)
}
