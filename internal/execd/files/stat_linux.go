package files

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// statDetails is what FileInfo needs beyond fs.FileInfo.
type statDetails struct {
	uid, gid uint32
	created  time.Time
}

// sysStat reads owner, group and birth time of abs. The birth time comes
// from statx(STATX_BTIME); filesystems without one report the ctime.
func sysStat(abs string, fi fs.FileInfo) statDetails {
	var d statDetails
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		d.uid, d.gid = st.Uid, st.Gid
		d.created = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	} else {
		d.created = fi.ModTime()
	}
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, abs, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BTIME, &stx)
	if err == nil && stx.Mask&unix.STATX_BTIME != 0 {
		d.created = time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec))
	}
	return d
}

// pseudoFS names the kernel's virtual filesystem abs lies on (proc, sysfs,
// cgroup, ...), or "" for an ordinary one. Their files are views of kernel
// state: they cannot be renamed, and copying them (a move across
// filesystems) reads nothing sensible — /proc/<pid>/mem fails with EIO.
func pseudoFS(abs string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(abs, &st); err != nil {
		return ""
	}
	switch int64(st.Type) {
	case unix.PROC_SUPER_MAGIC:
		return "proc"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroup"
	case unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.BPF_FS_MAGIC:
		return "kernel debug/security"
	case unix.DEVPTS_SUPER_MAGIC:
		return "devpts"
	}
	return ""
}
