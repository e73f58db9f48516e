package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/opensandbox-go/opensandbox/internal/netnstest"
	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestEgressSidecarNetns runs the egress binary as the sidecar of a
// network namespace the test creates, joined by a veth pair to a "world"
// namespace holding a DNS server, HTTP servers and an HTTPS origin on
// 10.250.N.x addresses that exist only in these namespaces. The sandbox's
// traffic is made from sockets opened inside the sandbox namespace.
func TestEgressSidecarNetns(t *testing.T) {
	n := newEgressNet(t)
	w2, w3, w4, w5 := n.ip(2), n.ip(3), n.ip(4), n.ip(5)
	zone := map[string]string{
		"api.vault.test":    w2,
		"ok.wild.test":      w3,
		"bad.wild.test":     w3,
		"blocked.wild.test": w3,
		"wild.test":         w3,
		"denied.test":       w2,
		"hook.test":         w4, // the deny webhook, by name: the policy does not allow it
	}
	world := startEgressWorld(t, w2, "53", "443", zone, n.listen(n.World))
	port := n.serveHTTP(t, w3, w4, w5)
	// Plain-HTTP origins on port 80: the bound host's (api.vault.test) and
	// a decoy on another allowed address.
	boundHTTP := startPlainOrigin(t, "bound", w2, "80", n.listen(n.World))
	decoyHTTP := startPlainOrigin(t, "decoy", w5, "80", n.listen(n.World))

	// The deny webhook lives in the world too: the sidecar reaches it with
	// its own (bypass-marked) traffic.
	denials := make(chan map[string]string, 16)
	hookLn, err := n.listen(n.World).tcp(net.JoinHostPort(w4, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hook := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]string
		json.NewDecoder(r.Body).Decode(&ev)
		denials <- ev
	})}
	go hook.Serve(hookLn)
	t.Cleanup(func() { hook.Close() })

	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	os.MkdirAll(rules, 0o755)
	os.WriteFile(filepath.Join(rules, "deny.always"), []byte("# operator rules\nblocked.wild.test\n"), 0o644)
	os.WriteFile(filepath.Join(rules, "log_skip.always"), []byte("nowhere.test\n"), 0o644)
	caFile := filepath.Join(dir, "ca.pem")
	policy := fmt.Sprintf(`{"defaultAction":"deny","egress":[
		{"action":"deny","target":%q},
		{"action":"allow","target":"%s/30"},
		{"action":"allow","target":"api.vault.test"},
		{"action":"deny","target":"bad.wild.test"},
		{"action":"allow","target":"*.wild.test"}]}`, w4, w4)
	const token = "netns-egress-token"
	sc := n.startSidecar(t, map[string]string{
		"OPENSANDBOX_EGRESS_MODE":                  "dns+nft",
		"OPENSANDBOX_EGRESS_RULES":                 policy,
		"OPENSANDBOX_EGRESS_TOKEN":                 token,
		"OPENSANDBOX_EGRESS_DNS_UPSTREAM":          w2,
		"OPENSANDBOX_EGRESS_RULES_DIR":             rules,
		"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true",
		"OPENSANDBOX_EGRESS_CA_FILE":               caFile,
		"OPENSANDBOX_EGRESS_UPSTREAM_CA_FILE":      world.caFile,
		"OPENSANDBOX_EGRESS_POLICY_FILE":           filepath.Join(dir, "policy.json"),
		"OPENSANDBOX_EGRESS_SANDBOX_ID":            "netns-sandbox",
		"OPENSANDBOX_EGRESS_DENY_WEBHOOK":          "http://hook.test:" + strconv.Itoa(hookLn.Addr().(*net.TCPAddr).Port) + "/deny",
	})
	api := n.sidecarClient(t, token)

	// The sandbox asks the world's resolver directly (10.250.N.2:53); the
	// firewall hands the query to the sidecar's proxy instead.
	lookup := func(name string) ([]string, error) {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.dial(n.Sandbox, network, net.JoinHostPort(w2, "53"), 2*time.Second)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return r.LookupHost(ctx, name)
	}
	mustResolve := func(t *testing.T, name, want string) {
		t.Helper()
		addrs, err := lookup(name)
		if err != nil || len(addrs) != 1 || addrs[0] != want {
			t.Fatalf("lookup %s = %v, %v; want %s", name, addrs, err, want)
		}
	}
	mustNXDomain := func(t *testing.T, name string) {
		t.Helper()
		_, err := lookup(name)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("lookup %s: %v; want NXDOMAIN", name, err)
		}
	}

	t.Run("allowed name resolves and connects", func(t *testing.T) {
		mustResolve(t, "api.vault.test", w2)
		n.mustConnect(t, w2, world.httpAddr[strings.LastIndex(world.httpAddr, ":")+1:])
	})
	t.Run("denied names get NXDOMAIN", func(t *testing.T) {
		for _, name := range []string{"denied.test", "bad.wild.test", "wild.test", "blocked.wild.test", "nowhere.test"} {
			mustNXDomain(t, name)
		}
	})
	t.Run("denials reach the webhook", func(t *testing.T) {
		want := map[string]bool{"denied.test": true, "bad.wild.test": true, "wild.test": true, "blocked.wild.test": true}
		for len(want) > 0 {
			select {
			case ev := <-denials:
				if ev["hostname"] == "nowhere.test" || ev["hostname"] == "hook.test" {
					t.Fatalf("reported %v: a log_skip.always name, or the webhook's own lookup", ev)
				}
				if ev["sandboxId"] != "netns-sandbox" || ev["source"] != "dns" || ev["timestamp"] == "" {
					t.Fatalf("webhook event = %v", ev)
				}
				delete(want, ev["hostname"])
			case <-time.After(10 * time.Second):
				t.Fatalf("no webhook event for %v", want)
			}
		}
	})
	t.Run("DNS to any other resolver reaches only the sidecar", func(t *testing.T) {
		// Nothing serves DNS on w3, w5 or any IPv6 address: an answer can
		// only come from the sidecar's proxy, over UDP and TCP, IPv4 and
		// IPv6 alike.
		for _, server := range []string{w3, w5, n.IP6(2).String()} {
			for _, network := range []string{"udp", "tcp"} {
				r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return n.dial(n.Sandbox, network, net.JoinHostPort(server, "53"), 2*time.Second)
				}}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				addrs, err := r.LookupHost(ctx, "api.vault.test")
				_, derr := r.LookupHost(ctx, "denied.test")
				cancel()
				var de *net.DNSError
				if err != nil || len(addrs) != 1 || addrs[0] != w2 || !errors.As(derr, &de) || !de.IsNotFound {
					t.Fatalf("%s %s:53: api.vault.test = %v, %v; denied.test err = %v", network, server, addrs, err, derr)
				}
			}
		}
	})
	t.Run("wildcard resolves and opens its address", func(t *testing.T) {
		n.mustBeDropped(t, w3, port)
		mustResolve(t, "ok.wild.test", w3)
		n.mustConnect(t, w3, port)
	})
	t.Run("IP and CIDR rules, first match wins", func(t *testing.T) {
		n.mustBeDropped(t, w4, port) // deny w4 comes before allow w4/30
		n.mustConnect(t, w5, port)   // inside the /30
	})
	t.Run("policy patch takes effect without restart", func(t *testing.T) {
		mustNXDomain(t, "denied.test")
		var st sandbox.PolicyStatus
		api.do(t, "PATCH", "/policy", `[{"action":"allow","target":"denied.test"}]`, 200, &st)
		mustResolve(t, "denied.test", w2)
		// What ok.wild.test resolved to before the patch stays reachable
		// without asking DNS again (clients cache answers).
		n.mustConnect(t, w3, port)
		b, err := os.ReadFile(filepath.Join(dir, "policy.json"))
		if err != nil || !strings.Contains(string(b), "denied.test") {
			t.Fatalf("policy file after patch: %q, %v", b, err)
		}
	})
	t.Run("credential proxy injects into HTTPS", func(t *testing.T) {
		api.do(t, "POST", "/credential-vault", `{"credentials":[{"name":"tok","source":{"type":"inline","value":"netns-s3cret-123"}}],
			"bindings":[{"name":"api","match":{"hosts":["api.vault.test"]},"auth":{"type":"bearer","credential":"tok"}}]}`, 201, nil)
		body := n.httpsGet(t, caFile, "api.vault.test", w2, "/whoami")
		got, _ := world.received("api.vault.test/whoami")
		if got.Get("Authorization") != "Bearer netns-s3cret-123" {
			t.Fatalf("origin got Authorization %q", got.Get("Authorization"))
		}
		if strings.Contains(body, "netns-s3cret-123") {
			t.Fatalf("the sandbox read the secret back: %s", body)
		}
	})
	t.Run("plain HTTP binding goes to the bound host by name", func(t *testing.T) {
		const sub = "netns-sub&s3cret/456"
		api.do(t, "PATCH", "/credential-vault", `{"credentials":{"add":[{"name":"sub","source":{"type":"inline","value":"`+sub+`"}}]},
			"bindings":{"add":[{"name":"plain","match":{"schemes":["http"],"hosts":["api.vault.test"]},
			"auth":{"type":"bearer","credential":"tok","substitutions":[{"credential":"sub","placeholder":"{{SUB}}","in":["query","header","body"]}]}}]}}`, 200, nil)
		var meta sandbox.CredentialBindingMetadata
		api.do(t, "GET", "/credential-vault/bindings/plain", "", 200, &meta)
		if meta.Match == nil || fmt.Sprint(meta.Match.Schemes, meta.Match.Ports) != "[http] [80]" {
			t.Fatalf("binding plain = %+v; want schemes [http], ports [80]", meta.Match)
		}
		// The sandbox connects to the decoy's address with the bound Host:
		// the request, with the credentials, reaches the bound host.
		resp, body := n.httpDo(t, w5, "POST", "http://api.vault.test/echo?k={{SUB}}", "application/json", `{"k":"{{SUB}}"}`,
			"Authorization", "Bearer placeholder", "X-Sub", "{{SUB}}")
		if resp.StatusCode != 200 || resp.Header.Get("X-Origin") != "bound" {
			t.Fatalf("answer %d from %q; want 200 from the bound host", resp.StatusCode, resp.Header.Get("X-Origin"))
		}
		got, _ := boundHTTP.received("api.vault.test/echo")
		if got.Header.Get("Authorization") != "Bearer netns-s3cret-123" || got.Header.Get("X-Sub") != sub ||
			got.Target != "/echo?k=netns-sub%26s3cret%2F456" || got.Body != `{"k":"netns-sub\u0026s3cret/456"}` {
			t.Fatalf("bound host got %+v", got)
		}
		if decoyHTTP.count() != 0 {
			t.Fatalf("the address the sandbox connected to received a request")
		}
		for _, s := range []string{"netns-s3cret-123", sub, "netns-sub%26s3cret", `netns-sub\u0026s3cret`, `netns-sub\\u0026s3cret`} {
			if strings.Contains(body, s) {
				t.Fatalf("the sandbox read a secret back (%q): %s", s, body)
			}
		}
		// Another Host on port 80 goes where the sandbox connected, with
		// the placeholders as the sandbox wrote them.
		resp, _ = n.httpDo(t, w5, "POST", "http://other.test/echo?k={{SUB}}", "text/plain", "{{SUB}}", "X-Sub", "{{SUB}}")
		got, _ = decoyHTTP.received("other.test/echo")
		if resp.Header.Get("X-Origin") != "decoy" || got.Header.Get("X-Sub") != "{{SUB}}" || got.Body != "{{SUB}}" ||
			got.Header.Get("Authorization") != "" || !strings.Contains(got.Target, "{{SUB}}") {
			t.Fatalf("unbound request: answered by %q, origin got %+v", resp.Header.Get("X-Origin"), got)
		}
	})
	t.Run("killing the sidecar leaves no egress", func(t *testing.T) {
		n.mustConnect(t, w5, port)
		sc.kill()
		n.mustBeDropped(t, w5, port) // statically allowed, yet closed now
		n.mustBeDropped(t, w3, port) // dynamically allowed before
		if _, err := lookup("api.vault.test"); err == nil {
			t.Fatal("DNS still answers after the sidecar died")
		}
	})
}

