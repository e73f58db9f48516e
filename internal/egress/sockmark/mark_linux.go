package sockmark

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Control returns a net.Dialer Control func that sets SO_MARK to mark,
// or nil when mark is 0.
func Control(mark int) func(network, address string, c syscall.RawConn) error {
	if mark == 0 {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
		}); err != nil {
			return fmt.Errorf("sockmark: raw conn control: %w", err)
		}
		if serr != nil {
			return fmt.Errorf("sockmark: set SO_MARK %#x on %s socket to %s: %w", mark, network, address, serr)
		}
		return nil
	}
}
