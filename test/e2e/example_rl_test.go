package e2e

import (
	"archive/zip"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// TestExampleRLTraining runs examples/rl-training against a real server:
// the CartPole job trains in a code-interpreter sandbox, and what the
// example downloads through the files API is checked here, not its words.
func TestExampleRLTraining(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := ensureCodeInterpreterImage(t)
	out := t.TempDir()
	cmd := osexec.Command("go", "run", "./examples/rl-training")
	cmd.Dir = openapitest.RepoPath(".")
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey,
		"EXAMPLE_IMAGE="+image,
		"RL_ITERATIONS=20",
		"RL_OUT="+out)
	stdout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/rl-training: %v\n%s", err, stdout)
	}
	if !strings.Contains(string(stdout), "train: iteration 20:") {
		t.Errorf("the training's output was not streamed:\n%s", stdout)
	}

	raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("summary.json was not downloaded: %v\n%s", err, stdout)
	}
	var sum struct {
		Iterations     int      `json:"iterations"`
		BaselineReward float64  `json:"baseline_reward"`
		FinalReward    float64  `json:"final_reward"`
		MaxSteps       float64  `json:"max_steps"`
		Checkpoints    []string `json:"checkpoints"`
		History        []struct {
			PolicyReward float64 `json:"policy_reward"`
		} `json:"history"`
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatalf("summary.json: %v\n%s", err, raw)
	}
	if sum.Iterations != 20 || len(sum.History) != 20 || len(sum.Checkpoints) != 4 {
		t.Errorf("summary: %d iterations, %d history rows, checkpoints %v; want 20, 20 and 4", sum.Iterations, len(sum.History), sum.Checkpoints)
	}
	// The job learned: the trained policy balances far longer than the
	// untrained one (the cross-entropy method reaches the cap here).
	if sum.FinalReward < 0.9*sum.MaxSteps || sum.FinalReward < 5*sum.BaselineReward {
		t.Errorf("final reward %.1f from baseline %.1f (cap %.0f): the policy did not learn", sum.FinalReward, sum.BaselineReward, sum.MaxSteps)
	}

	// The last checkpoint is a real numpy archive holding the policy.
	zr, err := zip.OpenReader(filepath.Join(out, "policy-0020.npz"))
	if err != nil {
		t.Fatalf("the last checkpoint: %v", err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "mean.npy") {
		t.Errorf("checkpoint holds %v; want mean.npy", names)
	}
}
