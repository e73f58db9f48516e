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
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func ptr[T any](v T) *T { return &v }

func runID(t *testing.T) string {
	return fmt.Sprintf("r%d", time.Now().UnixNano())
}

// TestServerQuickstart walks the flow of the README over raw HTTP.
func TestServerQuickstart(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	created := s.create(t, sandbox.CreateSandboxRequest{
		Image:          &sandbox.ImageSpec{URI: image},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
		Timeout:        ptr[int64](600),
		ResourceLimits: map[string]string{"cpu": "1", "memory": "512Mi"},
		Metadata:       map[string]string{"tag": "e2e"},
	})
	if created.Status.State != sandbox.StateRunning || created.ExpiresAt == nil || strings.Join(created.Entrypoint, " ") != "tail -f /dev/null" {
		t.Fatalf("create = %+v, want Running with expiry and the entrypoint back", created)
	}
	id := created.ID

	for _, proxy := range []bool{false, true} {
		e := s.execd(t, id, proxy)
		ex := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo hello from $(uname -s); python3 -c 'print(6*7)'"})
		if joined(ex.stdout) != "hello from Linux|42" || ex.exit != 0 {
			t.Errorf("command (server proxy %v): %q exit %d", proxy, ex.stdout, ex.exit)
		}
	}
	e := s.execd(t, id, false)
	ct, body := multipartUpload(t, map[string]string{"/root/note.txt": "kept in the snapshot\n"}, 644)
	resp, err := e.do(context.Background(), "POST", "/files/upload", ct, body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := e.call(t, "GET", "/files/download?path=/root/note.txt", nil, 200, nil); string(got) != "kept in the snapshot\n" {
		t.Errorf("download = %q", got)
	}
	var m sandbox.Metrics
	e.call(t, "GET", "/metrics", nil, 200, &m)
	if m.MemTotalMiB < 500 || m.MemTotalMiB > 520 {
		t.Errorf("metrics mem_total_mib = %v, want the 512Mi limit", m.MemTotalMiB)
	}

	newExpiry := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var renewed sandbox.RenewSandboxExpirationResponse
	s.api(t, "POST", "/v1/sandboxes/"+id+"/renew-expiration", sandbox.RenewSandboxExpirationRequest{ExpiresAt: newExpiry}, 200, &renewed)
	var got sandbox.SandboxInfo
	s.api(t, "GET", "/v1/sandboxes/"+id, nil, 200, &got)
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(newExpiry) {
		t.Errorf("expiresAt after renew = %v, want %v", got.ExpiresAt, newExpiry)
	}

	s.api(t, "POST", "/v1/sandboxes/"+id+"/pause", nil, 202, nil)
	if st := s.sandboxState(t, id); st != sandbox.StatePaused {
		t.Errorf("state after pause = %s", st)
	}
	short := &http.Client{Timeout: 500 * time.Millisecond}
	if resp, err := short.Post(e.base+"/command", "application/json", strings.NewReader(`{"command":"true"}`)); err == nil {
		resp.Body.Close()
		t.Errorf("execd answered while paused: %d", resp.StatusCode)
	} else if !isTimeout(err) {
		t.Logf("paused execd: %v", err)
	}
	s.apiError(t, "POST", "/v1/sandboxes/"+id+"/pause", nil, 409, "SANDBOX_NOT_RUNNING")
	s.api(t, "POST", "/v1/sandboxes/"+id+"/resume", nil, 202, nil)
	if ex := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "cat /root/note.txt"}); joined(ex.stdout) != "kept in the snapshot" {
		t.Errorf("after resume: %q", ex.stdout)
	}
	s.apiError(t, "POST", "/v1/sandboxes/"+id+"/resume", nil, 409, "SANDBOX_NOT_PAUSED")

	var snap sandbox.Snapshot
	s.api(t, "POST", "/v1/sandboxes/"+id+"/snapshots", sandbox.CreateSnapshotRequest{Name: "with-note"}, 202, &snap)
	if snap.Status.State != sandbox.SnapshotCreating || snap.SandboxID != id {
		t.Fatalf("snapshot = %+v", snap)
	}
	poll(t, "snapshot Ready", func() bool {
		s.api(t, "GET", "/v1/snapshots/"+snap.ID, nil, 200, &snap)
		if snap.Status.State == sandbox.SnapshotFailed {
			t.Fatalf("snapshot failed: %+v", snap.Status)
		}
		return snap.Status.State == sandbox.SnapshotReady
	})
	var snaps sandbox.ListSnapshotsResponse
	s.api(t, "GET", "/v1/snapshots?sandboxId="+id, nil, 200, &snaps)
	if len(snaps.Items) != 1 || snaps.Items[0].ID != snap.ID {
		t.Errorf("snapshot list = %+v", snaps)
	}
	restored := s.create(t, sandbox.CreateSandboxRequest{SnapshotID: snap.ID, Timeout: ptr[int64](600), ResourceLimits: map[string]string{"cpu": "1"}})
	if ex := s.execd(t, restored.ID, true).stream(t, "/command", sandbox.RunCommandRequest{Command: "cat /root/note.txt"}); joined(ex.stdout) != "kept in the snapshot" {
		t.Errorf("sandbox from snapshot sees %q", ex.stdout)
	}
	s.apiError(t, "DELETE", "/v1/snapshots/"+snap.ID, nil, 409, "INVALID_STATE")

	s.api(t, "DELETE", "/v1/sandboxes/"+id, nil, 204, nil)
	s.apiError(t, "GET", "/v1/sandboxes/"+id, nil, 404, "SANDBOX_NOT_FOUND")
	s.api(t, "DELETE", "/v1/sandboxes/"+restored.ID, nil, 204, nil)
	s.api(t, "DELETE", "/v1/snapshots/"+snap.ID, nil, 204, nil)
	s.apiError(t, "GET", "/v1/snapshots/"+snap.ID, nil, 404, "SNAPSHOT_NOT_FOUND")
}

