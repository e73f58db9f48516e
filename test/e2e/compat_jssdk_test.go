package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestCompatJSSDK drives the server and execd with the official OpenSandbox
// JavaScript SDK (@alibaba-group/opensandbox, pinned in
// test/compat/js/package-lock.json), unchanged: test/compat/js/compat.mjs
// creates sandboxes through it, with direct endpoints and through the server
// proxy, and walks commands, sessions, files, metrics, renew, metadata,
// list, pause/resume and kill. Any step the SDK cannot complete against our
// wire format fails the test with the script's whole output.
func TestCompatJSSDK(t *testing.T) {
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	node := requireNode(t)
	dir := openapitest.RepoPath("test/compat/js")
	npmInstall(t, dir)

	s := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	runID := fmt.Sprintf("compat-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteByMetadata(t, s, "compat", runID) })

	// No rerun: a failure is an incompatibility or a defect. The cut
	// proxied streams a rerun once hid are covered by
	// TestServerProxyDuplexStream.
	out, err := runCompatScript(node, dir, s, image, runID)
	if err != nil {
		// The server log goes with the test's temporary directory and its
		// printed tail may not reach back far enough: keep its warnings (a
		// cut proxied reply says how its upstream connection was used).
		if b, rerr := os.ReadFile(s.logPath); rerr == nil {
			var warn []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "ReverseProxy") {
					warn = append(warn, line)
				}
			}
			t.Logf("server warnings:\n%s", strings.Join(warn, "\n"))
		}
		t.Fatalf("node compat.mjs: %v\n%s", err, out)
	}
	t.Logf("node compat.mjs:\n%s", out)
}

// requireNode returns the node binary, failing (not skipping: the e2e suite
// is meant to run everything) when Node.js >= 20 or npm is missing.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := osexec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH: the JS SDK compatibility test needs Node.js >= 20 and npm (%v)", err)
	}
	if _, err := osexec.LookPath("npm"); err != nil {
		t.Fatalf("npm not found on PATH: the JS SDK compatibility test needs Node.js >= 20 and npm (%v)", err)
	}
	out, err := osexec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	// The SDK needs Node >= 20, its undici dependency >= 20.18.1.
	if v := strings.TrimSpace(string(out)); !versionAtLeast(strings.TrimPrefix(v, "v"), 20, 18, 1) {
		t.Fatalf("node %s is too old: @alibaba-group/opensandbox (with undici 7) needs Node.js >= 20.18.1", v)
	}
	return node
}

// versionAtLeast compares a "major.minor.patch" version with a minimum.
func versionAtLeast(v string, want ...int) bool {
	parts := strings.SplitN(v, ".", len(want))
	for i, w := range want {
		n := 0
		if i < len(parts) {
			var err error
			// "1-rc.1" and the like: only the leading digits count.
			digits := parts[i]
			if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
				digits = digits[:j]
			}
			if n, err = strconv.Atoi(digits); err != nil {
				return false
			}
		}
		if n != w {
			return n > w
		}
	}
	return true
}

// npmInstall runs `npm ci` in dir when node_modules is missing or older than
// package-lock.json (npm rewrites node_modules/.package-lock.json on every
// install, so that file's time is the install's time).
func npmInstall(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// deleteByMetadata deletes, best effort, the sandboxes a run left behind
// (the script deletes its own; this covers a script killed midway).
func deleteByMetadata(t *testing.T, s *serverProc, key, value string) {
	filter := url.QueryEscape(key + "=" + value)
	req, _ := http.NewRequest("GET", s.base+"/v1/sandboxes?pageSize=200&metadata="+filter, nil)
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	defer resp.Body.Close()
	var list sandbox.ListSandboxesResponse
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, sb := range list.Items {
		r, _ := http.NewRequest("DELETE", s.base+"/v1/sandboxes/"+sb.ID, nil)
		r.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
			t.Logf("cleanup: deleted leftover sandbox %s (%d)", sb.ID, resp.StatusCode)
		}
	}
}

// runCompatScript runs compat.mjs in dir against server s with image and
// the run id put on every sandbox; extraEnv adds variables (COMPAT_*).
func runCompatScript(node, dir string, s *serverProc, image, runID string, extraEnv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, node, "compat.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey,
		"OPEN_SANDBOX_PROTOCOL=http",
		"COMPAT_IMAGE="+image,
		"COMPAT_RUN_ID="+runID,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}
