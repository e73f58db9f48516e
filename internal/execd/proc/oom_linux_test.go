package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Children the process forked before its score was raised get the score
// too, grandchildren included.
func TestSetUserOOMScoreAdjReachesEarlierChildren(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Skip("no oom_score_adj here:", err)
	}
	if strings.TrimSpace(string(own)) == strconv.Itoa(UserOOMScoreAdj) {
		t.Skip("the test process already has the user score; nothing to tell apart")
	}
	cmd := exec.Command("sh", "-c", "sh -c 'sleep 30 & wait' & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range Descendants(cmd.Process.Pid) {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Ready when the shell has both children and the inner shell its sleep.
	deadline := time.Now().Add(10 * time.Second)
	for len(Descendants(cmd.Process.Pid)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the shells did not start their children: %v", Descendants(cmd.Process.Pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := SetUserOOMScoreAdj(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]int{cmd.Process.Pid}, Descendants(cmd.Process.Pid)...) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(UserOOMScoreAdj) {
			t.Errorf("pid %d has oom_score_adj %s, want %d", p, got, UserOOMScoreAdj)
		}
	}
}