func TestServerListFiltersAndMetadata(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := minimalImage(t)
	run := runID(t)
	a := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Metadata: map[string]string{"run": run, "team": "a"}, ResourceLimits: map[string]string{"cpu": "500m"}})
	b := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Metadata: map[string]string{"run": run, "team": "b"}, ResourceLimits: map[string]string{"cpu": "500m"}})
	if a.ExpiresAt != nil {
		t.Errorf("a sandbox without timeout has expiresAt %v (manual cleanup expected)", a.ExpiresAt)
	}
	s.api(t, "POST", "/v1/sandboxes/"+b.ID+"/pause", nil, 202, nil)

	var list sandbox.ListSandboxesResponse
	s.api(t, "GET", "/v1/sandboxes?metadata="+urlQuery("run="+run), nil, 200, &list)
	if len(list.Items) != 2 || list.Items[0].ID != b.ID {
		t.Errorf("list by run = %d items (first %v), want 2 newest first", len(list.Items), list.Items)
	}
	s.api(t, "GET", "/v1/sandboxes?metadata="+urlQuery("run="+run+"&team=a"), nil, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != a.ID {
		t.Errorf("AND filter = %+v", list.Items)
	}
	s.api(t, "GET", "/v1/sandboxes?state=paused&state=Pending&metadata="+urlQuery("run="+run), nil, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != b.ID {
		t.Errorf("state filter = %+v", list.Items)
	}
	s.api(t, "GET", "/v1/sandboxes?pageSize=1&page=2&metadata="+urlQuery("run="+run), nil, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != a.ID || list.Pagination.TotalItems != 2 || list.Pagination.TotalPages != 2 || list.Pagination.HasNextPage {
		t.Errorf("page 2 = %+v", list)
	}

	// The API also answers without the /v1 prefix (outside the document).
	req, _ := http.NewRequest("GET", s.base+"/sandboxes/"+a.ID, nil)
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /sandboxes/{id} without /v1: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	var patched sandbox.SandboxInfo
	s.api(t, "PATCH", "/v1/sandboxes/"+a.ID+"/metadata", map[string]any{"team": nil, "owner": "me"}, 200, &patched)
	if patched.Metadata["owner"] != "me" || patched.Metadata["team"] != "" || patched.Metadata["run"] != run {
		t.Errorf("metadata after patch = %v", patched.Metadata)
	}
	s.api(t, "GET", "/v1/sandboxes?metadata="+urlQuery("owner=me"), nil, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != a.ID {
		t.Errorf("filter on patched metadata = %+v", list.Items)
	}
	s.apiError(t, "POST", "/v1/sandboxes/"+a.ID+"/renew-expiration", sandbox.RenewSandboxExpirationRequest{ExpiresAt: time.Now().Add(time.Hour)}, 409, "INVALID_EXPIRATION")
}

func urlQuery(s string) string {
	return strings.NewReplacer("=", "%3D", "&", "%26").Replace(s)
}

func TestServerExpiryAndRestart(t *testing.T) {
	storeDir := t.TempDir()
	addr := freeAddr(t)
	s := startServer(t, serverOpts{storeDir: storeDir, addr: addr})
	image := minimalImage(t)
	short := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Timeout: ptr[int64](2), ResourceLimits: map[string]string{"cpu": "500m"}})
	// later must outlive the server's restart (a few seconds on a loaded
	// machine; 4 s was once too short) and then expire under the restarted
	// server's re-armed timer.
	later := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Timeout: ptr[int64](20), ResourceLimits: map[string]string{"cpu": "500m"}})
	keep := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Metadata: map[string]string{"k": "v"}, ResourceLimits: map[string]string{"cpu": "500m"}})
	s.api(t, "PATCH", "/v1/sandboxes/"+keep.ID+"/metadata", map[string]any{"patched": "yes"}, 200, nil)

	// The server dies without a chance to clean up; the short sandbox
	// expires while it is down.
	s.stop(9)
	deadline := short.ExpiresAt.Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		time.Sleep(time.Until(deadline)) // waiting for wall-clock expiry, not for readiness
	}
	s.start(binPath(t, "opensandbox-server"))

	s.apiError(t, "GET", "/v1/sandboxes/"+short.ID, nil, 404, "SANDBOX_NOT_FOUND")
	var got sandbox.SandboxInfo
	s.api(t, "GET", "/v1/sandboxes/"+keep.ID, nil, 200, &got)
	if got.Metadata["patched"] != "yes" || got.Metadata["k"] != "v" || got.ExpiresAt != nil {
		t.Errorf("after restart: %+v, want metadata override kept and no expiry", got)
	}
	s.api(t, "GET", "/v1/sandboxes/"+later.ID, nil, 200, &got)
	pollUntil(t, "the re-armed expiry to remove the second sandbox", time.Until(*later.ExpiresAt)+30*time.Second, func() bool {
		var er sandbox.ErrorResponse
		req, _ := http.NewRequest("GET", s.base+"/v1/sandboxes/"+later.ID, nil)
		req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode == 404
	})
	if ids := containersWithLabel(t, "opensandbox.io/id="+later.ID); len(ids) != 0 {
		t.Errorf("expired sandbox left containers %v", ids)
	}
}

