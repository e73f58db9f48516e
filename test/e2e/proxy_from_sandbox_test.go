package e2e

import (
	"net"
	"net/http"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestProxyFromSandboxNeedsKey: a sandbox can reach the server on its
// network's gateway, and on a user-defined network Docker's DNS names the
// other containers (ids included). So the proxy route, even when opened to
// everyone else (proxy_requires_api_key = false), asks a caller inside a
// sandbox for the API key.
func TestProxyFromSandboxNeedsKey(t *testing.T) {
	t.Parallel()
	gw := sandboxNetworkGateway(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := startServer(t, serverOpts{addr: addr, serverTOML: "proxy_requires_api_key = false\n"})
	c := sdkClient(t, s, false)
	a := sdkCreate(t, c, sandbox.CreateOptions{})
	b := sdkCreate(t, c, sandbox.CreateOptions{})
	url := "http://" + addr + "/sandboxes/" + b.ID() + "/proxy/44772/ping"

	if ex := runIn(t, a, "curl -sS -o /dev/null -w '%{http_code}' -m 10 "+url); ex.Text() != "401" {
		t.Fatalf("sandbox A through the server proxy to B without the key: %q (exit %d, %q); want 401", ex.Text(), ex.ExitCode, stderrOf(ex))
	}
	if ex := runIn(t, a, "curl -sS -o /dev/null -w '%{http_code}' -m 10 -H '"+sandbox.APIKeyHeader+": "+testAPIKey+"' "+url); ex.Text() != "200" {
		t.Fatalf("sandbox A through the server proxy with the key: %q (exit %d, %q); want 200", ex.Text(), ex.ExitCode, stderrOf(ex))
	}
	// The host itself, even on the gateway address, is not a sandbox.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the host through the server proxy without the key: %d; want 200", resp.StatusCode)
	}
}
