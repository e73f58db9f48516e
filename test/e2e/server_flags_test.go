package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerListenFlags: --host and --port move the server off the
// address its config file names (how `make run SERVER_PORT=…` works
// without editing deploy/dev.toml).
func TestServerListenFlags(t *testing.T) {
	bin := binPath(t, "opensandbox-server")
	fileAddr, flagAddr := freeAddr(t), freeAddr(t)
	fileHost, filePort, _ := net.SplitHostPort(fileAddr)
	flagHost, flagPort, _ := net.SplitHostPort(flagAddr)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf("[server]\nhost = %q\nport = %s\napi_key = %q\n\n[runtime]\ntype = \"docker\"\nexecd_path = %q\n\n[store]\npath = %q\n",
		fileHost, filePort, testAPIKey, binPath(t, "execd"), filepath.Join(dir, "store.db"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var log strings.Builder
	cmd := osexec.CommandContext(ctx, bin, "--config", cfg, "--host", flagHost, "--port", flagPort)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + flagAddr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("server exited during start:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never answered /health on the --port address %s: %v", flagAddr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + fileAddr + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("the config file's address %s still answers with --port given", fileAddr)
	}
}
