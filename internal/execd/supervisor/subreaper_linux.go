package supervisor

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// becomeSubreaper marks the process as a child subreaper, so that orphaned
// descendants are reparented to it rather than to the namespace's init, and
// returns a function that undoes it if it was not set before.
func becomeSubreaper() (restore func(), err error) {
	var prev int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&prev)), 0, 0, 0); err != nil {
		return func() {}, fmt.Errorf("prctl(PR_GET_CHILD_SUBREAPER): %w", err)
	}
	if prev != 0 {
		return func() {}, nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return func() {}, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }, nil
}
