package tlsproxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

const (
	plainSecret = "plain-secret-5555"
	subSecret   = "sub&secret/6666 \"q\""
)

// seenReq is what an origin received.
type seenReq struct {
	uri    string
	header http.Header
	body   string
}

// recorder is a plain-HTTP origin that records requests and echoes them
// back in its answer (method, target, headers and body), as debug
// endpoints do.
type recorder struct {
	name string
	mu   sync.Mutex
	reqs []seenReq
}

func (o *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	o.reqs = append(o.reqs, seenReq{uri: r.RequestURI, header: r.Header.Clone(), body: string(b)})
	o.mu.Unlock()
	w.Header().Set("X-Origin", o.name)
	w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
	fmt.Fprintf(w, "%s %s\n", r.Method, r.RequestURI)
	r.Header.Write(w)
	w.Write(b)
}

func (o *recorder) all() []seenReq {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]seenReq(nil), o.reqs...)
}

func (o *recorder) last(t *testing.T) seenReq {
	t.Helper()
	all := o.all()
	if len(all) == 0 {
		t.Fatalf("origin %s received no request", o.name)
	}
	return all[len(all)-1]
}

// plainEnv is the plain-HTTP proxy between a "sandbox" client and two
// origins on the same port: the bound host's (127.0.0.1, what Resolve
// answers for bound.test) and a decoy (127.0.0.2), the address the sandbox
// "connected to" (OriginalDst).
type plainEnv struct {
	client         *http.Client
	port           int
	proxyAddr      string
	bound, decoy   *recorder
	mu             sync.Mutex
	resolved       []string
	resolveFailure error
}

func (e *plainEnv) url(host, path string) string {
	return "http://" + host + ":" + strconv.Itoa(e.port) + path
}

func newPlainEnv(t *testing.T, bindings []vault.CredentialBinding) *plainEnv {
	t.Helper()
	e := &plainEnv{bound: &recorder{name: "bound"}, decoy: &recorder{name: "decoy"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.port = ln.Addr().(*net.TCPAddr).Port
	decoyLn, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(e.port)))
	if err != nil {
		ln.Close()
		t.Skipf("cannot listen on 127.0.0.2 (needed for a second origin on the same port): %v", err)
	}
	for _, s := range []struct {
		ln net.Listener
		h  http.Handler
	}{{ln, e.bound}, {decoyLn, e.decoy}} {
		srv := &http.Server{Handler: s.h}
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(s.ln) }()
		t.Cleanup(func() { srv.Close(); <-done })
	}

	store := vault.NewStore()
	creds := []vault.Credential{
		{Name: "p", Source: vault.CredentialSource{Type: vault.SourceInline, Value: plainSecret}},
		{Name: "s", Source: vault.CredentialSource{Type: vault.SourceInline, Value: subSecret}},
	}
	for i := range bindings {
		bindings[i].Match.Schemes = []string{"http"}
		bindings[i].Match.Ports = []int{e.port} // the sidecar allows 80 only; the store any
	}
	if _, err := store.Create(vault.CreateRequest{Credentials: creds, Bindings: bindings}); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("sandbox-plain")
	if err != nil {
		t.Fatal(err)
	}
	e.proxyAddr, _ = startPlainProxy(t, Config{
		CA:          ca,
		Injector:    store,
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.2", e.port },
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.resolved = append(e.resolved, host)
			if e.resolveFailure != nil {
				return nil, e.resolveFailure
			}
			if strings.HasSuffix(host, "bound.test") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host")
		},
	})
	tr := &http.Transport{
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, e.proxyAddr) // the transparent redirect
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

// do sends one request as the sandbox and checks that the answer shows no
// secret in any encoding the proxy may have sent it in.
func (e *plainEnv) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	var all bytes.Buffer
	all.Write(b)
	resp.Header.Write(&all)
	for _, s := range []string{plainSecret, subSecret, "sub%26secret", `sub\u0026secret`} {
		if bytes.Contains(all.Bytes(), []byte(s)) {
			t.Errorf("%s %s: the answer shows a secret (%q):\n%s", req.Method, req.URL, s, all.Bytes())
		}
	}
	return resp, string(b)
}