// egressNet is the test's pair of namespaces, with helpers that speak in
// the strings the tests use.
type egressNet struct {
	*netnstest.Pair
}

func newEgressNet(t *testing.T) *egressNet {
	t.Helper()
	return &egressNet{Pair: netnstest.New(t)}
}

func (n *egressNet) ip(i int) string { return n.IP(i).String() }

func (n *egressNet) listen(ns netns.NsHandle) listenFuncs {
	return listenFuncs{
		tcp: func(addr string) (net.Listener, error) { return netnstest.Listen(ns, addr) },
		udp: func(addr string) (net.PacketConn, error) { return netnstest.ListenPacket(ns, addr) },
	}
}

func (n *egressNet) dial(ns netns.NsHandle, network, addr string, timeout time.Duration) (net.Conn, error) {
	return netnstest.Dial(ns, network, addr, timeout)
}

// serveHTTP serves "ok" on one port of each address in the world.
func (n *egressNet) serveHTTP(t *testing.T, ips ...string) string {
	t.Helper()
	port := "0"
	for _, ip := range ips {
		ln, err := n.listen(n.World).tcp(net.JoinHostPort(ip, port))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return port
}

func (n *egressNet) mustConnect(t *testing.T, ip, port string) {
	t.Helper()
	c, err := n.dial(n.Sandbox, "tcp", net.JoinHostPort(ip, port), 2*time.Second)
	if err != nil {
		t.Fatalf("connect %s:%s from the sandbox: %v; want success", ip, port, err)
	}
	c.Close()
}

func (n *egressNet) mustBeDropped(t *testing.T, ip, port string) {
	t.Helper()
	c, err := n.dial(n.Sandbox, "tcp", net.JoinHostPort(ip, port), 500*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatalf("connect %s:%s from the sandbox succeeded; want it dropped", ip, port)
	}
	if !isTimeout(err) {
		t.Fatalf("connect %s:%s from the sandbox: %v; want a timeout (dropped, not refused)", ip, port, err)
	}
}

// startSidecar runs bin/egress inside the sandbox namespace and waits for
// /healthz.
func (n *egressNet) startSidecar(t *testing.T, env map[string]string) *sidecarProc {
	t.Helper()
	cmd := osexec.Command("ip", "netns", "exec", n.SandboxName, binPath(t, "egress"))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logPath := filepath.Join(t.TempDir(), "egress.log")
	logf, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start egress: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("egress log:\n%s", b)
		}
	})
	cl := n.sidecarClient(t, "")
	deadline := time.Now().Add(20 * time.Second)
	for delay := 5 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		if code, _ := cl.get("/healthz"); code == 200 {
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("egress exited during start:\n%s", b)
		case <-time.After(delay):
		}
		if time.Now().After(deadline) {
			t.Fatal("egress never became healthy")
		}
	}
	return &sidecarProc{cmd: cmd, exited: exited}
}

