package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// A command's processes are found by the session it leads: execd starts
// every command with setsid, so the command's pid is also its session id
// and its first process group id. A fork bomb, `timeout` (which moves its
// child to a group of its own) or any other setpgid stays in the session;
// only a process that calls setsid itself leaves it, and the descendant
// walk catches those while their parents are alive.
//
// The sandbox runs in a Docker container whose cgroup v1 hierarchy is
// mounted read-only, so a per-command child cgroup (and the cgroup
// freezer) is not available to execd; see docs/execd.md.

// treeScan finds the processes of the tree led by leader.
type treeScan struct {
	leader int
	self   int
	selfPG int
}

// scan returns the live (non-zombie) members of the tree and the process
// groups they are in. Zombies are already dead: their parent or init reaps
// them.
func (t treeScan) scan() (pids []int, pgids map[int]bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	all := make(map[int]Stat, len(ents))
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := ReadStat(p); ok {
			all[p] = st
		}
	}
	pgids = map[int]bool{}
	for p, st := range all {
		if p == t.self || p <= 1 || st.State == 'Z' || st.State == 'X' {
			continue
		}
		if !t.inTree(p, st, all) {
			continue
		}
		pids = append(pids, p)
		if st.PGRP > 1 && st.PGRP != t.selfPG {
			pgids[st.PGRP] = true
		}
	}
	return pids, pgids
}

func (t treeScan) inTree(p int, st Stat, all map[int]Stat) bool {
	if p == t.leader || st.Session == t.leader || st.PGRP == t.leader {
		return true
	}
	// Ancestors, bounded: a pid reused into a cycle cannot loop forever.
	for i := 0; i < 4096 && st.PPID > 1; i++ {
		if st.PPID == t.leader {
			return true
		}
		if st.PPID == t.self {
			return false
		}
		next, ok := all[st.PPID]
		if !ok {
			return false
		}
		st = next
	}
	return false
}

func newTreeScan(leader int) (treeScan, error) {
	if leader <= 1 {
		return treeScan{}, fmt.Errorf("refusing to kill the tree of pid %d", leader)
	}
	self := os.Getpid()
	if leader == self {
		return treeScan{}, errors.New("refusing to kill execd's own tree")
	}
	return treeScan{leader: leader, self: self, selfPG: syscall.Getpgrp()}, nil
}

// SignalTree sends sig once to every process group and process of the
// tree led by leader (see KillTree for membership) and returns how many
// live processes it found.
func SignalTree(leader int, sig syscall.Signal) (int, error) {
	t, err := newTreeScan(leader)
	if err != nil {
		return 0, err
	}
	signalTree(t, sig)
	pids, _ := t.scan()
	return len(pids), nil
}

// CountTree returns how many live processes the tree led by leader has
// (see KillTree for membership).
func CountTree(leader int) (int, error) {
	t, err := newTreeScan(leader)
	if err != nil {
		return 0, err
	}
	pids, _ := t.scan()
	return len(pids), nil
}

func signalTree(t treeScan, sig syscall.Signal) int {
	// The leader's own group first: kill(-pgid) reaches every member of a
	// group atomically, so a group that forks as fast as it can is still
	// emptied in one call (the kernel restarts a fork that races with a
	// group-wide signal).
	syscall.Kill(-t.leader, sig)
	pids, pgids := t.scan()
	for pg := range pgids {
		syscall.Kill(-pg, sig)
	}
	for _, p := range pids {
		syscall.Kill(p, sig)
	}
	return len(pids)
}

// KillTree sends SIGKILL to every process in the tree led by leader — its
// session, its process group, and its descendants found through /proc —
// again and again until a scan of /proc finds none alive, or ctx ends.
// Each pass kills whole process groups with one kill(2) each, so a fork
// bomb cannot outrun it: every pass removes every process that existed
// when it started, and the pids limit bounds how many can appear.
func KillTree(ctx context.Context, leader int) error {
	t, err := newTreeScan(leader)
	if err != nil {
		return err
	}
	pause := time.Millisecond
	for pass := 1; ; pass++ {
		if signalTree(t, syscall.SIGKILL) == 0 {
			// Re-check after the kills: a process forked during the pass.
			if pids, _ := t.scan(); len(pids) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			pids, _ := t.scan()
			return fmt.Errorf("kill process tree of %d: %d processes left after %d passes: %w", leader, len(pids), pass, ctx.Err())
		case <-time.After(pause):
		}
		// Killed processes need a moment to exit; do not spin on them.
		if pause < 50*time.Millisecond {
			pause *= 2
		}
	}
}

// TerminateTree ends the tree led by leader: SIGTERM to all of it, then,
// once done is closed (the leader exited) or grace has passed, KillTree
// with up to killTimeout. Processes that outlive the leader are killed
// too, so nothing of a command survives its interrupt or timeout.
func TerminateTree(leader int, grace, killTimeout time.Duration, done <-chan struct{}) error {
	if _, err := SignalTree(leader, syscall.SIGTERM); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	return KillTree(ctx, leader)
}