func newReq(t *testing.T, method, url string, body io.Reader, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// TestPlainBoundRequestGoesToBoundHost is the heart of plain-HTTP safety:
// the sandbox connects to an address of its choosing (the decoy) with a
// bound Host; the request, with the credential, goes to the bound host's
// resolved address, and the decoy never sees it.
func TestPlainBoundRequestGoesToBoundHost(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthBearer, Credential: "p"})})
	resp, body := e.do(t, newReq(t, "GET", e.url("bound.test", "/whoami"), nil, "Authorization", "Bearer placeholder"))
	if resp.StatusCode != 200 || resp.Header.Get("X-Origin") != "bound" {
		t.Fatalf("answer %d from %q; want 200 from the bound host", resp.StatusCode, resp.Header.Get("X-Origin"))
	}
	if got := e.bound.last(t).header.Get("Authorization"); got != "Bearer "+plainSecret {
		t.Errorf("bound host got Authorization %q; want the credential", got)
	}
	if resp.Header.Get("X-Echo-Auth") != "[REDACTED]" || !strings.Contains(body, strings.Repeat("*", len(plainSecret))) {
		t.Errorf("echoed credential not masked: header %q, body %q", resp.Header.Get("X-Echo-Auth"), body)
	}
	if n := len(e.decoy.all()); n != 0 {
		t.Errorf("the address the sandbox chose received %d requests; want none", n)
	}
	e.mu.Lock()
	resolved := strings.Join(e.resolved, ",")
	e.mu.Unlock()
	if resolved != "bound.test" {
		t.Errorf("resolved %q; want bound.test once", resolved)
	}
}

// TestPlainUnboundPassesThrough: requests for other hosts go to the
// original destination with their placeholders untouched, on a spliced
// connection and on one the proxy serves.
func TestPlainUnboundPassesThrough(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthPassthrough,
		Substitutions: []vault.Substitution{{Credential: "p", Placeholder: "{{P}}", In: []string{"header", "query", "path", "body"}}}})})
	check := func(what string) {
		t.Helper()
		got := e.decoy.last(t)
		uri, _ := url.PathUnescape(got.uri)
		if got.header.Get("X-Key") != "{{P}}" || uri != "/a/{{P}}?k={{P}}" || got.body != "{{P}}" {
			t.Errorf("%s: the original destination got %+v; want every placeholder untouched", what, got)
		}
	}
	// First request unbound: the connection is spliced.
	resp, _ := e.do(t, newReq(t, "POST", e.url("other.test", "/a/{{P}}?k={{P}}"), strings.NewReader("{{P}}"), "X-Key", "{{P}}"))
	if resp.Header.Get("X-Origin") != "decoy" {
		t.Fatalf("unbound request answered by %q; want the original destination", resp.Header.Get("X-Origin"))
	}
	check("spliced")
	// Bound first, then unbound on the same (kept-alive) connection.
	e.client.Transport.(*http.Transport).CloseIdleConnections()
	conn, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, host := range []string{"bound.test", "other.test"} {
		fmt.Fprintf(conn, "POST /a/{{P}}?k={{P}} HTTP/1.1\r\nHost: %s:%d\r\nX-Key: {{P}}\r\nContent-Length: 5\r\n\r\n{{P}}", host, e.port)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := map[string]string{"bound.test": "bound", "other.test": "decoy"}[host]
		if resp.Header.Get("X-Origin") != want {
			t.Fatalf("%s answered by %q; want %s", host, resp.Header.Get("X-Origin"), want)
		}
	}
	check("served")
	if got := e.bound.last(t); got.header.Get("X-Key") != plainSecret || got.body != plainSecret {
		t.Errorf("bound request not substituted: %+v", got)
	}
}

