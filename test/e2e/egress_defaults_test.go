package e2e

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestEgressDefaultDenyDropsAddresses: with the server's default [egress]
// table, a sandbox whose policy denies by default cannot connect to an
// address it never resolved. The target is a listener of this test on the
// host's address on the sandbox network, the address every sandbox knows
// (its default gateway). With "dns" as the default mode it answered.
func TestEgressDefaultDenyDropsAddresses(t *testing.T) {
	gw := sandboxNetworkGateway(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("reached"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + "/"

	s := startServer(t, serverOpts{}) // no [egress] table: the defaults
	c := sdkClient(t, s, false)
	ctx := sdkCtx(t)

	// Control: a sandbox without a policy reaches the listener, so a
	// timeout below is the sidecar's doing, not the host's firewall.
	open := sdkCreate(t, c, sandbox.CreateOptions{})
	if ex := runIn(t, open, "curl -sS --connect-timeout 5 -m 10 "+url); ex.ExitCode != 0 || ex.Text() != "reached" {
		t.Fatalf("control: curl %s without a policy: exit %d %q %q; want it reached", url, ex.ExitCode, ex.Text(), stderrOf(ex))
	}

	sb := sdkCreate(t, c, sandbox.CreateOptions{NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny"}})
	st, err := sb.Egress().GetPolicy(ctx)
	if err != nil {
		t.Fatalf("GetPolicy: %v", err)
	}
	if st.EnforcementMode != sandbox.EgressEnforcementDNSNft {
		t.Errorf("default enforcement mode = %q; want %q", st.EnforcementMode, sandbox.EgressEnforcementDNSNft)
	}
	ex := runIn(t, sb, "curl -sS --connect-timeout 2 -m 5 "+url)
	if ex.ExitCode != 28 { // curl's timeout: the SYN went unanswered
		t.Fatalf("deny-by-default sandbox: curl %s: exit %d %q %q; want a connect timeout (28)", url, ex.ExitCode, ex.Text(), stderrOf(ex))
	}
}
