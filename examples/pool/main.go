// Command pool keeps two sandboxes warm with the SDK's client-side pool,
// hands one out at once, runs a command in it and shuts the pool down.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/pool
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
	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	image := os.Getenv("EXAMPLE_IMAGE")
	if image == "" {
		image = "opensandbox/base:latest"
	}
	pool, err := c.NewPool(ctx, sandbox.PoolOptions{
		Size: 2,
		Create: sandbox.CreateOptions{
			Image:     image,
			Timeout:   10 * time.Minute,
			Resources: map[string]string{"cpu": "1", "memory": "256Mi"},
			Metadata:  map[string]string{"example": "pool"},
		},
	})
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pool.Close(closeCtx); err != nil {
			log.Printf("closing the pool: %v", err)
		}
	}()
	if err := pool.WaitReady(ctx); err != nil {
		return fmt.Errorf("warming the pool: %w", err)
	}

	start := time.Now()
	sb, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer sb.Kill(context.Background())
	ex, err := sb.Run(ctx, "echo warm sandbox $(hostname)", sandbox.RunOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("%s (acquire + first command: %v)\n", ex.Text(), time.Since(start).Round(time.Millisecond))
	fmt.Printf("pool: %+v\n", pool.Stats())
	return nil
}