// TestPlainSubstitutions replaces a placeholder in each surface, encoded
// for it, and checks the surfaces a substitution does not list.
func TestPlainSubstitutions(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{
		bind("all", "bound.test", vault.Auth{Type: vault.AuthPassthrough, Substitutions: []vault.Substitution{
			{Credential: "s", Placeholder: "{{S}}", In: []string{"path", "query", "header", "body"}},
		}}),
		bind("hdr", "hdr.bound.test", vault.Auth{Type: vault.AuthAPIKey, Name: "X-Api-Key", Credential: "p", Substitutions: []vault.Substitution{
			{Credential: "s", Placeholder: "{{S}}", In: []string{"header"}},
		}}),
	})
	const (
		pathEnc  = "sub&secret%2F6666%20%22q%22"
		queryEnc = "sub%26secret%2F6666+%22q%22"
		jsonEnc  = `sub\u0026secret/6666 \"q\"`
	)
	e.do(t, newReq(t, "GET", e.url("bound.test", "/v1/{{S}}/x?key={{S}}&a=1"), nil, "X-Token", "t={{S}}", "Cookie", "c={{S}}"))
	got := e.bound.last(t)
	if want := "/v1/" + pathEnc + "/x?key=" + queryEnc + "&a=1"; got.uri != want {
		t.Errorf("target %q; want %q", got.uri, want)
	}
	if got.header.Get("X-Token") != "t="+subSecret || got.header.Get("Cookie") != "c="+subSecret {
		t.Errorf("headers %v not substituted", got.header)
	}

	for _, tt := range []struct {
		name, ctype, encoding, body, want string
	}{
		{"json", "application/json", "", `{"k":"{{S}}"}`, `{"k":"` + jsonEnc + `"}`},
		{"form", "application/x-www-form-urlencoded", "", "k={{S}}&b=2", "k=" + queryEnc + "&b=2"},
		{"text", "text/plain", "", "k={{S}}", "k=" + subSecret},
		{"multipart skipped", "multipart/form-data; boundary=zz", "", "--zz\r\n\r\n{{S}}\r\n--zz--\r\n", "--zz\r\n\r\n{{S}}\r\n--zz--\r\n"},
	} {
		req := newReq(t, "POST", e.url("bound.test", "/post"), strings.NewReader(tt.body), "Content-Type", tt.ctype)
		e.do(t, req)
		got := e.bound.last(t)
		if got.body != tt.want {
			t.Errorf("%s body %q; want %q", tt.name, got.body, tt.want)
		}
		if cl := got.header.Get("Content-Length"); tt.want != tt.body && cl != "" && cl != strconv.Itoa(len(tt.want)) {
			t.Errorf("%s: Content-Length %s for a %d-byte body", tt.name, cl, len(tt.want))
		}
	}

	// Compressed: sent as it is.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, `{"k":"{{S}}"}`)
	zw.Close()
	e.do(t, newReq(t, "POST", e.url("bound.test", "/post"), bytes.NewReader(gz.Bytes()), "Content-Type", "application/json", "Content-Encoding", "gzip"))
	if got := e.bound.last(t); got.body != gz.String() {
		t.Errorf("gzip body changed")
	}

	// Large and unknown-length bodies stream and go out chunked.
	big := strings.Repeat("0123456789abcdef", (maxRewrittenBody/16)+1024) + "{{S}}" + strings.Repeat("x", 100)
	want := strings.Replace(big, "{{S}}", subSecret, 1)
	for _, known := range []bool{true, false} {
		var body io.Reader = strings.NewReader(big)
		if !known {
			body = io.MultiReader(body) // hides the length: the client sends chunked
		}
		req := newReq(t, "PUT", e.url("bound.test", "/big"), body, "Content-Type", "text/plain")
		resp, echoed := e.do(t, req)
		got := e.bound.last(t)
		if resp.StatusCode != 200 || got.body != want {
			t.Errorf("large body (known length %v): %d bytes arrived, want %d", known, len(got.body), len(want))
		}
		if !strings.Contains(echoed, strings.Repeat("*", len(subSecret))) {
			t.Errorf("large body (known length %v): echo not masked", known)
		}
	}

	// A substitution in one surface only: the others keep the placeholder.
	e.do(t, newReq(t, "POST", e.url("hdr.bound.test", "/p/{{S}}?q={{S}}"), strings.NewReader("{{S}}"), "X-A", "{{S}}"))
	got = e.bound.last(t)
	if got.header.Get("X-A") != subSecret || got.header.Get("X-Api-Key") != plainSecret || got.body != "{{S}}" || !strings.Contains(got.uri, "%7B%7BS%7D%7D") {
		t.Errorf("header-only substitution: %+v", got)
	}
}

