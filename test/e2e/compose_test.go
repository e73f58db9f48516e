package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// composeProject is one project of deploy/compose.yaml, run with the
// compose CLI this machine has (make deps installs one).
type composeProject struct {
	t    *testing.T
	argv []string // the compose command up to its subcommand
	env  []string
}

// composeCLI returns the compose command: the docker CLI plugin (v2) when
// there is one, else docker-compose. With neither the test fails: docker
// is there (the caller checked), so compose should be too.
func composeCLI(t *testing.T) []string {
	t.Helper()
	if err := osexec.Command("docker", "compose", "version").Run(); err == nil {
		return []string{"docker", "compose"}
	}
	if p, err := osexec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	t.Fatal("neither `docker compose` nor docker-compose is installed: run `make deps` (scripts/ensure-deps.sh installs docker-compose)")
	return nil
}

func (c *composeProject) run(ctx context.Context, args ...string) (string, error) {
	argv := append(append([]string{}, c.argv...), args...)
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Dir = openapitest.RepoPath("deploy")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

func (c *composeProject) must(args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.run(ctx, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// dockerIDs lists the ids of the containers, running or not, matching a
// label filter.
func dockerIDs(t *testing.T, label string) []string {
	t.Helper()
	out := docker(t, "ps", "-aq", "--filter", "label="+label)
	return strings.Fields(out)
}

// TestCompose runs deploy/compose.yaml as documented in docs/deploy.md: the
// server image (images/server.sh), a config of ours in place of
// deploy/compose.toml, the key and port from the environment. Through the
// server in its container it creates a sandbox, runs commands in it directly
// and through the server's proxy, re-creates the server container (the store
// volume must keep the instance, so the sandbox stays found), deletes the
// sandbox, and checks `down` leaves no container of the project and none of
// the server's instance.
func TestCompose(t *testing.T) {
	bin := binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	if _, err := osexec.LookPath("docker"); err != nil {
		t.Fatal("docker CLI not found: run `make deps`, which installs the engine")
	}
	cli := composeCLI(t)
	image := minimalImage(t)

	// The image from the binaries under test; a no-op when it is current.
	build := osexec.Command("bash", openapitest.RepoPath("images/server.sh"))
	build.Env = append(os.Environ(), "BIN="+filepath.Dir(bin))
	build.Dir = openapitest.RepoPath(".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("images/server.sh: %v\n%s", err, out)
	}

	var rnd [6]byte
	rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	project := "osbe2e" + suffix
	key := "compose-key-" + suffix
	_, port, _ := net.SplitHostPort(freeAddr(t))
	base := "http://127.0.0.1:" + port

	// deploy/compose.toml itself, with a shorter minimum sandbox timeout.
	shipped, err := os.ReadFile(openapitest.RepoPath("deploy/compose.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(shipped), "[server]\n", "[server]\nmin_sandbox_timeout_seconds = 1\n", 1)
	if cfg == string(shipped) {
		t.Fatal("deploy/compose.toml has no [server] table")
	}
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := &composeProject{t: t, argv: append(cli, "-f", openapitest.RepoPath("deploy/compose.yaml"), "-p", project),
		env: []string{"OPENSANDBOX_SERVER_API_KEY=" + key, "OPENSANDBOX_CONFIG=" + cfgPath, "OPENSANDBOX_PORT=" + port}}

	instance := "" // the server's instance id, once known
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, _ := cp.run(ctx, "logs", "--tail", "80")
			cancel()
			t.Logf("compose logs (tail):\n%s", out)
		}
		// Whatever the test left, also on failure.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := cp.run(ctx, "down", "-v", "--timeout", "30"); err != nil {
			t.Errorf("cleanup: %v\n%s", err, out)
		}
		if instance != "" {
			if ids := dockerIDs(t, "opensandbox.io/instance="+instance); len(ids) > 0 {
				osexec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
			}
		}
	})

	start := time.Now()
	cp.must("up", "-d")
	waitHealth(t, base, 30*time.Second)
	t.Logf("compose up to /health: %v", time.Since(start).Round(time.Millisecond))

	// The listen address is loopback by default.
	if ids := dockerIDs(t, "com.docker.compose.project="+project); len(ids) != 1 {
		t.Fatalf("project containers = %v, want the server alone", ids)
	} else if got := docker(t, "inspect", "-f", "{{index .Args 1}} {{.HostConfig.NetworkMode}}", ids[0]); got != "127.0.0.1 host" {
		t.Fatalf("server --host and network mode = %q, want \"127.0.0.1 host\"", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	newClient := func(proxy bool) *sandbox.Client {
		c, err := sandbox.NewClient(sandbox.WithDomain(base), sandbox.WithAPIKey(key), sandbox.WithServerProxy(proxy))
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		return c
	}
	c := newClient(false)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Image: image, Entrypoint: []string{"sleep", "100000"},
		Timeout: 5 * time.Minute, Resources: map[string]string{"cpu": "1", "memory": "256Mi"}})
	if err != nil {
		t.Fatalf("Create through the server in compose: %v", err)
	}
	ids := dockerIDs(t, "opensandbox.io/id="+sb.ID())
	if len(ids) != 1 {
		t.Fatalf("containers of sandbox %s = %v, want 1", sb.ID(), ids)
	}
	instance = docker(t, "inspect", "-f", `{{index .Config.Labels "opensandbox.io/instance"}}`, ids[0])
	if instance == "" {
		t.Fatalf("sandbox container %s has no instance label", ids[0])
	}
	if proj := docker(t, "inspect", "-f", `{{index .Config.Labels "com.docker.compose.project"}}`, ids[0]); proj != "" {
		t.Fatalf("the sandbox container is in compose project %q; it must be the engine's, beside the server", proj)
	}

	// Directly on the published execd port, then through the server's
	// proxy route (the server in its container reaching the sandbox).
	if ex, err := sb.Run(ctx, "echo compose-$((6*7))", sandbox.RunOptions{}); err != nil || ex.ExitCode != 0 || strings.TrimSpace(ex.Text()) != "compose-42" {
		t.Fatalf("Run = %+v, %v; want compose-42", ex, err)
	}
	viaProxy, err := newClient(true).Connect(ctx, sb.ID(), sandbox.ConnectOptions{})
	if err != nil {
		t.Fatalf("Connect through the proxy: %v", err)
	}
	if ex, err := viaProxy.Run(ctx, "echo proxied", sandbox.RunOptions{}); err != nil || strings.TrimSpace(ex.Text()) != "proxied" {
		t.Fatalf("Run through the server proxy = %+v, %v; want proxied", ex, err)
	}

	// A new server container: the store volume keeps the instance id, so
	// it still sees the sandbox (with an empty store it would get another
	// instance id and answer 404).
	cp.must("up", "-d", "--force-recreate")
	waitHealth(t, base, 30*time.Second)
	if info, err := c.Get(ctx, sb.ID()); err != nil || info.Status.State != "Running" {
		t.Fatalf("Get after re-creating the server container = %+v, %v; want Running", info, err)
	}

	// The image's HEALTHCHECK, as compose.yaml configures it, turns healthy.
	srv := dockerIDs(t, "com.docker.compose.project="+project)
	if len(srv) != 1 {
		t.Fatalf("project containers = %v, want the server alone", srv)
	}
	pollUntil(t, "the server container's health check to pass", 40*time.Second, func() bool {
		return docker(t, "inspect", "-f", "{{.State.Health.Status}}", srv[0]) == "healthy"
	})

	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := c.Get(ctx, sb.ID()); !sandbox.IsNotFound(err) {
		t.Fatalf("Get after Kill: err = %v, want not found", err)
	}
	if ids := dockerIDs(t, "opensandbox.io/id="+sb.ID()); len(ids) != 0 {
		t.Fatalf("containers of the deleted sandbox: %v", ids)
	}

	cp.must("down", "-v", "--timeout", "30")
	if ids := dockerIDs(t, "com.docker.compose.project="+project); len(ids) != 0 {
		t.Fatalf("containers of project %s after down: %v", project, ids)
	}
	// Not a sandbox, sidecar or network holder of the server's instance.
	if ids := dockerIDs(t, "opensandbox.io/instance="+instance); len(ids) != 0 {
		t.Fatalf("containers of instance %s after down: %v", instance, ids)
	}
	if out := docker(t, "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+project); out != "" {
		t.Fatalf("volumes of project %s after down -v: %s", project, out)
	}
	t.Logf("compose e2e took %v", time.Since(start).Round(time.Millisecond))
}

// waitHealth polls GET base/health until it answers 200.
func waitHealth(t *testing.T, base string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/health did not answer 200 within %v: %v", base, d, last)
}
