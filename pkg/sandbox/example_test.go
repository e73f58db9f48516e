package sandbox_test

import (
	"context"
	"fmt"
	"log"
	"os"
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
