package proc

import (
	"runtime"
	"sync"
)

// ReservedThreads is how many OS threads execd makes at start (see
// ReserveThreads).
const ReservedThreads = 64

// ReserveThreads makes the Go runtime create n OS threads now and keep
// them for later. Inside a sandbox every thread counts against the
// container's pids limit, which a fork bomb fills in milliseconds; a Go
// program that then needs one more thread for a blocking call dies with
// "failed to create new OS thread" — execd, and the sandbox with it, did.
// The runtime never ends an idle thread, so threads made here are reused
// for the rest of the process's life and the bomb cannot take them.
//
// Each of n goroutines is locked to a thread of its own until all of them
// are, then unlocked: a goroutine that exits unlocked leaves its thread
// idle, not terminated. It returns once the threads exist.
func ReserveThreads(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		locked.Add(1)
		done.Go(func() {
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		})
	}
	locked.Wait()
	close(release)
	done.Wait()
}
