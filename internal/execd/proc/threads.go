package proc

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// ReservedThreads is the most OS threads execd makes at start (see
// ReserveThreads and ThreadBudget).
const ReservedThreads = 32

// pidsFiles are where the pids controller states this cgroup's limit and
// use, for cgroup v1 and v2 as a container sees them.
var pidsFiles = [][2]string{
	{"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids/pids.current"},
	{"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids.current"},
}

// ThreadBudget is how many threads a process of execd may reserve: at
// most ReservedThreads, and at most an eighth of what the container's
// pids limit leaves free, so that reserving never exhausts a small limit
// itself (a thread the runtime cannot create is fatal). Without a pids
// limit it is ReservedThreads.
func ThreadBudget() int { return threadBudget(pidsFiles) }

func threadBudget(files [][2]string) int {
	for _, f := range files {
		free, ok := pidsFree(f[0], f[1])
		if ok {
			return max(0, min(ReservedThreads, free/8))
		}
	}
	return ReservedThreads
}

// pidsFree reads a pids limit and use; ok is false when there is no
// limit to read ("max", or no such files).
func pidsFree(maxFile, curFile string) (free int, ok bool) {
	m, err := os.ReadFile(maxFile)
	if err != nil {
		return 0, false
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(m)))
	if err != nil { // "max"
		return 0, false
	}
	c, err := os.ReadFile(curFile)
	if err != nil {
		return 0, false
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(c)))
	if err != nil {
		return 0, false
	}
	return limit - cur, true
}

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
