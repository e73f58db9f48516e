package proc

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
)

// UserOOMScoreAdj is the oom_score_adj of every process execd starts on a
// caller's behalf: the most the kernel allows, so that when the sandbox's
// memory cgroup runs out, the OOM killer takes the caller's processes and
// not execd (which keeps the container's own value). Raising the value
// needs no privilege; lowering it below the container's would need
// CAP_SYS_RESOURCE, which sandboxes do not have.
const UserOOMScoreAdj = 1000

// SetUserOOMScoreAdj gives process pid the score UserOOMScoreAdj. Call it
// right after the process started: its children inherit the score at
// fork. A program that forks within the microseconds between its exec and
// this write would leave that child at execd's score; a shell needs far
// longer than that to start.
func SetUserOOMScoreAdj(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
	if err := os.WriteFile(path, []byte(strconv.Itoa(UserOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj of %d: %w", pid, err)
	}
	return nil
}

// PreferAsOOMVictim is SetUserOOMScoreAdj for processes execd starts for
// a caller (shells, interpreters, terminals); a failure is logged, and the
// process then runs at execd's own score.
func PreferAsOOMVictim(pid int) {
	if err := SetUserOOMScoreAdj(pid); err != nil {
		slog.Warn("a caller's process stays at execd's OOM score", "pid", pid, "err", err)
	}
}
