package sandbox_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// ExampleClient_Create creates a sandbox, runs a command with its output
// streamed, writes and reads a file, and deletes the sandbox.
func ExampleClient_Create() {
	ctx := context.Background()
	// Reads OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY; options override them.
	c, err := sandbox.NewClient(sandbox.WithRequestTimeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:    "opensandbox/base:latest",
		Timeout:  15 * time.Minute,
		Metadata: map[string]string{"purpose": "example"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Kill(context.WithoutCancel(ctx))

	ex, err := sb.Run(ctx, "for i in 1 2 3; do echo line $i; done; echo oops >&2", sandbox.RunOptions{
		Handlers: &sandbox.Handlers{
			OnStdout: func(l sandbox.OutputLine) { fmt.Println("out:", l.Text) },
			OnStderr: func(l sandbox.OutputLine) { fmt.Fprintln(os.Stderr, "err:", l.Text) },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", ex.ExitCode)

	if err := sb.WriteFile(ctx, "/tmp/hello.txt", []byte("hello\n"), sandbox.WriteOptions{Mode: 644}); err != nil {
		log.Fatal(err)
	}
	data, err := sb.ReadFile(ctx, "/tmp/hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", data)
}

// ExampleSandbox_Forward serves a sandbox's noVNC (port 6080) on a free
// loopback port, for a browser, until interrupted.
func ExampleSandbox_Forward() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := sandbox.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Connect(ctx, "3f2c9a1e-...", sandbox.ConnectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	f, err := sb.Forward(ctx, 6080, sandbox.ForwardOptions{}) // Listen defaults to 127.0.0.1:0
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("open", f.URL()+"/vnc.html")
	select {
	case <-ctx.Done():
	case <-f.Done(): // the listener failed
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