func TestServerConcurrentCreateDelete(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := minimalImage(t)
	run := runID(t)
	const n = 20
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out sandbox.CreateSandboxResponse
			s.api(t, "POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{
				Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"},
				Metadata: map[string]string{"run": run}, ResourceLimits: map[string]string{"cpu": "250m", "memory": "64Mi"},
				Volumes: []sandbox.Volume{{Name: "scratch", MountPath: "/data", PVC: &sandbox.PVCVol{ClaimName: "osb-e2e-" + run + "-" + fmt.Sprint(time.Now().UnixNano()), DeleteOnSandboxTermination: true}}},
			}, 202, &out)
			ids <- out.ID
		}()
	}
	wg.Wait()
	close(ids)
	var all []string
	for id := range ids {
		all = append(all, id)
	}
	var list sandbox.ListSandboxesResponse
	s.api(t, "GET", "/v1/sandboxes?pageSize=200&metadata="+urlQuery("run="+run), nil, 200, &list)
	if len(list.Items) != n {
		t.Errorf("listed %d sandboxes, want %d", len(list.Items), n)
	}
	for _, id := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.api(t, "DELETE", "/v1/sandboxes/"+id, nil, 204, nil)
		}()
	}
	wg.Wait()
	if left := containersWithLabel(t, "opensandbox.io/metadata.run="+run); len(left) != 0 {
		t.Errorf("containers left after deleting all: %v", left)
	}
	out, _ := execOut("docker", "volume", "ls", "-q", "--filter", "name=osb-e2e-"+run)
	if strings.TrimSpace(out) != "" {
		t.Errorf("volumes left: %s", out)
	}
}

