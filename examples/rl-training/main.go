// Command rl-training runs a small reinforcement-learning job in a sandbox:
// a CartPole controller trained with the cross-entropy method in numpy
// (train.py, next to this file). The training streams its progress, writes
// checkpoints and a JSON summary inside the sandbox, and this program reads
// them back through the files API.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/rl-training
//
// RL_ITERATIONS (default 20) sets the training length, RL_OUT a local
// directory to download the summary and the last checkpoint into, and
// EXAMPLE_IMAGE the image (default opensandbox/code-interpreter:latest,
// which has numpy).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

//go:embed train.py
var trainPy []byte

// workDir is where the job runs inside the sandbox.
const workDir = "/workspace/rl"

// summary is the part of runs/summary.json this program reads.
type summary struct {
	Iterations     int      `json:"iterations"`
	BaselineReward float64  `json:"baseline_reward"`
	FinalReward    float64  `json:"final_reward"`
	Solved         bool     `json:"solved"`
	Checkpoints    []string `json:"checkpoints"`
	Seconds        float64  `json:"seconds"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	iterations := 20
	if v := os.Getenv("RL_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("RL_ITERATIONS=%q: want a positive number", v)
		}
		iterations = n
	}
	image := os.Getenv("EXAMPLE_IMAGE")
	if image == "" {
		image = "opensandbox/code-interpreter:latest"
	}

	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    15 * time.Minute,
		Metadata:   map[string]string{"example": "rl-training"},
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	fmt.Printf("sandbox %s\n", sb.ID())
	defer func() {
		if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
			log.Printf("kill: %v", err)
		}
	}()

	if err := sb.Mkdir(ctx, workDir, sandbox.Permission{Mode: 755}); err != nil {
		return fmt.Errorf("mkdir %s: %w", workDir, err)
	}
	if err := sb.WriteFile(ctx, path.Join(workDir, "train.py"), trainPy, sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("upload train.py: %w", err)
	}

	cmd := fmt.Sprintf("python3 train.py --iterations %d --out runs", iterations)
	ex, err := sb.Run(ctx, cmd, sandbox.RunOptions{
		Cwd:     workDir,
		Timeout: 10 * time.Minute,
		Handlers: &sandbox.Handlers{
			OnStdout: func(l sandbox.OutputLine) { fmt.Println("  train:", l.Text) },
			OnStderr: func(l sandbox.OutputLine) { fmt.Println("  train (stderr):", l.Text) },
		},
	})
	if err != nil {
		return fmt.Errorf("run %q: %w", cmd, err)
	}
	if ex.ExitCode != 0 {
		return fmt.Errorf("training exited with code %d", ex.ExitCode)
	}

	// The checkpoints as the files API sees them, not as the script says.
	found, err := sb.Search(ctx, path.Join(workDir, "runs", "checkpoints"), "*.npz")
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Path < found[j].Path })
	for _, f := range found {
		fmt.Printf("checkpoint %s (%d bytes)\n", f.Path, f.Size)
	}
	if len(found) == 0 {
		return fmt.Errorf("no checkpoint in %s/runs/checkpoints", workDir)
	}

	raw, err := sb.ReadFile(ctx, path.Join(workDir, "runs", "summary.json"))
	if err != nil {
		return fmt.Errorf("read summary: %w", err)
	}
	var s summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("summary.json: %w", err)
	}
	fmt.Printf("summary: %d iterations in %.1fs, reward %.1f -> %.1f, solved %v, %d checkpoints\n",
		s.Iterations, s.Seconds, s.BaselineReward, s.FinalReward, s.Solved, len(s.Checkpoints))

	if out := os.Getenv("RL_OUT"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "summary.json"), raw, 0o644); err != nil {
			return err
		}
		last := found[len(found)-1]
		data, err := sb.ReadFile(ctx, last.Path)
		if err != nil {
			return fmt.Errorf("download %s: %w", last.Path, err)
		}
		dst := filepath.Join(out, path.Base(last.Path))
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
		fmt.Printf("downloaded summary.json and %s to %s\n", path.Base(last.Path), out)
	}
	return nil
}
