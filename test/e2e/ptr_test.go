package e2e

import (
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestReverseDNSHidesSandboxIDs: a sandbox asking the engine's embedded
// DNS for the name of a neighbour's address (a PTR query) must not learn
// the neighbour's sandbox id, for a plain sandbox and for one behind an
// egress sidecar (whose address is the sidecar's). The engine answers
// with the container's name; names carried the id.
func TestReverseDNSHidesSandboxIDs(t *testing.T) {
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	asker := sdkCreate(t, c, sandbox.CreateOptions{})
	plain := sdkCreate(t, c, sandbox.CreateOptions{})
	fenced := sdkCreate(t, c, sandbox.CreateOptions{NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny"}})
	for _, n := range []struct {
		sb        *sandbox.Sandbox
		container string
	}{{plain, sandboxContainer(t, plain.ID())}, {fenced, sidecarContainer(t, fenced.ID())}} {
		ip := containerIP(t, n.container, sandboxNetwork)
		ex := runIn(t, asker, `python3 -c "import socket,sys
try:
    print(socket.gethostbyaddr(sys.argv[1])[0])
except socket.herror as e:
    print('no name', e)" `+ip)
		name := strings.TrimSpace(ex.Text())
		if ex.ExitCode != 0 || name == "" {
			t.Fatalf("reverse lookup of %s: exit %d %q %q", ip, ex.ExitCode, name, stderrOf(ex))
		}
		// Control: the lookup reached the engine's DNS and got a name.
		if strings.HasPrefix(name, "no name") {
			t.Fatalf("reverse lookup of %s: %s; want the engine's answer", ip, name)
		}
		if strings.Contains(name, n.sb.ID()) {
			t.Errorf("reverse lookup of %s (sandbox %s) answers %q: it carries the sandbox id", ip, n.sb.ID(), name)
		}
	}
}