func execOut(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return string(out), err
}

func TestServerBadRequests(t *testing.T) {
	s := startServer(t, serverOpts{extraTOML: "[storage]\nallowed_host_paths = [\"/srv/allowed\"]\n"})
	img := &sandbox.ImageSpec{URI: minimalImage(t)}
	ep := []string{"sleep", "1000"}
	lim := map[string]string{"cpu": "1"}
	for _, tt := range []struct {
		name string
		req  any
		code string
	}{
		{"no image nor snapshot", sandbox.CreateSandboxRequest{Entrypoint: ep, ResourceLimits: lim}, "INVALID_REQUEST"},
		{"both image and snapshot", sandbox.CreateSandboxRequest{Image: img, SnapshotID: "x", Entrypoint: ep, ResourceLimits: lim}, "INVALID_REQUEST"},
		{"no entrypoint", sandbox.CreateSandboxRequest{Image: img, ResourceLimits: lim}, "INVALID_REQUEST"},
		{"timeout below minimum", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, Timeout: ptr[int64](0), ResourceLimits: lim}, "INVALID_REQUEST"},
		{"bad cpu", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: map[string]string{"cpu": "lots"}}, "INVALID_REQUEST"},
		{"unknown resource", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: map[string]string{"disk": "1Gi"}}, "INVALID_REQUEST"},
		{"reserved metadata", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, Metadata: map[string]string{"opensandbox.io/id": "x"}}, "INVALID_REQUEST"},
		{"bad metadata key", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, Metadata: map[string]string{"bad key!": "x"}}, "INVALID_REQUEST"},
		{"host path not allowed", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, Volumes: []sandbox.Volume{{Name: "h", MountPath: "/h", Host: &sandbox.HostVol{Path: "/etc"}}}}, "HOST_PATH_NOT_ALLOWED"},
		{"host path escape", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, Volumes: []sandbox.Volume{{Name: "h", MountPath: "/h", Host: &sandbox.HostVol{Path: "/srv/allowed/../../etc"}}}}, "HOST_PATH_NOT_ALLOWED"},
		{"relative mount path", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, Volumes: []sandbox.Volume{{Name: "v", MountPath: "data", PVC: &sandbox.PVCVol{ClaimName: "v"}}}}, "INVALID_REQUEST"},
		{"network policy bad target", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim, NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny",
			Egress: []sandbox.NetworkRule{{Action: "allow", Target: "exa mple.com"}}}}, "INVALID_REQUEST"},
		{"unknown image", sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: "opensandbox-test/does-not-exist:1"}, Entrypoint: ep, ResourceLimits: lim}, "IMAGE_PULL_FAILED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var er sandbox.ErrorResponse
			s.api(t, "POST", "/v1/sandboxes", tt.req, 400, &er)
			if er.Code != tt.code || er.Message == "" {
				t.Errorf("create %s = %+v, want %s", tt.name, er, tt.code)
			}
		})
	}
	s.apiError(t, "POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{SnapshotID: "nope", ResourceLimits: lim}, 404, "SNAPSHOT_NOT_FOUND")
	s.apiError(t, "GET", "/v1/sandboxes/nope", nil, 404, "SANDBOX_NOT_FOUND")
	s.apiError(t, "DELETE", "/v1/sandboxes/nope", nil, 404, "SANDBOX_NOT_FOUND")
	s.apiError(t, "GET", "/v1/sandboxes?page=0", nil, 400, "INVALID_REQUEST")
	s.apiError(t, "GET", "/v1/sandboxes?metadata=%zz", nil, 400, "INVALID_METADATA_FORMAT")

	// Auth and request ids, outside the validating client.
	for _, tt := range []struct {
		key, code string
	}{{"", "MISSING_API_KEY"}, {"wrong", "INVALID_API_KEY"}} {
		req, _ := http.NewRequest("GET", s.base+"/v1/sandboxes", nil)
		if tt.key != "" {
			req.Header.Set(sandbox.APIKeyHeader, tt.key)
		}
		req.Header.Set(sandbox.RequestIDHeader, "my-request-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var er sandbox.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != 401 || er.Code != tt.code || resp.Header.Get(sandbox.RequestIDHeader) != "my-request-1" {
			t.Errorf("key %q: %d %+v request id %q", tt.key, resp.StatusCode, er, resp.Header.Get(sandbox.RequestIDHeader))
		}
	}
	resp, err := http.Get(s.base + "/health")
	if err != nil || resp.StatusCode != 200 || len(resp.Header.Get(sandbox.RequestIDHeader)) < 16 {
		t.Errorf("health without key: %v %v", resp, err)
	}
	resp.Body.Close()
	var doc map[string]any
	resp, err = http.Get(s.base + "/openapi.json")
	if err == nil {
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
	}
	if doc["openapi"] == nil || doc["paths"] == nil {
		t.Errorf("/openapi.json = %v %v", err, doc)
	}
}

