// Command vscode starts code-server (VS Code in the browser) in an
// opensandbox/vscode sandbox on port 8443 with /workspace open, and serves
// it on a local port through a forwarder that adds the endpoint's access
// token, since a browser cannot.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... go run ./examples/vscode
//
// It prints the address to open in your browser and keeps the sandbox until
// Ctrl+C. With VSCODE_SCREENSHOT=vscode.png it instead loads the UI in a
// headless Chromium on this machine, waits until the workbench shows the
// workspace's files, saves a screenshot and exits. EXAMPLE_IMAGE overrides
// the image.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/opensandbox-go/opensandbox/examples/internal/hostbrowser"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fileName is written into /workspace; the workbench is ready once its
// explorer lists it.
const fileName = "hello_from_the_sandbox.py"

const ready = `!!document.querySelector('.monaco-workbench') &&
  [...document.querySelectorAll('.explorer-folders-view .monaco-list-row')].some(r => r.textContent.includes('` + fileName + `'))`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	image := envOr("EXAMPLE_IMAGE", "opensandbox/vscode:latest")
	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:      image,
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    10 * time.Minute,
		Resources:  map[string]string{"cpu": "1", "memory": "2Gi"},
		Metadata:   map[string]string{"example": "vscode"},
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

	src := "print('hello from the sandbox')\n"
	if err := sb.WriteFile(ctx, "/workspace/"+fileName, []byte(src), sandbox.WriteOptions{Mode: 644}); err != nil {
		return fmt.Errorf("write %s: %w", fileName, err)
	}
	if _, err := sb.Run(ctx, "/opt/opensandbox/vscode.sh", sandbox.RunOptions{Background: true}); err != nil {
		return fmt.Errorf("start code-server: %w", err)
	}

	fw, err := sb.Forward(ctx, 8443, sandbox.ForwardOptions{})
	if err != nil {
		return fmt.Errorf("forward 8443: %w", err)
	}
	defer fw.Close()
	ui := fw.URL() + "/?folder=/workspace"

	if err := hostbrowser.WaitHTTP(ctx, fw.URL()+"/healthz", 2*time.Minute); err != nil {
		return err
	}
	shot := os.Getenv("VSCODE_SCREENSHOT")
	if shot == "" {
		fmt.Printf("VS Code: %s\n(Ctrl+C to stop and kill the sandbox)\n", ui)
		<-ctx.Done()
		return nil
	}
	png, err := hostbrowser.Screenshot(ctx, ui, hostbrowser.Options{Ready: ready, Timeout: 3 * time.Minute})
	if err != nil {
		return err
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("VS Code loaded /workspace (its explorer lists %s); screenshot: %s (%d bytes)\n", fileName, shot, len(png))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
