package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestEgressDocker drives network policies and the credential vault end to
// end: the real server creates a sandbox behind the egress sidecar on the
// Docker engine, and the sandbox's own commands probe a world served by the
// test on the host's address on the sandbox network (traffic never leaves
// this machine).
func TestEgressDocker(t *testing.T) {
	gw := sandboxNetworkGateway(t)
	zone := map[string]string{
		"api.vault.test":   gw,
		"other.vault.test": gw,
		"denied.test":      gw,
		"a.wild.test":      gw,
		"wild.test":        gw,
	}
	world := startEgressWorld(t, gw, "0", "443", zone, hostListen)
	plainWorld := startPlainOrigin(t, "plain", gw, "80", hostListen)
	s := startServer(t, serverOpts{extraTOML: fmt.Sprintf(`
[egress]
mode = "dns+nft"
dns_upstream = [%q]
upstream_ca_file = %q
`, world.dnsAddr, world.caFile)})
	c := sdkClient(t, s, false)
	ctx := sdkCtx(t)
	sb := sdkCreate(t, c, sandbox.CreateOptions{
		NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny", Egress: []sandbox.NetworkRule{
			{Action: "allow", Target: "api.vault.test"},
			{Action: "allow", Target: "other.vault.test"},
			{Action: "allow", Target: "*.wild.test"},
		}},
		CredentialProxy: true,
	})
	run := func(cmd string) (string, int) {
		t.Helper()
		ex, err := sb.Run(ctx, cmd, sandbox.RunOptions{})
		if err != nil {
			t.Fatalf("run %q: %v", cmd, err)
		}
		out := ex.Text()
		for _, l := range ex.Stderr {
			out += "\n" + l.Text
		}
		return out, ex.ExitCode
	}

	t.Run("endpoint carries the sidecar token", func(t *testing.T) {
		var ep sandbox.Endpoint
		s.api(t, "GET", "/v1/sandboxes/"+sb.ID()+"/endpoints/18080", nil, 200, &ep)
		if ep.Headers[sandbox.EgressAuthHeader] == "" {
			t.Fatalf("endpoint 18080 = %+v; want the %s header", ep, sandbox.EgressAuthHeader)
		}
		// The sidecar is reached on its own port, never through execd (a
		// process inside the sandbox) with its token.
		if strings.Contains(ep.Endpoint, "/proxy/") || ep.Headers[sandbox.AccessTokenHeader] != "" {
			t.Fatalf("endpoint 18080 = %+v; want the sidecar's own published port", ep)
		}
		st, err := sb.Egress().GetPolicy(ctx)
		if err != nil {
			t.Fatalf("GetPolicy: %v", err)
		}
		if st.EnforcementMode != sandbox.EgressEnforcementDNSNft || len(st.Policy.Egress) != 3 {
			t.Fatalf("policy status = %+v", st)
		}
	})
	t.Run("other containers cannot reach the sidecar API", func(t *testing.T) {
		ip := containerIP(t, sidecarContainer(t, sb.ID()), sandboxNetwork)
		// A neighbour sandbox without a policy tries the sidecar's
		// address on the sandbox network directly. Here the network
		// itself drops the packet (inter-container communication is
		// off); the sidecar's own filter is tested where nothing else
		// would: TestEgressDockerAPIGuard.
		other := sdkCreate(t, c, sandbox.CreateOptions{})
		ex, err := other.Run(ctx, "curl -sS --connect-timeout 2 http://"+ip+":18080/healthz", sandbox.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ex.ExitCode != 28 {
			t.Fatalf("neighbour reached the sidecar API: exit %d %q", ex.ExitCode, ex.Text())
		}
	})
	t.Run("an unresolved address is dropped", func(t *testing.T) {
		// Nothing has resolved to the bridge address yet: in dns+nft mode
		// a direct connection to it gets no answer.
		out, code := run("curl -sS --connect-timeout 2 http://" + world.httpAddr + "/")
		if code != 28 { // curl's "operation timed out": the SYN went unanswered
			t.Fatalf("direct connection to %s: exit %d %q; want a connect timeout", world.httpAddr, code, out)
		}
	})
	t.Run("names", func(t *testing.T) {
		for name, want := range map[string]int{"api.vault.test": 0, "a.wild.test": 0, "wild.test": 2, "denied.test": 2} {
			out, code := run("getent hosts " + name)
			if code != want {
				t.Errorf("getent hosts %s: exit %d %q; want %d", name, code, out, want)
			}
		}
		// Asking the world's resolver directly changes nothing: port 53
		// goes to the sidecar's proxy whatever the address.
		host, port, _ := net.SplitHostPort(world.dnsAddr)
		_ = port
		out, _ := run("python3 -c \"import socket,struct;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3);" +
			"q=struct.pack('>HHHHHH',7,256,1,0,0,0)+b''.join(bytes([len(p)])+p.encode() for p in 'denied.test'.split('.'))+b'\\\\x00'+struct.pack('>HH',1,1);" +
			"s.sendto(q,('" + host + "',53));print('rcode',s.recv(512)[3]&15)\"")
		if !strings.Contains(out, "rcode 3") {
			t.Fatalf("query for denied.test sent to %s:53: %q; want rcode 3 (NXDOMAIN from the sidecar)", host, out)
		}
	})

	secrets := map[string]string{"bearer": "tok-b3arer-0001", "basic": "dXNlcjpwYXNzLTAwMDI=", "apikey": "k3y-0003", "custom": "cust0m-0004"}
	t.Run("credential vault injects", func(t *testing.T) {
		v := sb.CredentialVault()
		var creds []sandbox.Credential
		for name, val := range secrets {
			creds = append(creds, sandbox.Credential{Name: name, Source: sandbox.CredentialSource{Type: "inline", Value: sandbox.Secret(val)}})
		}
		bind := func(name, path string, auth sandbox.CredentialAuth) sandbox.CredentialBinding {
			return sandbox.CredentialBinding{Name: name, Match: sandbox.CredentialMatch{Hosts: []string{"api.vault.test"}, Paths: []string{path}}, Auth: auth}
		}
		st, err := v.Create(ctx, sandbox.CreateCredentialVaultRequest{Credentials: creds, Bindings: []sandbox.CredentialBinding{
			bind("b1", "/bearer", sandbox.CredentialAuth{Type: "bearer", Credential: "bearer"}),
			bind("b2", "/basic", sandbox.CredentialAuth{Type: "basic", Credential: "basic"}),
			bind("b3", "/apikey", sandbox.CredentialAuth{Type: "apiKey", Name: "X-Api-Key", Credential: "apikey"}),
			bind("b4", "/custom", sandbox.CredentialAuth{Type: "customHeaders", Headers: []sandbox.CredentialHeaderSource{{Name: "X-Custom", Credential: "custom"}}}),
		}})
		if err != nil {
			t.Fatalf("vault Create: %v", err)
		}
		raw, _ := json.Marshal(st)
		for _, sec := range secrets {
			if strings.Contains(string(raw), sec) {
				t.Fatalf("vault state carries a secret: %s", raw)
			}
		}
		want := map[string][2]string{
			"/bearer": {"Authorization", "Bearer " + secrets["bearer"]},
			"/basic":  {"Authorization", "Basic " + secrets["basic"]},
			"/apikey": {"X-Api-Key", secrets["apikey"]},
			"/custom": {"X-Custom", secrets["custom"]},
		}
		for path, hv := range want {
			// The sandbox sends a placeholder; the proxy replaces it.
			out, code := run("curl -sS --max-time 10 -H 'Authorization: placeholder' https://api.vault.test" + path)
			if code != 0 {
				t.Fatalf("curl %s: exit %d %q", path, code, out)
			}
			got, ok := world.received("api.vault.test" + path)
			if !ok || got.Get(hv[0]) != hv[1] {
				t.Errorf("origin got %s = %q for %s; want %q", hv[0], got.Get(hv[0]), path, hv[1])
			}
			for _, sec := range secrets {
				if strings.Contains(out, sec) {
					t.Errorf("the sandbox saw a secret in the echo of %s: %q", path, out)
				}
			}
		}
		// A host with no binding is spliced, not intercepted: the sandbox
		// talks TLS with the origin itself and sees the origin's own
		// certificate (from the test world's CA, which the sandbox does not
		// trust). Nothing is injected.
		if out, code := run("curl -sS --max-time 10 https://other.vault.test/plain"); code != 60 {
			t.Fatalf("curl other.vault.test: exit %d %q; want 60 (the origin's own, untrusted, certificate)", code, out)
		}
		if out, code := run("curl -sS -k --max-time 10 https://other.vault.test/plain"); code != 0 {
			t.Fatalf("curl -k other.vault.test: exit %d %q", code, out)
		}
		got, _ := world.received("other.vault.test/plain")
		if got == nil || got.Get("Authorization") != "" || got.Get("X-Api-Key") != "" || got.Get("X-Custom") != "" {
			t.Errorf("unbound host received %v", got)
		}
	})
	t.Run("plain HTTP binding with substitutions", func(t *testing.T) {
		// A passthrough binding injects no header: only its placeholders
		// are replaced, on the bound host only.
		_, err := sb.CredentialVault().Patch(ctx, sandbox.PatchCredentialVaultRequest{Bindings: &sandbox.CredentialBindingMutations{Add: []sandbox.CredentialBinding{{
			Name:  "plain",
			Match: sandbox.CredentialMatch{Schemes: []string{"http"}, Hosts: []string{"api.vault.test"}},
			Auth: sandbox.CredentialAuth{Type: sandbox.CredentialAuthPassthrough, Substitutions: []sandbox.CredentialSubstitution{
				{Credential: "apikey", Placeholder: "__APIKEY__", In: []string{"header", "query"}},
			}},
		}}}})
		if err != nil {
			t.Fatalf("vault Patch: %v", err)
		}
		out, code := run("curl -sS --max-time 10 -H 'X-Key: __APIKEY__' 'http://api.vault.test/plain?k=__APIKEY__'")
		if code != 0 {
			t.Fatalf("curl http://api.vault.test: exit %d %q", code, out)
		}
		got, _ := plainWorld.received("api.vault.test/plain")
		if got.Header.Get("X-Key") != secrets["apikey"] || got.Target != "/plain?k="+secrets["apikey"] {
			t.Errorf("bound host got %+v; want the placeholders replaced", got)
		}
		if strings.Contains(out, secrets["apikey"]) || !strings.Contains(out, "********") {
			t.Errorf("echo not masked: %q", out)
		}
		// Another host on port 80 gets the placeholders as they are.
		if out, code := run("curl -sS --max-time 10 -H 'X-Key: __APIKEY__' 'http://other.vault.test/plain?k=__APIKEY__'"); code != 0 {
			t.Fatalf("curl http://other.vault.test: exit %d %q", code, out)
		}
		got, _ = plainWorld.received("other.vault.test/plain")
		if got.Header.Get("X-Key") != "__APIKEY__" || got.Target != "/plain?k=__APIKEY__" {
			t.Errorf("unbound host got %+v; want the placeholders untouched", got)
		}
	})
	t.Run("patch applies without restart", func(t *testing.T) {
		if _, code := run("getent hosts denied.test"); code != 2 {
			t.Fatalf("denied.test resolves before the patch")
		}
		if _, err := sb.Egress().PatchPolicy(ctx, []sandbox.NetworkRule{{Action: "allow", Target: "denied.test"}}); err != nil {
			t.Fatalf("PatchPolicy: %v", err)
		}
		if out, code := run("getent hosts denied.test"); code != 0 {
			t.Fatalf("denied.test after allowing it: exit %d %q", code, out)
		}
	})
	t.Run("killing the sidecar ends all egress", func(t *testing.T) {
		if out, err := exec.Command("docker", "kill", sidecarContainer(t, sb.ID())).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
		out, err := exec.Command("docker", "exec", sandboxContainer(t, sb.ID()), "sh", "-c",
			"ls /sys/class/net; curl -sS --connect-timeout 2 https://api.vault.test/bearer; echo exit=$?").CombinedOutput()
		if err != nil {
			t.Fatalf("docker exec: %v %s", err, out)
		}
		if strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]) != "lo" || strings.Contains(string(out), "exit=0") {
			t.Fatalf("after the sidecar died the sandbox still has a network: %q", out)
		}
		if st := s.sandboxState(t, sb.ID()); st != sandbox.StateFailed {
			t.Fatalf("state after the sidecar died = %s; want Failed", st)
		}
	})
	t.Run("delete removes the sidecar", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sb.Kill(dctx); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=opensandbox.io/egress-of="+sb.ID()).Output()
		if strings.TrimSpace(string(out)) != "" {
			t.Fatalf("sidecar left behind: %s", out)
		}
	})
}

