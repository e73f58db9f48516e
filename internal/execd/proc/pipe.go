package proc

import (
	"os"
	"syscall"
)

// ReadBuffered hands fn what f (a pipe or terminal registered with the
// runtime poller) holds right now, without waiting, up to 64 reads of buf.
//
// The output pumps stop reading a stream at a deadline after the process
// exits; but a read whose deadline has passed fails without looking at the
// descriptor, so a pump that runs late on a loaded machine would drop
// output the process wrote before it exited. They call this first. The
// limit keeps a process left behind that keeps writing from holding the
// caller here. f's descriptor is non-blocking, so an empty pipe answers
// EAGAIN at once (and a terminal with no writer EIO).
func ReadBuffered(f *os.File, buf []byte, fn func([]byte)) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	for range 64 {
		var n int
		var rerr error
		// Control, not Read: Read fails at once on the expired deadline.
		if err := rc.Control(func(fd uintptr) {
			n, rerr = syscall.Read(int(fd), buf)
		}); err != nil || rerr != nil || n <= 0 {
			return
		}
		fn(buf[:n])
	}
}
