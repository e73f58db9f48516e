// Command quickstart creates a sandbox with the Go SDK, runs a command with
// its output streamed, writes and reads back a file, and kills the sandbox.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	// NewClient reads OPEN_SANDBOX_DOMAIN (default localhost:8080) and
	// OPEN_SANDBOX_API_KEY from the environment.
	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	start := time.Now()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Image: "opensandbox/base:latest", Timeout: 10 * time.Minute})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	fmt.Printf("sandbox %s ready in %v\n", sb.ID(), time.Since(start).Round(time.Millisecond))
	defer func() {
		if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
			log.Printf("kill: %v", err)
		} else {
			fmt.Println("sandbox killed")
		}
	}()

	ex, err := sb.Run(ctx, `echo "hello from $(uname -s)"; for i in 1 2 3; do echo "tick $i"; sleep 0.2; done; echo done >&2`,
		sandbox.RunOptions{Handlers: &sandbox.Handlers{
			OnStdout: func(l sandbox.OutputLine) { fmt.Println("  stdout:", l.Text) },
			OnStderr: func(l sandbox.OutputLine) { fmt.Println("  stderr:", l.Text) },
		}})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	fmt.Printf("exit code %d after %v\n", ex.ExitCode, ex.Elapsed)

	if err := sb.WriteFile(ctx, "/tmp/quickstart.txt", []byte("written by the Go SDK\n"), sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	data, err := sb.ReadFile(ctx, "/tmp/quickstart.txt")
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	fmt.Printf("file content: %s", data)
	return nil
}