// TestPlainResolveFailure: a bound host that cannot be resolved (or that
// the policy denies) gets 502, and nothing goes to the address the sandbox
// chose.
func TestPlainResolveFailure(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthBearer, Credential: "p"})})
	e.mu.Lock()
	e.resolveFailure = errors.New("host \"bound.test\" is denied by the network policy")
	e.mu.Unlock()
	resp, _ := e.do(t, newReq(t, "GET", e.url("bound.test", "/"), nil))
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d; want 502", resp.StatusCode)
	}
	if len(e.decoy.all())+len(e.bound.all()) != 0 {
		t.Errorf("a request reached an origin")
	}
}

// TestPlainNotHTTPSpliced: bytes that are not an HTTP request go to the
// original destination as they are.
func TestPlainNotHTTPSpliced(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthBearer, Credential: "p"})})
	conn, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "\x16\x03\x01 not http\r\n\r\n")
	// The decoy (an HTTP server) answers 400 to the garbage: it came through.
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer from the original destination: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d; want the original destination's 400", resp.StatusCode)
	}
}

// TestSubstitutionOverTLS: the same substitutions on intercepted HTTPS; the
// echo is masked and an unbound host (a spliced connection) gets the
// placeholder as the sandbox wrote it.
func TestSubstitutionOverTLS(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	handler := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		line := r.URL.RawQuery + "|" + r.Header.Get("X-K") + "|" + string(b)
		mu.Lock()
		seen = append(seen, line)
		mu.Unlock()
		io.WriteString(w, line)
	}
	e := newEnv(t, []vault.CredentialBinding{bind("sub", "sub.test", vault.Auth{Type: vault.AuthPassthrough,
		Substitutions: []vault.Substitution{{Credential: "c2", Placeholder: "KEY_PLACEHOLDER", In: []string{"query", "header", "body"}}}})}, handler)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	code, body := e.do(t, "POST", e.url("sub.test", "/x?k=KEY_PLACEHOLDER"), http.Header{"X-K": {"KEY_PLACEHOLDER"}}, strings.NewReader("v=KEY_PLACEHOLDER"))
	if want := "k=" + secretKey + "|" + secretKey + "|v=" + secretKey; code != 200 || last() != want {
		t.Errorf("bound: origin saw %q; want %q", last(), want)
	}
	if masked := strings.Repeat("*", len(secretKey)); strings.Count(body, masked) != 3 {
		t.Errorf("bound: echo %q not masked three times", body)
	}
	e.do(t, "POST", e.url("unbound.test", "/x?k=KEY_PLACEHOLDER"), http.Header{"X-K": {"KEY_PLACEHOLDER"}}, strings.NewReader("v=KEY_PLACEHOLDER"))
	if want := "k=KEY_PLACEHOLDER|KEY_PLACEHOLDER|v=KEY_PLACEHOLDER"; last() != want {
		t.Errorf("unbound: origin saw %q; want the placeholders untouched", last())
	}
}