func TestServerProxy(t *testing.T) {
	s := startServer(t, serverOpts{})
	sb := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: minimalImage(t)}, Entrypoint: []string{"sleep", "100000"}, ResourceLimits: map[string]string{"cpu": "1"}})
	e := s.execd(t, sb.ID, true)
	// A web server inside the sandbox, reached through the server proxy.
	e.stream(t, "/command", sandbox.RunCommandRequest{Command: "mkdir -p /www && echo inside > /www/index.html && httpd -p 3000 -h /www", Background: true})
	url := fmt.Sprintf("%s/sandboxes/%s/proxy/3000/index.html", s.base, sb.ID)
	poll(t, "httpd in the sandbox", func() bool {
		resp, err := getWithKey(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(b) == "inside\n"
	})
	// The caller's credentials never reach the sandbox.
	e.stream(t, "/command", sandbox.RunCommandRequest{Command: "mkdir -p /cgi/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\nenv\\n' > /cgi/cgi-bin/env && chmod +x /cgi/cgi-bin/env && httpd -p 3001 -h /cgi", Background: true})
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sandboxes/%s/proxy/3001/cgi-bin/env", s.base, sb.ID), nil)
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	req.Header.Set("Authorization", "Bearer secret-of-the-caller")
	req.Header.Set("Cookie", "session=also-secret")
	var envOut string
	poll(t, "cgi in the sandbox", func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		envOut = string(b)
		return resp.StatusCode == 200
	})
	for _, secret := range []string{testAPIKey, "secret-of-the-caller", "also-secret"} {
		if strings.Contains(envOut, secret) {
			t.Errorf("the sandbox saw the caller's credential %q", secret)
		}
	}
	// Nor through execd's own proxy on the direct endpoint: clients that
	// talk to execd directly (the official JS SDK) send the API key too.
	var ep sandbox.Endpoint
	s.api(t, "GET", fmt.Sprintf("/v1/sandboxes/%s/endpoints/3001", sb.ID), nil, 200, &ep)
	direct, _ := http.NewRequest("GET", "http://"+ep.Endpoint+"/cgi-bin/env", nil)
	for k, v := range ep.Headers {
		direct.Header.Set(k, v)
	}
	direct.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	dresp, err := http.DefaultClient.Do(direct)
	if err != nil {
		t.Fatalf("cgi through the direct endpoint %s: %v", ep.Endpoint, err)
	}
	b, _ := io.ReadAll(dresp.Body)
	dresp.Body.Close()
	if dresp.StatusCode != 200 || !strings.Contains(string(b), "HTTP_HOST=") {
		t.Fatalf("cgi through the direct endpoint %s = %d %s", ep.Endpoint, dresp.StatusCode, b)
	}
	if strings.Contains(string(b), testAPIKey) {
		t.Errorf("execd's proxy passed the server's API key to the sandbox's service:\n%s", b)
	}
	// The proxy needs the API key by default: without it nothing reaches
	// the sandbox.
	for _, key := range []string{"", "wrong-key"} {
		req, _ := http.NewRequest("GET", url, nil)
		if key != "" {
			req.Header.Set(sandbox.APIKeyHeader, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e sandbox.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		want := "MISSING_API_KEY"
		if key != "" {
			want = "INVALID_API_KEY"
		}
		if resp.StatusCode != http.StatusUnauthorized || e.Code != want {
			t.Errorf("proxy with key %q = %d %+v, want 401 %s", key, resp.StatusCode, e, want)
		}
	}
	// Nothing on the port: 502.
	resp, err := getWithKey(fmt.Sprintf("%s/sandboxes/%s/proxy/3999/", s.base, sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Errorf("proxy to a closed port = %d, want 502", resp.StatusCode)
	}
	resp, _ = getWithKey(fmt.Sprintf("%s/sandboxes/%s/proxy/3000/..%%2f..%%2f44772/ping", s.base, sb.ID))
	if resp != nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("an encoded .. escaped the proxied port")
		}
	}
	// WebSocket through the server proxy to execd's PTY.
	var pty sandbox.CreatePTYResponse
	e.call(t, "POST", "/pty", sandbox.CreatePTYRequest{Command: "echo ws-ok"}, 201, &pty)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(s.base, "http") + fmt.Sprintf("/sandboxes/%s/proxy/44772/pty/%s/ws", sb.ID, pty.SessionID)
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{sandbox.APIKeyHeader: {testAPIKey}}})
	if err != nil {
		t.Fatalf("websocket through the server proxy: %v", err)
	}
	defer c.CloseNow()
	var out bytes.Buffer
	for !strings.Contains(out.String(), "ws-ok") {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("ws read: %v (so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary && len(msg) > 0 && msg[0] == 1 {
			out.Write(msg[1:])
		}
	}
}

