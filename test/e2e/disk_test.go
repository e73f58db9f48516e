package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// diskSlack is how much more than its limit a sandbox's writable layer
// may hold on the host: the quota counts data, the engine's size report
// also metadata.
const diskSlack = 8 << 20

// TestDiskQuota fills sandboxes past their disk limit with dd through
// execd: the write fails with EDQUOT or ENOSPC, the sandbox, execd and the
// server go on answering, and the sandbox's writable layer on the host
// stays within the limit. One sandbox names its limit
// (resourceLimits.ephemeral-storage), the other gets the server's
// storage.default_disk_limit. On an engine that cannot enforce limits the
// create must be refused with 400 DISK_LIMIT_NOT_SUPPORTED and the server
// must have warned at start; the test then skips, except under CI=true,
// whose engine scripts/ensure-deps.sh gives a btrfs data root.
func TestDiskQuota(t *testing.T) {
	s := startServer(t, serverOpts{extraTOML: "\n[storage]\ndefault_disk_limit = \"48Mi\"\n"})
	image := ensureBaseImage(t)
	req := func(limits map[string]string) sandbox.CreateSandboxRequest {
		return sandbox.CreateSandboxRequest{
			Image:          &sandbox.ImageSpec{URI: image},
			Entrypoint:     []string{"tail", "-f", "/dev/null"},
			Timeout:        ptr[int64](600),
			ResourceLimits: limits,
		}
	}

	status, body := s.rawCreate(t, req(map[string]string{"cpu": "1", "memory": "256Mi", "ephemeral-storage": "64Mi"}))
	if status == http.StatusBadRequest {
		var er sandbox.ErrorResponse
		if err := json.Unmarshal(body, &er); err != nil || er.Code != "DISK_LIMIT_NOT_SUPPORTED" {
			t.Fatalf("create with a 64Mi disk limit = 400 %s, want 202, or 400 DISK_LIMIT_NOT_SUPPORTED where the engine cannot enforce it", body)
		}
		logs, _ := os.ReadFile(s.logPath)
		if !strings.Contains(string(logs), "storage.default_disk_limit is set but the engine cannot enforce disk limits") {
			t.Errorf("the server did not warn at start that its default disk limit cannot be enforced; log:\n%s", logs)
		}
		if status, body := s.rawCreate(t, req(map[string]string{"cpu": "1"})); status != http.StatusBadRequest || !bytes.Contains(body, []byte("DISK_LIMIT_NOT_SUPPORTED")) {
			t.Errorf("create relying on the default disk limit = %d %s, want 400 DISK_LIMIT_NOT_SUPPORTED", status, body)
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's engine must enforce disk limits (scripts/ensure-deps.sh starts dockerd on a btrfs data root): %s", er.Message)
		}
		t.Skipf("this engine cannot enforce disk limits (see docs/server.md#disk-limits): %s", er.Message)
	}
	if status != http.StatusAccepted {
		t.Fatalf("create with a 64Mi disk limit = %d %s, want 202", status, body)
	}
	var asked sandbox.CreateSandboxResponse
	if err := json.Unmarshal(body, &asked); err != nil {
		t.Fatal(err)
	}
	s.deleteOnCleanup(t, asked.ID)
	byDefault := s.create(t, req(map[string]string{"cpu": "1", "memory": "256Mi"}))

	for _, tc := range []struct {
		name  string
		id    string
		limit int64
	}{{"requested", asked.ID, 64 << 20}, {"default", byDefault.ID, 48 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dockerInspect(t, "{{.HostConfig.StorageOpt.size}}", tc.id); got != strconv.FormatInt(tc.limit, 10) {
				t.Errorf("the container's size storage option = %q, want %d", got, tc.limit)
			}
			e := s.execd(t, tc.id, false)
			ex := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "dd if=/dev/zero of=/var/tmp/fill bs=1M count=256; echo rc=$?"})
			errText := strings.Join(ex.stderr, "\n")
			if !strings.Contains(errText, "Disk quota exceeded") && !strings.Contains(errText, "No space left on device") {
				t.Errorf("dd of 256 MiB under a %d MiB limit: stderr %q, want EDQUOT or ENOSPC", tc.limit>>20, errText)
			}
			if out := joined(ex.stdout); out == "rc=0" || !strings.HasPrefix(out, "rc=") {
				t.Errorf("dd exit: stdout %q, want a failure", out)
			}

			// The sandbox and execd go on; the server too.
			ex = e.stream(t, "/command", sandbox.RunCommandRequest{Command: "stat -c %s /var/tmp/fill; rm /var/tmp/fill; echo written-after-rm > /var/tmp/note; cat /var/tmp/note"})
			lines := ex.stdout
			if ex.exit != 0 || len(lines) != 2 || lines[1] != "written-after-rm" {
				t.Fatalf("commands after the failed write: stdout %q exit %d, want the file size and written-after-rm", lines, ex.exit)
			}
			if n, err := strconv.ParseInt(lines[0], 10, 64); err != nil || n > tc.limit {
				t.Errorf("the file dd left is %q bytes, want at most the limit %d", lines[0], tc.limit)
			}
			if st := s.sandboxState(t, tc.id); st != sandbox.StateRunning {
				t.Errorf("sandbox state after the failed write = %s, want Running", st)
			}

			// What the host holds for the sandbox stayed within the limit.
			rw, err := strconv.ParseInt(dockerInspectSize(t, tc.id), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if rw > tc.limit+diskSlack {
				t.Errorf("the sandbox's writable layer holds %d bytes on the host, want at most %d + %d", rw, tc.limit, diskSlack)
			}
		})
	}
}

// rawCreate posts a create and returns the status and body, whatever they
// are; a sandbox it makes is the caller's to delete.
func (p *serverProc) rawCreate(t *testing.T, req sandbox.CreateSandboxRequest) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r, _ := http.NewRequestWithContext(ctx, "POST", p.base+"/v1/sandboxes", bytes.NewReader(b))
	r.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	r.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(r)
	if err != nil {
		t.Fatalf("POST /v1/sandboxes: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (p *serverProc) deleteOnCleanup(t *testing.T, id string) {
	t.Cleanup(func() {
		r, _ := http.NewRequest("DELETE", p.base+"/v1/sandboxes/"+id, nil)
		r.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
		}
	})
}

func dockerInspect(t *testing.T, format, id string) string {
	t.Helper()
	out, err := osexec.Command("docker", "inspect", "-f", format, sandboxContainer(t, id)).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect the container of sandbox %s: %v\n%s", id, err, out)
	}
	return strings.TrimSpace(string(out))
}

// dockerInspectSize is the engine's count of the bytes in the container's
// writable layer.
func dockerInspectSize(t *testing.T, id string) string {
	t.Helper()
	out, err := osexec.Command("docker", "inspect", "--size", "-f", "{{.SizeRw}}", sandboxContainer(t, id)).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect --size the container of sandbox %s: %v\n%s", id, err, out)
	}
	return strings.TrimSpace(fmt.Sprint(string(out)))
}