// sidecarProc is a running egress binary.
type sidecarProc struct {
	cmd    *osexec.Cmd
	exited chan struct{}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *sidecarProc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

type sidecarClient struct {
	hc    *http.Client
	token string
}

// sidecarClient talks to the sidecar's API at 127.0.0.1:18080 inside the
// sandbox namespace (a loopback client, as execd's /proxy would be). Every
// reply is checked against api/egress.yaml.
func (n *egressNet) sidecarClient(t *testing.T, token string) *sidecarClient {
	base := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.dial(n.Sandbox, network, "127.0.0.1:18080", 2*time.Second)
		},
	}
	return &sidecarClient{token: token, hc: &http.Client{Timeout: 5 * time.Second,
		Transport: openapitest.Load(t, "api/egress.yaml").Transport(t, base)}}
}

func (c *sidecarClient) get(path string) (int, error) {
	resp, err := c.hc.Get("http://sidecar" + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (c *sidecarClient) do(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://sidecar"+path, strings.NewReader(body))
	req.Header.Set(sandbox.EgressAuthHeader, c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s; want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// httpsGet fetches https://host/path from the sandbox, trusting only the
// sidecar's CA, connecting to ip:443 (the proxy intercepts it).
func (n *egressNet) httpsGet(t *testing.T, caFile, host, ip, path string) string {
	t.Helper()
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("sidecar CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.dial(n.Sandbox, network, net.JoinHostPort(ip, "443"), 2*time.Second)
		},
	}}
	resp, err := hc.Get("https://" + host + path)
	if err != nil {
		t.Fatalf("GET https://%s%s from the sandbox: %v", host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET https://%s%s = %d %s", host, path, resp.StatusCode, b)
	}
	return string(b)
}

// httpDo sends one plain-HTTP request from the sandbox, connecting to
// ip:80 whatever the URL names, and returns the answer and its body.
func (n *egressNet) httpDo(t *testing.T, ip, method, url, ctype, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.dial(n.Sandbox, network, net.JoinHostPort(ip, "80"), 2*time.Second)
		},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s from the sandbox: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestEgressSidecarNetnsDNSMode checks the "dns" enforcement mode: names
// are filtered, IP rules are not enforced (the mode's meaning), DNS over
// TLS is still dropped, and the sandbox still loses all egress with the
// sidecar.
func TestEgressSidecarNetnsDNSMode(t *testing.T) {
	n := newEgressNet(t)
	w2, w4 := n.ip(2), n.ip(4)
	startEgressWorld(t, w2, "53", "443", map[string]string{"ok.test": w2, "no.test": w2}, n.listen(n.World))
	port := n.serveHTTP(t, w4)
	ln853, err := n.listen(n.World).tcp(net.JoinHostPort(w4, "853"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln853.Close() })
	go func() {
		for {
			c, err := ln853.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sc := n.startSidecar(t, map[string]string{
		"OPENSANDBOX_EGRESS_MODE":         "dns",
		"OPENSANDBOX_EGRESS_RULES":        fmt.Sprintf(`{"defaultAction":"deny","egress":[{"action":"allow","target":"ok.test"},{"action":"deny","target":%q}]}`, w4),
		"OPENSANDBOX_EGRESS_DNS_UPSTREAM": w2,
		"OPENSANDBOX_EGRESS_RULES_DIR":    t.TempDir(),
	})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return n.dial(n.Sandbox, network, net.JoinHostPort(w2, "53"), 2*time.Second)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if addrs, err := r.LookupHost(ctx, "ok.test"); err != nil || len(addrs) != 1 {
		t.Fatalf("ok.test = %v, %v", addrs, err)
	}
	var de *net.DNSError
	if _, err := r.LookupHost(ctx, "no.test"); !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("no.test: %v; want NXDOMAIN", err)
	}
	n.mustConnect(t, w4, port) // IP rules are not enforced in dns mode
	var st sandbox.PolicyStatus
	n.sidecarClient(t, "").do(t, "GET", "/policy", "", 200, &st)
	if st.EnforcementMode != "dns" || !strings.Contains(st.Reason, "not enforced") {
		t.Fatalf("policy status in dns mode with an IP rule = %+v; want a reason saying IP rules are not enforced", st)
	}
	n.mustBeDropped(t, w4, "853")
	sc.kill()
	n.mustBeDropped(t, w4, port)
}
