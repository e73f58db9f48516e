package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// netsRuntime adds sandbox subnets to a test runtime.
type netsRuntime struct {
	runtime.Runtime
	subnets []netip.Prefix
	host    []netip.Addr
	fail    atomic.Bool
	calls   atomic.Int32
}

func (n *netsRuntime) SandboxSubnets(context.Context) ([]netip.Prefix, []netip.Addr, error) {
	n.calls.Add(1)
	if n.fail.Load() {
		return nil, nil, errors.New("engine down")
	}
	return n.subnets, n.host, nil
}

func TestSandboxCallers(t *testing.T) {
	src := &netsRuntime{
		subnets: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16"), netip.MustParsePrefix("fd00:18::/64")},
		host:    []netip.Addr{netip.MustParseAddr("172.18.0.1")},
	}
	c := &sandboxCallers{src: src}
	ctx := context.Background()

	src.fail.Store(true) // never learnt: only loopback is trusted
	if !c.fromSandbox(ctx, "10.1.2.3:5555") || c.fromSandbox(ctx, "127.0.0.1:5555") {
		t.Fatal("with the subnets unknown, a non-loopback caller must count as a sandbox and loopback must not")
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("SandboxSubnets called %d times within callerRetry of a failure; want 1", n)
	}
	src.fail.Store(false)
	c.tried = time.Time{} // as if callerRetry had passed
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"172.18.0.5:40000", true},
		{"[::ffff:172.18.0.5]:40000", true}, // IPv4-mapped
		{"[fd00:18::5]:1", true},
		{"172.18.0.1:40000", false}, // the host's gateway address
		{"127.0.0.1:40000", false},
		{"not an address", true},
		{"172.19.0.5:40000", false}, // unknown: asks again, at most every callerRetry
	} {
		if got := c.fromSandbox(ctx, tc.addr); got != tc.want {
			t.Errorf("fromSandbox(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if n := src.calls.Load(); n != 2 {
		t.Errorf("SandboxSubnets called %d times; want 2 (the failure, then one answer for all)", n)
	}
	// A recreated network with another subnet is learnt from its first
	// caller once callerRetry has passed.
	src.subnets = []netip.Prefix{netip.MustParsePrefix("172.19.0.0/16")}
	c.tried = time.Time{}
	if !c.fromSandbox(ctx, "172.19.0.5:1") {
		t.Error("a caller in the new subnet is not recognised")
	}
	// Once learnt, an engine failure keeps what was known.
	src.fail.Store(true)
	c.at, c.tried = time.Time{}, time.Time{}
	if !c.fromSandbox(ctx, "172.19.0.5:1") || c.fromSandbox(ctx, "172.20.0.5:1") {
		t.Error("after a failed refresh the known subnets must still apply")
	}
}

// TestProxyAsksSandboxesForTheKey: the proxy route opened by OpenProxy is
// open, except to callers inside a sandbox network, which must send the
// API key (and it never reaches the sandbox).
func TestProxyAsksSandboxesForTheKey(t *testing.T) {
	var nets *netsRuntime
	p := newProxyEnv(t, nil, func(c *Config) {
		c.OpenProxy = true
		// The test client connects from loopback: declare it a sandbox network.
		nets = &netsRuntime{Runtime: c.Runtime, subnets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
		c.Runtime = nets
	})
	r := p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, "")
	wantError(t, "proxy from a sandbox without the key", r, http.StatusUnauthorized, apierror.CodeMissingAPIKey)
	r = p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, "wrong")
	wantError(t, "proxy from a sandbox with a wrong key", r, http.StatusUnauthorized, apierror.CodeInvalidAPIKey)
	if p.hits.Load() != 0 {
		t.Fatalf("refused requests reached the sandbox %d times", p.hits.Load())
	}
	r = p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, testAPIKey)
	if r.status != http.StatusOK || p.hits.Load() != 1 {
		t.Fatalf("proxy from a sandbox with the key = %d %s", r.status, r.body)
	}
	var got seen
	if err := json.Unmarshal(r.body, &got); err != nil || got.Header.Get(sandbox.APIKeyHeader) != "" {
		t.Fatalf("the API key reached the sandbox: %+v, %v", got.Header, err)
	}
	// The host's gateway address is not a sandbox.
	nets.host = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	p.srv.callers.mu.Lock()
	p.srv.callers.known, p.srv.callers.tried = false, time.Time{} // ask again now
	p.srv.callers.mu.Unlock()
	if r := p.do("GET", "/sandboxes/sb1/proxy/8080/x", nil, sandbox.APIKeyHeader, ""); r.status != http.StatusOK {
		t.Fatalf("proxy from the host's own address = %d %s", r.status, r.body)
	}
}
