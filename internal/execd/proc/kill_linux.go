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
// A scan of /proc is not a snapshot: readdir walks pids in order while a
// fork bomb's generations each fork and exit within microseconds, and once
// pids wrap a child can be born behind the walk while its parent dies ahead
// of it. A scan that sees a churning tree then finds only its zombies, or
// nothing (TestTimeoutEndsForkBomb failed that way: 300 processes alive, a
// scan found 4 zombies and called the tree empty). So zombies still name
// their process group, and the leader's own group is probed with kill(2),
// which the kernel answers atomically; a group's id cannot be reused while
// any member, zombie or not, is left.
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

// treeSeen is what one scan of /proc found of a tree.
type treeSeen struct {
	live    []int        // members not yet dead
	zombies int          // dead members not yet reaped
	pgids   map[int]bool // the process groups of all of them
}

// scan returns what /proc shows of the tree. Zombies are already dead
// (their parent or the subreaper reaps them) and are never signalled, but
// their groups are: a zombie's group may hold live members the walk missed.
func (t treeScan) scan() treeSeen {
	seen := treeSeen{pgids: map[int]bool{}}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return seen
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
	for p, st := range all {
		if p == t.self || p <= 1 || !t.inTree(p, st, all) {
			continue
		}
		if st.PGRP > 1 && st.PGRP != t.selfPG {
			seen.pgids[st.PGRP] = true
		}
		if st.State == 'Z' || st.State == 'X' {
			seen.zombies++
			continue
		}
		seen.live = append(seen.live, p)
	}
	return seen
}

// leaderGroupExists reports whether any process, live or zombie, is still
// in the leader's process group: one kill(2) with signal 0, which the
// kernel answers for the whole group at once.
func (t treeScan) leaderGroupExists() bool {
	return syscall.Kill(-t.leader, 0) != syscall.ESRCH
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
	return len(t.scan().live), nil
}

// TreeAlive reports whether anything of the tree led by leader is left:
// live members, zombies not yet reaped, or a non-empty leader's group
// (which a scan of a churning tree can miss; see above). live is how many
// live members the scan saw, for logs.
func TreeAlive(leader int) (alive bool, live int, err error) {
	t, err := newTreeScan(leader)
	if err != nil {
		return false, 0, err
	}
	seen := t.scan()
	return len(seen.live) > 0 || seen.zombies > 0 || t.leaderGroupExists(), len(seen.live), nil
}

// signalTree signals the tree and returns how many live members the scan
// found.
func signalTree(t treeScan, sig syscall.Signal) int {
	// The leader's own group first: kill(-pgid) reaches every member of a
	// group atomically, so a group that forks as fast as it can is still
	// emptied in one call (the kernel restarts a fork that races with a
	// group-wide signal).
	syscall.Kill(-t.leader, sig)
	seen := t.scan()
	for pg := range seen.pgids {
		syscall.Kill(-pg, sig)
	}
	for _, p := range seen.live {
		syscall.Kill(p, sig)
	}
	return len(seen.live)
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
			// The leader's group needs no probe here: the pass began with
			// a kill of the whole group, after which none of it can fork.
			if len(t.scan().live) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill process tree of %d: %d processes left after %d passes: %w", leader, len(t.scan().live), pass, ctx.Err())
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
