//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// usableCPUs lists the CPUs this process may run on, ascending.
func usableCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// pinProcess sets the affinity of every thread of process pid to cpu.
// sched_setaffinity acts on one thread, and the Go runtime already runs
// several; a thread created meanwhile by a thread not yet pinned is caught
// by the next pass, and once a pass finds no new thread every thread is
// pinned, so threads created later (which inherit their creator's
// affinity) are too.
func pinProcess(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	pinned := map[int]bool{}
	for {
		tids, err := threads(pid)
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if pinned[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // exited meanwhile
				}
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			pinned[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}

// checkPinned fails unless every thread of process pid may run on cpu only.
func checkPinned(pid, cpu int) error {
	tids, err := threads(pid)
	if err != nil {
		return err
	}
	for _, tid := range tids {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			return fmt.Errorf("affinity of thread %d of process %d: %w", tid, pid, err)
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			return fmt.Errorf("thread %d of process %d is not pinned to CPU %d", tid, pid, cpu)
		}
	}
	return nil
}

func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
