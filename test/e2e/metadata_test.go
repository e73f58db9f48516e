package e2e

import (
	"net"
	"net/http"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestMetadataGuardDocker: a server with the default configuration drops,
// on the host, what sandboxes without a network policy send to link-local
// addresses. The test puts a link-local address of its own,
// 169.254.77.77 (not the metadata address), on the host's loopback and
// serves it; the same server on the host's address on the sandbox
// network is the control.
func TestMetadataGuardDocker(t *testing.T) {
	const linkLocal = "169.254.77.77"
	gw := sandboxNetworkGateway(t)
	if out, err := osexec.Command("ip", "addr", "add", linkLocal+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Skipf("cannot add %s to the host's loopback: %v: %s", linkLocal, err, out)
	}
	t.Cleanup(func() { _ = osexec.Command("ip", "addr", "del", linkLocal+"/32", "dev", "lo").Run() })
	var port string
	for _, ip := range []string{gw, linkLocal} {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if port != "" {
			ln, err = net.Listen("tcp", net.JoinHostPort(ip, port))
		}
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("reached"))
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}

	s := startServer(t, serverOpts{})
	out, err := osexec.Command("nft", "list", "table", "inet", "opensandbox_metadata").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table inet opensandbox_metadata: %v: %s", err, out)
	}
	id, err := osexec.Command("docker", "network", "inspect", "-f", "{{.Id}}", sandboxNetwork).Output()
	if err != nil {
		t.Fatal(err)
	}
	br := "br-" + strings.TrimSpace(string(id))[:12]
	if !strings.Contains(string(out), `iifname "`+br+`" ip daddr 169.254.0.0/16`) {
		t.Fatalf("no guard for %s:\n%s", br, out)
	}

	c := sdkClient(t, s, false)
	sb := sdkCreate(t, c, sandbox.CreateOptions{})
	if ex := runIn(t, sb, "curl -sS --connect-timeout 5 -m 10 http://"+net.JoinHostPort(gw, port)+"/"); ex.ExitCode != 0 || ex.Text() != "reached" {
		t.Fatalf("control: curl the host's bridge address: exit %d %q %q", ex.ExitCode, ex.Text(), stderrOf(ex))
	}
	if ex := runIn(t, sb, "curl -sS --connect-timeout 2 -m 5 http://"+net.JoinHostPort(linkLocal, port)+"/"); ex.ExitCode != 28 {
		t.Fatalf("curl %s from a sandbox without a policy: exit %d %q %q; want a connect timeout (28)", linkLocal, ex.ExitCode, ex.Text(), stderrOf(ex))
	}
}
