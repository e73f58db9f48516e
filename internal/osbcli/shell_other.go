//go:build !unix

package osbcli

// notifyResize does nothing where there is no SIGWINCH: the size sent at
// start stays.
func notifyResize(func()) (stop func()) { return func() {} }
