package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/jscompat"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestCompatJSSDK drives the server and execd with the official OpenSandbox
// JavaScript SDK (@alibaba-group/opensandbox, pinned in
// test/compat/js/package-lock.json), unchanged: test/compat/js/compat.mjs
// creates sandboxes through it, with direct endpoints and through the server
// proxy, and walks commands, sessions, files, metrics, renew, metadata,
// list, snapshots, pause/resume and kill. Any step the SDK cannot complete against our
// wire format fails the test with the script's whole output.
func TestCompatJSSDK(t *testing.T) {
	binPath(t, "opensandbox-server") // skips unless OSB_E2E=1
	node := jscompat.Node(t)

	s := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	runID := fmt.Sprintf("compat-e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteByMetadata(t, s, "compat", runID) })

	// No rerun: a failure is an incompatibility or a defect. The cut
	// proxied streams a rerun once hid are covered by
	// TestServerProxyDuplexStream.
	out, err := runCompatScript(node, s, image, runID)
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

// runCompatScript runs compat.mjs against server s with image and the run
// id put on every sandbox; extraEnv adds variables (COMPAT_*).
func runCompatScript(node string, s *serverProc, image, runID string, extraEnv ...string) ([]byte, error) {
	return jscompat.Run(node, strings.TrimPrefix(s.base, "http://"), testAPIKey, image, runID, extraEnv...)
}
