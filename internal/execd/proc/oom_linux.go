package proc

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// UserOOMScoreAdj is the oom_score_adj of every process execd starts on a
// caller's behalf: the most the kernel allows, so that when the sandbox's
// memory cgroup runs out, the OOM killer takes the caller's processes and
// not execd (which keeps the container's own value). Raising the value
// needs no privilege; lowering it below the container's would need
// CAP_SYS_RESOURCE, which sandboxes do not have.
const UserOOMScoreAdj = 1000

// SetUserOOMScoreAdj gives process pid the score UserOOMScoreAdj, and so
// every child it forks from then on. Children it forked before the write
// (a shell that ran `cat` while execd was descheduled after starting it:
// TestCommandsGetHighOOMScoreAdj failed so under load) are found through
// /proc/<pid>/task/<tid>/children, read after the write so none is missed,
// and get it too, recursively. Only an orphan re-parented away before it
// is reached keeps the old score.
func SetUserOOMScoreAdj(pid int) error {
	if err := writeOOMScoreAdj(pid); err != nil {
		return err
	}
	budget := maxOOMFixups
	fixChildren(pid, &budget)
	return nil
}

// maxOOMFixups bounds the children walk: a fork bomb started by the very
// first line of a command must not keep execd busy.
const maxOOMFixups = 1024

func fixChildren(pid int, budget *int) {
	for _, c := range childrenOf(pid) {
		if *budget <= 0 {
			return
		}
		*budget--
		// A child that already exited has nothing to fix.
		if writeOOMScoreAdj(c) == nil {
			fixChildren(c, budget)
		}
	}
}

func writeOOMScoreAdj(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
	if err := os.WriteFile(path, []byte(strconv.Itoa(UserOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj of %d: %w", pid, err)
	}
	return nil
}

// childrenOf lists the children of every thread of pid.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// PreferAsOOMVictim is SetUserOOMScoreAdj for processes execd starts for
// a caller (shells, interpreters, terminals); a failure is logged, and the
// process then runs at execd's own score.
func PreferAsOOMVictim(pid int) {
	if err := SetUserOOMScoreAdj(pid); err != nil {
		slog.Warn("a caller's process stays at execd's OOM score", "pid", pid, "err", err)
	}
}
