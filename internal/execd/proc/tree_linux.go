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
		if pp, ok := parentPID(p); ok {
			children[pp] = append(children[pp], p)
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

// parentPID reads the ppid field of /proc/<pid>/stat. The command name in
// field 2 may contain spaces and parentheses, so parsing starts after the
// last ')'.
func parentPID(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(fields[1]))
	return pp, err == nil
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
