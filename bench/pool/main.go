// Command pool-bench measures what the SDK's sandbox pool saves: the
// latency from asking for a sandbox to the output of its first command
// (`echo hi` through Sandbox.Run), once with Pool.Acquire from a warm pool
// and once with a cold Client.Create, against the real server binary and
// Docker, measured in the same run. It prints p50/p95 of both and their
// ratio, whose target is at most 0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func main() {
	serverBin := flag.String("server", "bin/opensandbox-server", "server binary")
	execdBin := flag.String("execd", "bin/execd", "execd binary")
	image := flag.String("image", "opensandbox/base:latest", "sandbox image (must exist locally)")
	n := flag.Int("n", 20, "rounds per side (at least 10)")
	flag.Parse()
	if *n < 10 {
		fmt.Fprintln(os.Stderr, "bench: -n must be at least 10")
		os.Exit(2)
	}
	if err := run(*serverBin, *execdBin, *image, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const key = "bench-key"

func run(serverBin, execdBin, image string, n int) error {
	addr, stop, err := benchkit.StartServer(serverBin, execdBin, key)
	if err != nil {
		return err
	}
	defer stop()

	ctx := context.Background()
	c, err := sandbox.NewClient(sandbox.WithDomain(addr), sandbox.WithAPIKey(key))
	if err != nil {
		return err
	}
	opts := sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Resources:  map[string]string{"cpu": "1", "memory": "256Mi"},
		Timeout:    10 * time.Minute,
	}
	pool, err := c.NewPool(ctx, sandbox.PoolOptions{
		Size: 2, Create: opts, FailFast: true, // an empty pool is a bench bug, not a slow round
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer pool.Close(ctx)

	// Warm the cold path once (image layers, page cache).
	if _, err := coldRound(ctx, c, opts); err != nil {
		return err
	}
	var warm, cold []time.Duration
	for range n {
		// Both rounds start with the pool full and no create in flight,
		// so background refills never overlap a measurement.
		if err := waitReady(ctx, pool); err != nil {
			return err
		}
		d, err := poolRound(ctx, pool)
		if err != nil {
			return err
		}
		warm = append(warm, d)
		if err := waitReady(ctx, pool); err != nil {
			return err
		}
		d, err = coldRound(ctx, c, opts)
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	p := benchkit.Percentile
	w50, w95, c50, c95 := p(warm, 50), p(warm, 95), p(cold, 50), p(cold, 95)
	verdict := "met"
	if float64(w50)/float64(c50) > 0.1 {
		verdict = "MISSED"
	}
	fmt.Printf("sandbox -> first command (%s, n=%d): pool Acquire p50 %v p95 %v | cold Create p50 %v p95 %v | ratio p50 %.3f p95 %.3f | target <= 0.1: %s\n",
		image, n, w50.Round(10*time.Microsecond), w95.Round(10*time.Microsecond), c50.Round(time.Millisecond), c95.Round(time.Millisecond),
		float64(w50)/float64(c50), float64(w95)/float64(c95), verdict)
	if st := pool.Stats(); st.Failures > 0 {
		fmt.Printf("pool create failures: %d (last: %s)\n", st.Failures, st.LastError)
	}
	return nil
}

func waitReady(ctx context.Context, p *sandbox.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return p.WaitReady(ctx)
}

// poolRound: Acquire from the warm pool and run the first command; the
// sandbox is killed after (not timed).
func poolRound(ctx context.Context, p *sandbox.Pool) (time.Duration, error) {
	t0 := time.Now()
	sb, err := p.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire: %w", err)
	}
	defer sb.Kill(ctx)
	return firstCommand(ctx, sb, t0)
}

// coldRound: Create and run the first command; killed after (not timed).
func coldRound(ctx context.Context, c *sandbox.Client, opts sandbox.CreateOptions) (time.Duration, error) {
	t0 := time.Now()
	sb, err := c.Create(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("create: %w", err)
	}
	defer sb.Kill(ctx)
	return firstCommand(ctx, sb, t0)
}

func firstCommand(ctx context.Context, sb *sandbox.Sandbox, t0 time.Time) (time.Duration, error) {
	ex, err := sb.Run(ctx, "echo hi", sandbox.RunOptions{})
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("run in %s: %w", sb.ID(), err)
	}
	if ex.ExitCode != 0 || ex.Text() != "hi" {
		return 0, fmt.Errorf("first command in %s: exit %d, output %q", sb.ID(), ex.ExitCode, ex.Text())
	}
	return d, nil
}
