//go:build !linux

package sockmark

import (
	"errors"
	"syscall"
)

// Control fails every dial when a mark is requested: SO_MARK exists
// only on Linux, and sending unmarked queries would bypass the firewall's
// expectations silently.
func Control(mark int) func(network, address string, c syscall.RawConn) error {
	if mark == 0 {
		return nil
	}
	return func(string, string, syscall.RawConn) error {
		return errors.New("sockmark: SO_MARK is only supported on Linux")
	}
}