// TestPlainServerSpeaksFirst: a connection that sends nothing within the
// hello timeout (a protocol where the server speaks first) is spliced to
// its original destination.
func TestPlainServerSpeaksFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "220 banner\r\n")
		io.Copy(io.Discard, c)
	}()
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	// An http binding on the port, so the proxy waits for a request head.
	store := vault.NewStore()
	b := bind("b", "bound.test", vault.Auth{Type: vault.AuthBearer, Credential: "p"})
	b.Match.Schemes, b.Match.Ports = []string{"http"}, []int{ln.Addr().(*net.TCPAddr).Port}
	if _, err := store.Create(vault.CreateRequest{Credentials: []vault.Credential{
		{Name: "p", Source: vault.CredentialSource{Type: vault.SourceInline, Value: plainSecret}}}, Bindings: []vault.CredentialBinding{b}}); err != nil {
		t.Fatal(err)
	}
	proxyAddr, _ := startPlainProxy(t, Config{CA: ca, Injector: store, HelloTimeout: 100 * time.Millisecond,
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", ln.Addr().(*net.TCPAddr).Port }})
	wantBanner(t, proxyAddr, "want the origin's banner")
}

// TestInMemoryBodyGrowthBounded: a small body full of a short placeholder
// would expand many times over with a long secret; the proxy rewrites it
// in memory only while the result stays small and streams the rest.
func TestInMemoryBodyGrowthBounded(t *testing.T) {
	big := strings.Repeat("v", 1<<10)
	plan := &inject.Plan{Substitutions: []inject.Substitution{{Placeholder: "X", Value: big, In: inject.InBody}}}
	body := strings.Repeat("X", 64<<10) // 64 MiB once substituted
	r := httptest.NewRequest("POST", "http://bound.test/", strings.NewReader(body))
	r.Header.Set("Content-Type", "text/plain")
	if err := substituteBody(r, plan); err != nil {
		t.Fatal(err)
	}
	if r.ContentLength != -1 {
		t.Errorf("ContentLength = %d; want -1 (streamed, not held in memory)", r.ContentLength)
	}
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil || n != int64(len(body)*len(big)) {
		t.Errorf("body: %d bytes, %v; want %d", n, err, len(body)*len(big))
	}
}

// TestPlainHostVariants: only a Host in plain host[:port] form, with the
// connection's port if any, gets a binding's credential; a variant that
// merely normalizes to the bound name (another port, a list, brackets)
// goes to the original destination with its placeholder, as an unbound
// request does. Case and a trailing dot are the same name.
func TestPlainHostVariants(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthPassthrough,
		Substitutions: []vault.Substitution{{Credential: "p", Placeholder: "{{P}}", In: []string{"header"}}}})})
	port := strconv.Itoa(e.port)
	send := func(host string) string {
		t.Helper()
		conn, err := net.Dial("tcp", e.proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nX-Key: {{P}}\r\nConnection: close\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("Host %q: %v", host, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Origin")
	}
	for _, host := range []string{"bound.test:1", "bound.test:" + port + ",evil.test", "bound.test:evil.test",
		"[bound.test]", "[bound.test]:" + port, "bound.test:0" + port, "bound.test:"} {
		if got := send(host); got != "decoy" {
			t.Errorf("Host %q answered by %q; want the original destination", host, got)
			continue
		}
		if got := e.decoy.last(t).header.Get("X-Key"); got != "{{P}}" {
			t.Errorf("Host %q: the original destination got X-Key %q; want the placeholder", host, got)
		}
	}
	for _, host := range []string{"BOUND.test", "bound.test.", "bound.test:" + port} {
		if got := send(host); got != "bound" {
			t.Errorf("Host %q answered by %q; want the bound host", host, got)
			continue
		}
		if got := e.bound.last(t).header.Get("X-Key"); got != plainSecret {
			t.Errorf("Host %q: the bound host got X-Key %q; want the credential", host, got)
		}
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFailureLogHidesSecrets: an origin that is not HTTP and echoes what it
// gets makes the response parser fail with the echoed line in its error;
// the proxy's log line must not carry the substituted secret.
func TestFailureLogHidesSecrets(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() { echo.Close(); wg.Wait() }()
	wg.Go(func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); io.Copy(c, c) })
		}
	})
	port := echo.Addr().(*net.TCPAddr).Port
	store := vault.NewStore()
	b := bind("b", "bound.test", vault.Auth{Type: vault.AuthPassthrough,
		Substitutions: []vault.Substitution{{Credential: "p", Placeholder: "{{P}}", In: []string{"path"}}}})
	b.Match.Schemes, b.Match.Ports = []string{"http"}, []int{port}
	if _, err := store.Create(vault.CreateRequest{Credentials: []vault.Credential{
		{Name: "p", Source: vault.CredentialSource{Type: vault.SourceInline, Value: plainSecret}}}, Bindings: []vault.CredentialBinding{b}}); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	proxyAddr, stop := startPlainProxy(t, Config{CA: ca, Injector: store,
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.2", port },
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}})
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /x/{{P}} HTTP/1.1\r\nHost: bound.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d; want 502", resp.StatusCode)
	}
	stop() // the log is complete once the proxy has stopped
	if l := logs.String(); strings.Contains(l, plainSecret) || !strings.Contains(l, "upstream request failed") {
		t.Errorf("log shows the secret, or lacks the failure:\n%s", l)
	}
}

