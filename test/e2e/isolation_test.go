package e2e

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestSandboxIsolation: by default two sandboxes of a server cannot reach
// each other — the network drops the packets — while both still reach the
// host on the network's gateway. With docker.isolate_sandboxes = false
// (Docker's default bridge) the same probe gets through, which shows the
// probe itself works.
func TestSandboxIsolation(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	gw := sandboxNetworkGateway(t)
	if out, _ := exec.Command("docker", "network", "inspect", sandboxNetwork, "--format",
		`{{index .Options "com.docker.network.bridge.enable_icc"}}`).Output(); strings.TrimSpace(string(out)) != "false" {
		t.Fatalf("network %s: enable_icc = %q, want false", sandboxNetwork, out)
	}
	hostURL := serveOn(t, gw)

	c := sdkClient(t, s, false)
	a := sdkCreate(t, c, sandbox.CreateOptions{})
	b := sdkCreate(t, c, sandbox.CreateOptions{})
	ipB := listenIn(t, b, sandboxNetwork)

	t.Run("a sandbox's packets to another are dropped", func(t *testing.T) {
		ex := runIn(t, a, "curl -sS -o /dev/null --connect-timeout 3 http://"+ipB+":8000/")
		// 28 is curl's timeout: the SYN went unanswered. A refused
		// connection (7) would mean the packets got through.
		if ex.ExitCode != 28 || !strings.Contains(strings.ToLower(stderrOf(ex)), "timeout") {
			t.Fatalf("curl from sandbox A to sandbox B (%s:8000): exit %d %q; want a connect timeout (28)", ipB, ex.ExitCode, stderrOf(ex))
		}
	})
	t.Run("a sandbox reaches the host on the gateway", func(t *testing.T) {
		ex := runIn(t, a, "curl -sS --connect-timeout 3 -m 10 "+hostURL)
		if ex.ExitCode != 0 || ex.Text() != "host-ok" {
			t.Fatalf("curl from sandbox A to the host (%s): exit %d %q %q", hostURL, ex.ExitCode, ex.Text(), stderrOf(ex))
		}
	})
	t.Run("control: without isolation the probe gets through", func(t *testing.T) {
		open := startServer(t, serverOpts{dockerTOML: "isolate_sandboxes = false\n"})
		oc := sdkClient(t, open, false)
		a2 := sdkCreate(t, oc, sandbox.CreateOptions{})
		b2 := sdkCreate(t, oc, sandbox.CreateOptions{})
		ipB2 := listenIn(t, b2, "bridge")
		ex := runIn(t, a2, "curl -sS -o /dev/null -w '%{http_code}' --connect-timeout 3 -m 10 http://"+ipB2+":8000/")
		if ex.ExitCode != 0 || ex.Text() != "200" {
			t.Fatalf("curl between sandboxes on the default bridge: exit %d %q %q; want 200", ex.ExitCode, ex.Text(), stderrOf(ex))
		}
	})
}

// serveOn serves "host-ok" on ip from the test process and returns its URL.
func serveOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on the gateway %s: %v", ip, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("host-ok")) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// listenIn starts an HTTP server on port 8000 of sb, waits until it answers
// on the sandbox's own address on network, and returns that address.
func listenIn(t *testing.T, sb *sandbox.Sandbox, network string) string {
	t.Helper()
	ip := containerIP(t, sandboxContainer(t, sb.ID()), network)
	if _, err := sb.Run(sdkCtx(t), "python3 -m http.server 8000 --bind 0.0.0.0", sandbox.RunOptions{Background: true}); err != nil {
		t.Fatalf("start the listener in %s: %v", sb.ID(), err)
	}
	pollUntil(t, "the listener in "+sb.ID()+" to answer on "+ip, 30*time.Second, func() bool {
		return runIn(t, sb, "curl -sS -o /dev/null --connect-timeout 1 -m 2 http://"+ip+":8000/").ExitCode == 0
	})
	return ip
}

// runIn runs command in sb and returns its execution.
func runIn(t *testing.T, sb *sandbox.Sandbox, command string) *sandbox.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex, err := sb.Run(ctx, command, sandbox.RunOptions{})
	if err != nil {
		t.Fatalf("run %q in %s: %v", command, sb.ID(), err)
	}
	return ex
}

func stderrOf(ex *sandbox.Execution) string {
	var b strings.Builder
	for _, l := range ex.Stderr {
		b.WriteString(l.Text)
	}
	return b.String()
}
