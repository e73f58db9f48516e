//go:build unix

package tlsproxy

import (
	"syscall"
)

// alive reports whether an idle origin connection can carry a request:
// nothing unread is buffered and the socket has neither data (an alert, a
// stray response) nor end of stream waiting. The check is one non-blocking
// peek, so a request is never written to a connection the origin already
// closed while it was idle.
func (uc *upConn) alive() bool {
	if uc.br.Buffered() > 0 {
		return false
	}
	sc, ok := uc.raw.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			_ = n // n > 0: data waiting; n == 0 without error: end of stream
			ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
			return true
		}
	})
	return err == nil && ok
}
