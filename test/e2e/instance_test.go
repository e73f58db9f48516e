package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestTwoServersOneEngine is the neighbour defect: server A creates a
// sandbox with a short timeout and renews it; server B, started on the
// same engine with its own store after the original deadline passed, must
// neither list, read, delete nor expire it (before instance scoping B
// armed the stale deadline it read from the container and deleted it).
func TestTwoServersOneEngine(t *testing.T) {
	a := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	created := a.create(t, sandbox.CreateSandboxRequest{
		Image:          &sandbox.ImageSpec{URI: image},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
		Timeout:        ptr[int64](20),
		ResourceLimits: map[string]string{"cpu": "500m", "memory": "256Mi"},
	})
	id := created.ID
	if created.ExpiresAt == nil {
		t.Fatalf("create = %+v, want an expiry", created)
	}
	renewTo := time.Now().Add(20 * time.Minute).UTC().Truncate(time.Second)
	a.api(t, "POST", "/v1/sandboxes/"+id+"/renew-expiration", sandbox.RenewSandboxExpirationRequest{ExpiresAt: renewTo}, 200, nil)

	// Let the original deadline pass: B, started now, would find it due.
	time.Sleep(time.Until(created.ExpiresAt.Add(time.Second)))
	b := startServer(t, serverOpts{})

	var list sandbox.ListSandboxesResponse
	b.api(t, "GET", "/v1/sandboxes?pageSize=200", nil, 200, &list)
	for _, sb := range list.Items {
		if sb.ID == id {
			t.Errorf("server B lists server A's sandbox %s", id)
		}
	}
	// Before scoping, a GET of an overdue sandbox deleted it on the spot.
	b.apiError(t, "GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	b.apiError(t, "DELETE", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	b.apiError(t, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")

	var got sandbox.SandboxInfo
	a.api(t, "GET", "/v1/sandboxes/"+id, nil, 200, &got)
	if got.Status.State != sandbox.StateRunning || got.ExpiresAt == nil || !got.ExpiresAt.Equal(renewTo) {
		t.Errorf("server A's sandbox after B started = %s expiring %v, want Running expiring %v", got.Status.State, got.ExpiresAt, renewTo)
	}
	if ids := containersWithLabel(t, "opensandbox.io/id="+id); len(ids) != 1 {
		t.Errorf("containers of sandbox %s = %v, want one", id, ids)
	}
}

// TestSharedInstanceIDRefused checks the decision for servers that would
// share an explicit instance id: a second server with its own store is
// refused at start, naming the owner and how to release the id, while the
// first restarts with its store and keeps the id.
func TestSharedInstanceIDRefused(t *testing.T) {
	inst := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { osexec.Command("docker", "volume", "rm", "-f", "opensandbox-instance-"+inst).Run() })
	a := startServer(t, serverOpts{serverTOML: fmt.Sprintf("instance_id = %q\n", inst)})

	cfg, err := os.ReadFile(a.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Same instance id, its own store and address.
	other := strings.Replace(string(cfg), "[store]\npath = ", "[store]\npath = \""+filepath.Join(t.TempDir(), "store.db")+"\"\n# was ", 1)
	_, port, _ := strings.Cut(freeAddr(t), ":")
	other = regexp.MustCompile(`(?m)^port = \d+$`).ReplaceAllString(other, "port = "+port)
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := osexec.CommandContext(ctx, binPath(t, "opensandbox-server"), "--config", path).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("second server with instance id %s: err %v (ctx %v), want it to exit with an error\n%s", inst, err, ctx.Err(), out)
	}
	if !strings.Contains(string(out), "already used") || !strings.Contains(string(out), "docker volume rm opensandbox-instance-"+inst) {
		t.Errorf("second server's output does not say the id is taken and how to release it:\n%s", out)
	}

	a.restart()
	a.api(t, "GET", "/v1/sandboxes", nil, 200, nil)
}
