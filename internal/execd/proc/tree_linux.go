package proc

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Descendants returns the pids of every live descendant of pid, read from
// /proc. Processes that re-parented away (double fork) are not included.
func Descendants(pid int) []int {
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := ReadStat(p); ok {
			children[st.PPID] = append(children[st.PPID], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range children[cur] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Stat is the part of /proc/<pid>/stat execd uses.
type Stat struct {
	State   byte // R, S, D, Z, T, ...
	PPID    int
	PGRP    int
	Session int
}

// ReadStat reads /proc/<pid>/stat. The command name in field 2 may contain
// spaces and parentheses, so fields are counted after its last ')'.
func ReadStat(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return Stat{}, false
	}
	var st Stat
	st.State = f[0][0]
	for j, dst := range []*int{&st.PPID, &st.PGRP, &st.Session} {
		n, err := strconv.Atoi(string(f[j+1]))
		if err != nil {
			return Stat{}, false
		}
		*dst = n
	}
	return st, true
}

// SignalDescendants sends sig to every descendant of pid, leaving pid itself
// alone. It returns how many processes were signalled.
func SignalDescendants(pid int, sig syscall.Signal) int {
	n := 0
	for _, d := range Descendants(pid) {
		if syscall.Kill(d, sig) == nil {
			n++
		}
	}
	return n
}