// TestEgressDockerAPIGuard: on Docker's default bridge, where containers
// reach each other (docker.isolate_sandboxes = false), the sidecar itself
// keeps other containers off its API (the api_guard input chain drops
// them), while the same neighbour reaches the same address on another
// port: the sandbox's execd, served in the sidecar's namespace. That
// shows the packets get through unless the sidecar drops them.
func TestEgressDockerAPIGuard(t *testing.T) {
	s := startServer(t, serverOpts{dockerTOML: "isolate_sandboxes = false\n", extraTOML: `
[egress]
mode = "dns+nft"
`})
	c := sdkClient(t, s, false)
	sb := sdkCreate(t, c, sandbox.CreateOptions{NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny"}})
	neighbour := sdkCreate(t, c, sandbox.CreateOptions{})
	ip := containerIP(t, sidecarContainer(t, sb.ID()), "bridge")
	containerIP(t, sandboxContainer(t, neighbour.ID()), "bridge") // the neighbour is on the same bridge

	t.Run("control: the neighbour reaches the sidecar's namespace", func(t *testing.T) {
		// Without the sandbox's execd token the answer is 401: an answer
		// all the same, so the packets got through both ways.
		ex := runIn(t, neighbour, "curl -sS -o /dev/null -w '%{http_code}' --connect-timeout 3 -m 10 http://"+ip+":44772/ping")
		if ex.ExitCode != 0 || ex.Text() != "401" {
			t.Fatalf("curl from the neighbour to execd behind the sidecar (%s:44772): exit %d %q %q; want an answer (401 without the token)",
				ip, ex.ExitCode, ex.Text(), stderrOf(ex))
		}
	})
	t.Run("the sidecar drops the neighbour's packets to its API", func(t *testing.T) {
		ex := runIn(t, neighbour, "curl -sS --connect-timeout 2 http://"+ip+":18080/healthz")
		// 28 is curl's timeout: the SYN went unanswered.
		if ex.ExitCode != 28 {
			t.Fatalf("neighbour reached the sidecar API (%s:18080): exit %d %q %q; want a connect timeout (28)",
				ip, ex.ExitCode, ex.Text(), stderrOf(ex))
		}
	})
}

// TestEgressCreateErrors checks what the server refuses before any
// container exists.
func TestEgressCreateErrors(t *testing.T) {
	s := startServer(t, serverOpts{})
	img := ensureBaseImage(t)
	base := func() map[string]any {
		return map[string]any{"image": map[string]any{"uri": img}, "timeout": 60, "resourceLimits": map[string]string{}, "entrypoint": []string{"tail", "-f", "/dev/null"}}
	}
	b := base()
	b["networkPolicy"] = map[string]any{"defaultAction": "sometimes"}
	s.apiError(t, "POST", "/v1/sandboxes", b, 400, "INVALID_REQUEST")
	b = base()
	b["credentialProxy"] = map[string]any{"enabled": true}
	s.apiError(t, "POST", "/v1/sandboxes", b, 400, "INVALID_REQUEST")
}

// sandboxNetwork is the network the e2e servers put sandboxes on: the
// default docker.bridge_network.
const sandboxNetwork = "opensandbox"

// sandboxNetworkGateway is the host's address on sandboxNetwork. The server
// creates the network at start; when no server has yet, one is started.
func sandboxNetworkGateway(t *testing.T) string {
	t.Helper()
	if exec.Command("docker", "network", "inspect", sandboxNetwork).Run() != nil {
		startServer(t, serverOpts{})
	}
	out, err := exec.Command("docker", "network", "inspect", sandboxNetwork, "--format", "{{(index .IPAM.Config 0).Gateway}}").Output()
	if err != nil {
		t.Fatalf("docker network inspect %s: %v", sandboxNetwork, err)
	}
	gw := strings.TrimSpace(string(out))
	if net.ParseIP(gw) == nil {
		t.Fatalf("gateway of network %s %q is not an address", sandboxNetwork, gw)
	}
	return gw
}

// sandboxContainer and sidecarContainer are the engine ids of sandbox
// id's container and of its egress sidecar, found by label (their names
// do not carry the sandbox id).
func sandboxContainer(t *testing.T, id string) string {
	t.Helper()
	return containerByLabel(t, "opensandbox.io/id="+id)
}

func sidecarContainer(t *testing.T, id string) string {
	t.Helper()
	return containerByLabel(t, "opensandbox.io/egress-of="+id)
}

func containerByLabel(t *testing.T, label string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", "label="+label).Output()
	ids := strings.Fields(string(out))
	if err != nil || len(ids) != 1 {
		t.Fatalf("containers labelled %s: %q, %v; want one", label, out, err)
	}
	return ids[0]
}

// containerIP is the address of the named container on a network: that
// of the container whose network namespace it shares, if it does (a
// sandbox in its warm network holder's or its egress sidecar's).
func containerIP(t *testing.T, name, network string) string {
	t.Helper()
	if mode, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.NetworkMode}}", name).Output(); err == nil {
		if owner, ok := strings.CutPrefix(strings.TrimSpace(string(mode)), "container:"); ok {
			name = owner
		}
	}
	out, err := exec.Command("docker", "inspect", "-f",
		`{{with index .NetworkSettings.Networks "`+network+`"}}{{.IPAddress}}{{end}}`, name).Output()
	ip := strings.TrimSpace(string(out))
	if err != nil || net.ParseIP(ip) == nil {
		t.Fatalf("address of %s on network %s: %q, %v", name, network, ip, err)
	}
	return ip
}
