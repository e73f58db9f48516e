//go:build unix && !linux

package files

import (
	"io/fs"
	"syscall"
	"time"
)

// statDetails is what FileInfo needs beyond fs.FileInfo.
type statDetails struct {
	uid, gid uint32
	created  time.Time
}

// sysStat reads owner and group of abs; without statx the creation time is
// approximated by the modification time.
func sysStat(_ string, fi fs.FileInfo) statDetails {
	d := statDetails{created: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		d.uid, d.gid = uint32(st.Uid), uint32(st.Gid)
	}
	return d
}

// pseudoFS reports kernel pseudo-filesystems on Linux only.
func pseudoFS(string) string { return "" }
