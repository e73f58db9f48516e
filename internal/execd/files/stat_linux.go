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