// TestServerHostVolumes: [storage] allowed_host_paths reaches the driver,
// which mounts a host directory under it (with a subPath) and refuses a
// subPath that a planted link leads outside it.
func TestServerHostVolumes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "in.txt"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{extraTOML: fmt.Sprintf("[storage]\nallowed_host_paths = [%q]\n", dir)})
	img := &sandbox.ImageSpec{URI: minimalImage(t)}
	ep := []string{"sleep", "100000"}
	lim := map[string]string{"cpu": "1"}

	sb := s.create(t, sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim,
		Volumes: []sandbox.Volume{{Name: "h", MountPath: "/host", SubPath: "sub", Host: &sandbox.HostVol{Path: dir + "/"}}}})
	e := s.execd(t, sb.ID, false)
	run := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "cat /host/in.txt && echo from-sandbox > /host/out.txt"})
	if joined(run.stdout) != "from-host" {
		t.Errorf("cat through the host volume = stdout %q stderr %q, want from-host", run.stdout, run.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "out.txt")); err != nil || string(b) != "from-sandbox\n" {
		t.Errorf("file written through the host volume = %q, %v", b, err)
	}

	s.apiError(t, "POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{Image: img, Entrypoint: ep, ResourceLimits: lim,
		Volumes: []sandbox.Volume{{Name: "h", MountPath: "/host", SubPath: "escape", Host: &sandbox.HostVol{Path: dir}}}},
		400, "HOST_PATH_NOT_ALLOWED")
}
