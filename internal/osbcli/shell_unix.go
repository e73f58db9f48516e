//go:build unix

package osbcli

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize calls fn on every SIGWINCH until the returned stop runs.
func notifyResize(fn func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				fn()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