// TestPlainAbsoluteFormAndDuplicateHost: an absolute-form target decides
// the host (its Host header is ignored, as the server does), so a bound
// Host header cannot smuggle the credential to the URL's host. A first
// request with two Host headers is not HTTP to the proxy: it goes, unread
// and without credential, to the original destination (which refuses it).
func TestPlainAbsoluteFormAndDuplicateHost(t *testing.T) {
	e := newPlainEnv(t, []vault.CredentialBinding{bind("b", "bound.test", vault.Auth{Type: vault.AuthPassthrough,
		Substitutions: []vault.Substitution{{Credential: "p", Placeholder: "{{P}}", In: []string{"header"}}}})})
	port := strconv.Itoa(e.port)
	send := func(head string) *http.Response {
		t.Helper()
		conn, err := net.Dial("tcp", e.proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, head+"X-Key: {{P}}\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := send("GET http://other.test:" + port + "/ HTTP/1.1\r\nHost: bound.test\r\n"); r.Header.Get("X-Origin") != "decoy" || e.decoy.last(t).header.Get("X-Key") != "{{P}}" {
		t.Errorf("absolute-form unbound target with a bound Host: answered by %q; want the original destination, placeholder kept", r.Header.Get("X-Origin"))
	}
	if r := send("GET http://bound.test:" + port + "/ HTTP/1.1\r\nHost: other.test\r\n"); r.Header.Get("X-Origin") != "bound" || e.bound.last(t).header.Get("X-Key") != plainSecret {
		t.Errorf("absolute-form bound target: answered by %q; want the bound host with the credential", r.Header.Get("X-Origin"))
	}
	n := len(e.bound.all())
	if r := send("GET / HTTP/1.1\r\nHost: bound.test\r\nHost: other.test\r\n"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("two Host headers: status %d; want 400", r.StatusCode)
	}
	if len(e.bound.all()) != n {
		t.Errorf("a request with two Host headers reached the bound host")
	}
}

// TestNoBindingForSchemeSplicesAtOnce: with no binding for a scheme on a
// port, the proxy does not read the first bytes at all: it connects the
// sandbox to its destination at once, so port 80 behaves as it did
// without the proxy (a server that speaks first is not held up by the
// hello timeout).
func TestNoBindingForSchemeSplicesAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() { ln.Close(); wg.Wait() }()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "220 banner\r\n")
		io.Copy(io.Discard, c)
	})
	port := ln.Addr().(*net.TCPAddr).Port
	store := vault.NewStore()
	b := bind("tls-only", "bound.test", vault.Auth{Type: vault.AuthBearer, Credential: "p"}) // https
	if _, err := store.Create(vault.CreateRequest{Credentials: []vault.Credential{
		{Name: "p", Source: vault.CredentialSource{Type: vault.SourceInline, Value: plainSecret}}}, Bindings: []vault.CredentialBinding{b}}); err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("s")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr, _ := startPlainProxy(t, Config{CA: ca, Injector: store, HelloTimeout: time.Hour,
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", port }})
	wantBanner(t, proxyAddr, "want the origin's banner at once")
}

// wantBanner connects to the proxy at addr and reads the line a
// server-speaks-first origin sends, which must come through.
func wantBanner(t *testing.T, addr, want string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "220 banner\r\n" {
		t.Fatalf("read %q, %v; %s", line, err, want)
	}
}
